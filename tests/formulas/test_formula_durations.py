"""Durations: the forms a formula may write, the exact errors for the others, and no other exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.errors import FormulaError
from plangate.formulas.durations import MAX_SECONDS, parse_duration

HINT = "expected a duration like '30m', '2h', '10s' or '1h30m', got"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10),
        ("30m", 1_800),
        ("2h", 7_200),
        ("1h30m", 5_400),
        ("1d2h3m4s", 93_784),
        (" 45s ", 45),
        (90, 90),
    ],
)
def test_parses_durations_to_whole_seconds(text: str | int, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "30x",
            HINT + " '30x': unknown unit 'x' (use d, h, m or s)",
        ),
        (
            "1h30",
            HINT + " '1h30': the number 30 has no unit (d, h, m or s)",
        ),
        (
            "30m1h",
            HINT + " '30m1h': units must go from largest to smallest, each at most once",
        ),
        (
            "5m5m",
            HINT + " '5m5m': units must go from largest to smallest, each at most once",
        ),
        (
            "1 h",
            HINT + " '1 h': the number 1 has no unit (d, h, m or s)",
        ),
        ("", HINT + " an empty string"),
        ("0s", "a duration must be longer than 0 seconds, got '0s'"),
        (-5, "a duration must be longer than 0 seconds, got -5"),
        ("99999d", "duration '99999d' is longer than the limit of 10 years"),
        (True, HINT + " a boolean"),
        (1.5, HINT + " a number with a fraction"),
    ],
)
def test_bad_durations_say_what_was_expected_and_found(value: object, message: str) -> None:
    with pytest.raises(FormulaError) as caught:
        parse_duration(value, path="steps[0].timeout")
    assert caught.value.detail == message
    assert caught.value.path == "steps[0].timeout"


@given(st.text(alphabet="0123456789dhms x.-é\n", max_size=14))
def test_any_text_parses_or_raises_formula_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except FormulaError:
        return
    assert 0 < seconds <= MAX_SECONDS


@given(st.integers(1, MAX_SECONDS))
def test_written_parts_add_up(total: int) -> None:
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")]
    assert parse_duration("".join(f"{n}{unit}" for n, unit in parts if n)) == total
