"""The ask benchmark's scorer: execution accuracy of result rows, "no data" results and stated figures."""

from __future__ import annotations

import itertools
import random

import pytest
from bench_modules import load
from hypothesis import given
from hypothesis import strategies as st

scoring = load("_scoring")
rows_match = scoring.rows_match


# ------------------------------------------------------------------------------------------ cell values


def test_an_integer_equals_the_same_float_and_numeric_text() -> None:
    assert rows_match([(300,)], [(300.0,)], ordered=False)
    assert rows_match([("2025", 132)], [(2025, 132)], ordered=False)  # strftime('%Y') vs CAST(... AS INTEGER)
    assert rows_match([(True,)], [(1,)], ordered=False)
    assert rows_match([(-0.0,)], [(0,)], ordered=False)


def test_numbers_agree_to_half_a_unit_of_the_precision() -> None:
    gold = [(5680153.510000261,)]
    assert rows_match(gold, [(5680153.51,)], ordered=False)
    assert not rows_match(gold, [(5680153.52,)], ordered=False)
    # A gold value exactly between two roundings matches either (3.975 is stored as 3.97499999…).
    assert rows_match([(3.975,)], [(3.98,)], ordered=False)
    assert rows_match([(3.975,)], [(3.97,)], ordered=False)
    assert not rows_match([(3.975,)], [(3.99,)], ordered=False)


def test_precision_is_per_question() -> None:
    assert rows_match([(34.528301886792455,)], [(34.5,)], ordered=False, precision=1)
    assert not rows_match([(34.528301886792455,)], [(34.5,)], ordered=False, precision=2)
    assert not rows_match([(4000,)], [(4001,)], ordered=False, precision=0)
    assert rows_match([(1.2e6,)], [(1_200_000.4,)], ordered=False, precision=0)


def test_null_matches_only_null() -> None:
    assert rows_match([(None,)], [(None,)], ordered=False)
    assert not rows_match([(None,)], [(0,)], ordered=False)
    assert not rows_match([(None,)], [("",)], ordered=False)
    assert not rows_match([(0,)], [(None,)], ordered=False)


def test_text_and_bytes_match_only_when_equal() -> None:
    assert not rows_match([("East",)], [("east",)], ordered=False)
    assert not rows_match([("East",)], [("East ",)], ordered=False)
    assert rows_match([(b"\x00\x01",)], [(b"\x00\x01",)], ordered=False)
    assert not rows_match([(b"1",)], [("1",)], ordered=False)


def test_infinities_match_themselves_only() -> None:
    assert rows_match([(float("inf"),)], [(float("inf"),)], ordered=False)
    assert not rows_match([(float("inf"),)], [(1e308,)], ordered=False)
    assert not rows_match([(float("inf"),)], [(float("-inf"),)], ordered=False)


# ------------------------------------------------------------------------------------------------ rows


def test_unordered_rows_compare_as_a_multiset() -> None:
    gold = [("web", 1916), ("mobile", 1188), ("store", 678), ("phone", 218)]
    assert rows_match(gold, list(reversed(gold)), ordered=False)
    assert not rows_match(gold, gold[:3], ordered=False)
    assert not rows_match(gold, [*gold, ("fax", 1)], ordered=False)


def test_duplicate_rows_count() -> None:
    assert rows_match([(1,), (1,), (2,)], [(2,), (1,), (1,)], ordered=False)
    assert not rows_match([(1,), (1,), (2,)], [(1,), (2,), (2,)], ordered=False)
    assert not rows_match([(1,), (2,)], [(1,), (1,), (2,)], ordered=False)


def test_ordered_rows_must_come_in_the_gold_order() -> None:
    gold = [("Electronics", 933100.64), ("Outdoor", 339312.87), ("Office", 213139.84)]
    assert rows_match(gold, gold, ordered=True)
    swapped = [gold[1], gold[0], gold[2]]
    assert not rows_match(gold, swapped, ordered=True)
    assert rows_match(gold, swapped, ordered=False)


