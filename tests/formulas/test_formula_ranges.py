"""Loop range arithmetic: precedence, exactness, limits, exact errors, and no exception but FormulaError."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.errors import FormulaError
from plangate.formulas.ranges import evaluate_arithmetic, parse_range


@pytest.mark.parametrize(
    ("text", "bounds"),
    [
        ("1..10", (1, 10)),
        (" 2 .. (3*2)+1 ", (2, 7)),
        ("0..2^3-1", (0, 7)),
        ("1..7/2*2", (1, 7)),
        ("-2..-2^2+10", (-2, 6)),
        ("5..1", (5, 1)),
        ("(1+2)*(3-1)..2^2^2", (6, 16)),
    ],
)
def test_ranges_evaluate_both_bounds(text: str, bounds: tuple[int, int]) -> None:
    assert parse_range(text) == bounds


@pytest.mark.parametrize(
    ("text", "value"),
    [("2^3^2", 512), ("-2^2", -4), ("2*3+4", 10), ("2*(3+4)", 14), ("10/4", Fraction(5, 2)), ("1.5*2", 3)],
)
def test_precedence_and_exact_division(text: str, value: Fraction) -> None:
    assert evaluate_arithmetic(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5", "expected a range like '1..10', got '5'"),
        ("1..", "expected a number or '(' at column 4, found the end of the expression in '1..'"),
        ("1..2..3", "expected one '..' in range '1..2..3', found another at column 5"),
        ("1.5..3", "the range start of '1.5..3' is 3/2, expected a whole number"),
        ("a..b", "unexpected 'a' at column 1 in 'a..b'"),
        ("1..(2", "expected ')' at column 6, found the end in '1..(2'"),
        ("1/0..1", "division by zero at column 2 in '1/0..1'"),
        ("0^-1..1", "division by zero: 0 to a negative power at column 2 in '0^-1..1'"),
        ("2^0.5..1", "the exponent at column 2 is 1/2, expected a whole number in '2^0.5..1'"),
        ("9^99..1", "the exponent at column 2 is larger than 64 in '9^99..1'"),
        ("1..10^20", "a value is larger than 1e+15 in '1..10^20'"),
        ("1..2 3", "unexpected '3' at column 6 in '1..2 3'"),
    ],
)
def test_bad_ranges_name_the_column_and_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(FormulaError) as caught:
        parse_range(text, path="steps[1].loop.range")
    assert caught.value.detail == message
    assert caught.value.path == "steps[1].loop.range"


def test_nesting_is_limited() -> None:
    with pytest.raises(FormulaError, match="nests deeper than 32 levels"):
        parse_range("(" * 40 + "1" + ")" * 40 + "..2")


@given(st.text(alphabet="0127.+-*/^() xé", max_size=20))
def test_any_text_parses_or_raises_formula_error(text: str) -> None:
    try:
        start, end = parse_range(text)
    except FormulaError:
        return
    assert isinstance(start, int) and isinstance(end, int)


@given(st.integers(0, 2001 * 2001 - 1))
def test_arithmetic_matches_python(n: int) -> None:
    # One draw for two operands: hypothesis spends far more per draw than the parser does per example.
    a, b = n // 2001 - 1000, n % 2001 - 1000
    c = b % 50 + 1
    assert parse_range(f"{a}+{b}..({a}-{b})*{c}") == (a + b, (a - b) * c)
    assert evaluate_arithmetic(f"({a})/{c}") == Fraction(a, c)
