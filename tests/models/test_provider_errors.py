"""Provider errors: HTTP statuses mapped to the error tree, and secrets kept out of every message."""

from __future__ import annotations

import pytest

from plangate.errors import ModelBehaviorError, RunError
from plangate.models import (
    ModelAuthenticationError,
    ModelProviderError,
    ModelRateLimitError,
    ModelRequestError,
    ModelUnavailableError,
    ScriptExhaustedError,
)
from plangate.models.errors import redact, server_detail, status_error


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, ModelRequestError),
        (401, ModelAuthenticationError),
        (403, ModelAuthenticationError),
        (404, ModelRequestError),
        (408, ModelUnavailableError),
        (413, ModelRequestError),
        (422, ModelRequestError),
        (429, ModelRateLimitError),
        (500, ModelUnavailableError),
        (529, ModelUnavailableError),
    ],
)
def test_statuses_map_to_the_tree(status: int, kind: type[ModelProviderError]) -> None:
    error = status_error("openai:m", status, "detail")
    assert type(error) is kind
    assert isinstance(error, RunError)
    assert error.status == status


def test_only_rate_limits_and_outages_are_retryable() -> None:
    assert status_error("p", 429, "").retryable
    assert status_error("p", 503, "").retryable
    assert not status_error("p", 401, "").retryable
    assert not status_error("p", 400, "").retryable


def test_the_message_is_one_short_line_without_secrets() -> None:
    detail = "Incorrect API key provided: sk-abc123SECRET.\n  See https://example.invalid " + "x" * 500
    error = status_error("openai:m", 401, detail, secrets=["sk-abc123SECRET", None])
    message = str(error)
    assert message.startswith(
        "openai:m: HTTP 401, the provider refused the credentials: Incorrect API key provided: "
    )
    assert "SECRET" not in message
    assert "\n" not in message
    assert len(message) < 400
    assert message.endswith("…")


def test_empty_detail_gives_no_trailing_colon() -> None:
    assert str(status_error("p", 500, "  ")) == "p: HTTP 500, the provider is unavailable"


def test_redact_masks_given_secrets_and_key_shapes() -> None:
    assert (
        redact("key=hunter2hunter2 and sk-proj-ABCDEFGH12", ["hunter2hunter2"])
        == "key=[redacted] and [redacted]"
    )
    assert redact("a skeleton key-ring", []) == "a skeleton key-ring"


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        # Too short to be a secret: nothing of the text is touched.
        ("the text of the context", ["x"], "the text of the context"),
        ("expected text, got next", ["x", "t", "ex"], "expected text, got next"),
        ("key 1234567 rejected", ["1234567"], "key 1234567 rejected"),
        # Long enough, as a whole token only: never the middle of another word.
        ("key hunter22 rejected", ["hunter22"], "key [redacted] rejected"),
        ("key=hunter22; xhunter22 hunter22x", ["hunter22"], "key=[redacted]; xhunter22 hunter22x"),
        ('{"key": "hunter22"}', ["hunter22"], '{"key": "[redacted]"}'),
        ("Bearer abcdefgh.", ["abcdefgh", None, ""], "Bearer [redacted]."),
        # The longer of two overlapping secrets goes whole.
        ("use abcdefgh-ijkl", ["abcdefgh", "abcdefgh-ijkl"], "use [redacted]"),
    ],
)
def test_redact_masks_only_secrets_long_enough_as_whole_tokens(
    text: str, secrets: list[str | None], expected: str
) -> None:
    assert redact(text, secrets) == expected


def test_server_detail_reads_common_error_bodies() -> None:
    assert server_detail({"error": {"message": "bad"}}, "fallback") == "bad"
    assert server_detail({"type": "error", "error": {"type": "x", "message": "worse"}}, "f") == "worse"
    assert server_detail({"error": "plain"}, "f") == "plain"
    assert server_detail({"message": "top"}, "f") == "top"
    assert server_detail("not json", "fallback") == "fallback"


def test_script_exhaustion_is_a_model_behavior_error() -> None:
    assert issubclass(ScriptExhaustedError, ModelBehaviorError)