def test_empty_results() -> None:
    assert rows_match([], [], ordered=False)
    assert rows_match([], [], ordered=True)
    assert not rows_match([], [(0,)], ordered=False)
    assert not rows_match([(0,)], [], ordered=False)


def test_ragged_rows_never_match() -> None:
    assert not rows_match([(1, 2), (3, 4)], [(1, 2), (3,)], ordered=False)


def test_a_tolerance_that_breaks_the_sorted_pairing_still_finds_the_matching() -> None:
    # Sorted, (1.0, 10) meets (1.0, 20); only pairing each row with its near-equal finds the match.
    gold = [(1.0, 10), (1.004, 20)]
    assert rows_match(gold, [(1.004, 10), (1.0, 20)], ordered=False)
    assert not rows_match(gold, [(1.004, 10), (1.0, 30)], ordered=False)


def _brute_force(gold: list[tuple[float, ...]], got: list[tuple[float, ...]], tol: float) -> bool:
    if len(gold) != len(got):
        return False
    for columns in itertools.permutations(range(len(got[0]))):
        projected = [tuple(row[c] for c in columns) for row in got]
        for order in itertools.permutations(projected):
            if all(
                abs(a - b) <= tol for g, r in zip(gold, order, strict=True) for a, b in zip(g, r, strict=True)
            ):
                return True
    return False


# Values 0.004 apart and results that shift them by a step or two: within the tolerance (0.005) a value can
# match either neighbour but not both, the cases where pairing sorted rows is not enough.
_STEP = 0.004


@st.composite
def _near_results(draw: st.DrawFn) -> tuple[list[tuple[float, ...]], list[tuple[float, ...]]]:
    width = draw(st.integers(1, 2))
    cell = st.integers(0, 4).map(lambda step: step * _STEP)
    gold = draw(st.lists(st.tuples(*[cell] * width), min_size=1, max_size=5))
    shift = st.sampled_from([-_STEP, 0.0, 0.0, _STEP, 2 * _STEP])
    got = [tuple(value + draw(shift) for value in row) for row in draw(st.permutations(gold))]
    return gold, got


@given(_near_results())
def test_unordered_matching_agrees_with_trying_every_pairing(
    case: tuple[list[tuple[float, ...]], list[tuple[float, ...]]],
) -> None:
    gold, got = case
    assert rows_match(gold, got, ordered=False) == _brute_force(gold, got, scoring.tolerance(2))


def test_many_rows_in_any_order() -> None:
    rng = random.Random(7)
    gold = [(f"customer {index}", index % 7, rng.uniform(0, 1e5)) for index in range(500)]
    got = [(value, label, count) for label, count, value in gold]
    rng.shuffle(got)
    assert rows_match(gold, got, ordered=False)
    got[123] = (got[123][0] + 0.01, got[123][1], got[123][2])
    assert not rows_match(gold, got, ordered=False)


# --------------------------------------------------------------------------------------------- columns


def test_column_order_does_not_matter() -> None:
    assert rows_match([("East", 1184731.29)], [(1184731.29, "East")], ordered=False)
    gold = [("a", 1, "x"), ("b", 2, "y")]
    assert rows_match(gold, [("x", "a", 1), ("y", "b", 2)], ordered=True)


def test_columns_pair_consistently_across_rows() -> None:
    # Each column alone matches, but the rows do not: 'a' goes with 1 in the gold, with 2 in the result.
    assert not rows_match([("a", 1), ("b", 2)], [("a", 2), ("b", 1)], ordered=False)


def test_interchangeable_columns() -> None:
    assert rows_match([(1, 2), (2, 1)], [(2, 1), (1, 2)], ordered=False)
    assert not rows_match([(1, 1), (2, 2)], [(1, 2), (2, 1)], ordered=False)


