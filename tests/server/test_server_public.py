"""The filter every response and streamed event goes through: server paths shortened, the rest as written."""

from __future__ import annotations

import pytest

from plangate.server._public import public_text, public_usage


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cannot open /srv/models/weights/qwen.gguf", "cannot open …/qwen.gguf"),
        ("see https://example.com/a/b and a/b", "see https://example.com/a/b and a/b"),
        ("approve / reject", "approve / reject"),
        # a model named by its file: the path follows the provider's colon
        (
            "the model 'scripted:/tmp/x/responses.json' has no price",
            "the model 'scripted:…/responses.json' has no price",
        ),
        ("local:/models/q.gguf", "local:…/q.gguf"),
        ("openai:gpt-4o-mini and anthropic:claude", "openai:gpt-4o-mini and anthropic:claude"),
        # a route of this API is named, not hidden (before: 'GET …/sources')
        (
            "ask about it by name (GET /v1/sources lists them)",
            "ask about it by name (GET /v1/sources lists them)",
        ),
    ],
)
def test_paths_are_shortened_and_nothing_else_changes(text: str, shown: str) -> None:
    assert public_text(text) == shown


@pytest.mark.parametrize("text", ["'/etc/passwd'", "scripted:/a/b.json", "…/x and /y/z"])
def test_the_filter_applied_twice_is_the_filter_once(text: str) -> None:
    # before, a message filtered on two layers showed '……/passwd'
    assert public_text(public_text(text)) == public_text(text)


def test_a_usage_names_its_models_without_their_files() -> None:
    usage = {"models": {"scripted:/srv/a.json": {"calls": 1}, "openai:x": {"calls": 2}}, "cost": 0.0}
    assert public_usage(usage) == {
        "models": {"scripted:…/a.json": {"calls": 1}, "openai:x": {"calls": 2}},
        "cost": 0.0,
    }
    assert public_usage(None) is None
