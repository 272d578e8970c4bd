"""ToolResult: derived success, clipped summaries, constructors and the JSON round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from plangate.tools import SUMMARY_LIMIT, ToolResult, clip_summary
from plangate.tools.result import result_from_value


def test_short_summaries_are_kept_and_long_ones_clipped_with_an_ellipsis() -> None:
    assert clip_summary("placed t1 at 9") == "placed t1 at 9"
    exact = "x" * 48
    assert clip_summary(exact) == exact
    clipped = clip_summary("y" * 49)
    assert clipped == "y" * 47 + "…"
    assert len(clipped) == 48


def test_whitespace_in_a_summary_is_collapsed() -> None:
    assert clip_summary("  two\n lines\tand  gaps ") == "two lines and gaps"


@given(st.text(max_size=120))
def test_summaries_never_exceed_the_limit(text: str) -> None:
    clipped = clip_summary(text)
    flat = " ".join(text.split())
    assert len(clipped) <= SUMMARY_LIMIT
    if len(flat) <= SUMMARY_LIMIT:
        assert clipped == flat
    else:
        assert clipped.endswith("…")
        assert flat.startswith(clipped[:-1].rstrip())


def test_every_result_has_its_summary_clipped() -> None:
    result = ToolResult(status="done", observation="ok", summary="z" * 100)
    assert len(result.summary) == 48
    assert result.success is True


def test_done_takes_the_first_non_empty_line_as_summary() -> None:
    result = ToolResult.done("\n\nregion | revenue\nNorth | 12\n", data={"rows": 1})
    assert (result.status, result.success, result.summary, result.data) == (
        "done",
        True,
        "region | revenue",
        {"rows": 1},
    )


def test_failed_and_blocked_carry_code_and_message() -> None:
    failed = ToolResult.failed("sql_error", "no such table: nope")
    assert (failed.status, failed.success, failed.error_code, failed.error_message, failed.observation) == (
        "failed",
        False,
        "sql_error",
        "no such table: nope",
        "error (sql_error): no such table: nope",
    )
    blocked = ToolResult.blocked("inactive_tool", "call context_tools_add first")
    assert (blocked.status, blocked.success, blocked.observation) == (
        "blocked",
        False,
        "not run (inactive_tool): call context_tools_add first",
    )


def test_success_is_derived_from_status_and_must_agree_with_it() -> None:
    assert ToolResult(status="failed", observation="x").success is False
    with pytest.raises(ValidationError, match="success must be False when status is 'blocked', got True"):
        ToolResult(status="blocked", success=True, observation="x")


def test_json_round_trip() -> None:
    result = ToolResult.done("3 rows", data={"columns": ["a"], "rows": [[1], [2], [3]]})
    text = result.model_dump_json()
    assert ToolResult.model_validate_json(text) == result


def test_results_are_immutable() -> None:
    result = ToolResult.done("ok")
    with pytest.raises(ValidationError):
        result.observation = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("observation", "summary"),
    [
        (
            '{\n  "url": "file:///tmp/published.jsonl",\n  "channel": "stable"\n}',
            "url: file:///tmp/published.jsonl, channel: stable",
        ),
        ('{"passed": 120, "failed": 0, "suite": "all"}', "passed: 120, failed: 0, suite: all"),
        ('{"rows": [[1, 2]], "ok": true}', "rows: [[1,2]], ok: true"),
        ("[\n  1,\n  2,\n  3\n]", "3 items: 1, 2, 3"),
        ('["eu-west"]', "1 item: eu-west"),
        ("{}", "{}"),
        ("{ not json\nsecond line", "{ not json"),
    ],
)
def test_a_json_observation_gets_a_readable_one_line_summary(observation: str, summary: str) -> None:
    # a pretty-printed JSON object used to be summarised by its first line: "{"
    assert ToolResult.done(observation).summary == clip_summary(summary)


def test_a_dict_returned_by_a_tool_is_summarised_by_its_keys() -> None:
    result = result_from_value({"artifact": "dist/app-1.4.0.txt", "bytes": 31})
    assert result.summary == "artifact: dist/app-1.4.0.txt, bytes: 31"


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), _json_values, max_size=8) | st.lists(_json_values, max_size=8))
def test_a_returned_object_or_list_is_summarised_as_its_json_text_would_be(value: object) -> None:
    result = result_from_value(value)
    # what the summary of the observation, parsed back from its text, says
    assert result.summary == ToolResult.done(result.observation).summary
    assert result.data == value


def test_a_returned_object_with_keys_that_are_not_text_is_summarised_as_its_json_text() -> None:
    result = result_from_value({1: "yes", None: "none", 2.5: [1, 2]})
    assert result.observation == '{"1":"yes","None":"none","2.5":[1,2]}'
    assert result.summary == ToolResult.done(result.observation).summary == "1: yes, None: none, 2.5: [1,2]"