def test_extra_result_columns_are_allowed() -> None:
    gold = [("East",), ("West",), ("South",)]
    got = [("West", 819529.17, 2), ("East", 1184731.29, 1), ("South", 459820.11, 3)]
    assert rows_match(gold, got, ordered=False)
    assert not rows_match(gold, got, ordered=True)  # ranked by the revenue, not listed in the gold order
    assert rows_match(gold, sorted(got, key=lambda row: row[2]), ordered=True)


def test_a_result_with_fewer_columns_than_the_gold_does_not_match() -> None:
    assert not rows_match([("East", 1184731.29)], [("East",)], ordered=False)


def test_extra_columns_cannot_hide_a_wrong_row_count() -> None:
    # Five categories are the answer; one row per product, projected on its category, is not.
    gold = [(category,) for category in ("Apparel", "Electronics", "Home", "Office", "Outdoor")]
    got = [(category, f"product {index}") for (category,) in gold for index in range(8)]
    assert not rows_match(gold, got, ordered=False)


def test_the_pairing_search_tries_more_than_the_first_candidate() -> None:
    # Gold column 1 matches result columns 1 and 2 on their own; only column 2 fits row by row.
    gold = [(1, 5), (2, 6)]
    assert rows_match(gold, [(1, 6, 5), (2, 5, 6)], ordered=False)
    assert rows_match(gold, [(1, 6, 5), (2, 5, 6)], ordered=True)


def test_the_pairing_search_is_bounded() -> None:
    pairings = list(scoring._mappings([list(range(10))] * 8, scoring.MAX_COLUMN_MAPPINGS))
    assert len(pairings) == scoring.MAX_COLUMN_MAPPINGS
    assert all(len(set(pairing)) == 8 for pairing in pairings)


# --------------------------------------------------------------------------------------------- no data


@pytest.mark.parametrize(
    "rows",
    [[], [(None,)], [(0,)], [(0.0,)], [(0, None)], [("0",)]],
    ids=["no rows", "null", "zero", "zero float", "zero and null", "zero as text"],
)
def test_no_rows_or_one_row_of_null_or_zero_is_no_data(rows: list[tuple[object, ...]]) -> None:
    assert scoring.is_no_data(rows)


@pytest.mark.parametrize(
    "rows",
    [[(1,)], [(0.001,)], [("2024", 0)], [(None,), (None,)], [("",)], [("none",)]],
    ids=["a count", "a small sum", "a label beside zero", "two rows", "empty text", "text"],
)
def test_any_other_result_is_data(rows: list[tuple[object, ...]]) -> None:
    assert not scoring.is_no_data(rows)


@pytest.mark.parametrize(
    ("answer", "question"),
    [
        ("There is no data for 2024: orders run from 2025-01-01 to 2026-06-30.", "How many orders in 2024?"),
        ("No sales in Q3 2026; the data ends on 30 June 2026.", "Which products sold best in Q3 2026?"),
        ("The data ends on June 30, 2026, so I cannot say.", "What was revenue in December 2026?"),
        ("None of the top 3 can be named: there were no sales in 2010.", "Which 3 genres sold best in 2010?"),
        ("Invoices run from the 1st of January 2021 to 22 Dec 2025 only.", "Sales in H1 2026?"),
        ("No invoices between 2026-01-01 00:00:00 and 2026-03-31.", "Invoices by country for Q1 2026?"),
    ],
)
def test_periods_and_numbers_of_the_question_are_not_figures(answer: str, question: str) -> None:
    assert scoring.figures_in(answer, question) == []


@pytest.mark.parametrize(
    ("answer", "figures"),
    [
        ("We had 0 orders in 2024.", ["0"]),
        ("Revenue in December 2026 was $1,234.50.", ["1,234.50"]),
        ("There were 2,574 orders and 34.5% came by mobile.", ["2,574", "34.5"]),
        ("Total: 4000 orders (7 cancelled) in 2024", ["4000", "7"]),
        ("Sales were -12.5 in 2020", ["-12.5"]),
    ],
)
def test_every_other_number_is_a_figure(answer: str, figures: list[str]) -> None:
    assert scoring.figures_in(answer, "How many orders did we get in 2024?") == figures
