"""The number guard: every number an answer shows must be explained by the data the run read."""

from __future__ import annotations

import pytest

from plangate.copilot._numbers import Known, invented, shown_numbers


@pytest.fixture
def known() -> Known:
    found = Known()
    found.add_values([1328137.929999979, 899479.5899999859, "East", 0.25, 3, 42, None, True])
    found.add_values(["2025-03-01 00:00:00", "Order #7781 shipped", [12, {"deep": 65.5}]])
    return found


@pytest.mark.parametrize(
    "answer",
    [
        "East had 1,328,137.93 in revenue.",
        "East: 1328137.93",
        "about 1.3 million",
        "1.33M and 899.5k",
        "€1,328,138",
        "1,328,137 (rounded down)",
        "a quarter: 25%",
        "0.25 of it",
        "The top 3 regions",
        "on 2025-03-01",
        "in March 2025",
        "order 7781",
        "12 and 65.5 were nested",
        "1. East\n2. West\n3. South",
        "the 3rd region",
        "Q1 2025",
        "-42 change",
        "East led with no figures at all.",
    ],
)
def test_numbers_the_data_explains_pass(known: Known, answer: str) -> None:
    assert invented(answer, known) == []


@pytest.mark.parametrize(
    ("answer", "missing"),
    [
        ("East had 1,328,139 in revenue.", ["1,328,139"]),
        ("about 1.4 million", ["1.4 million"]),
        ("growth of 7% over 2024", ["7%", "2024"]),
        ("on 2024-01-01", ["2024-01-01"]),
        ("收入为12345元", ["12345"]),
        ("West: $900,000", ["900,000"]),
        ("12.5 and 13", ["12.5", "13"]),
    ],
)
def test_numbers_nothing_read_explains_are_named(known: Known, answer: str, missing: list[str]) -> None:
    assert invented(answer, known) == missing


def test_a_shown_number_keeps_its_precision_and_scale() -> None:
    numbers, dates = shown_numbers("1,234.50 and 3.2 billion and 40% on 2025-01-02")
    assert [(n.text, str(n.digits), n.places, n.scale, n.percent) for n in numbers] == [
        ("1,234.50", "1234.50", 2, 0, False),
        ("3.2 billion", "3.2", 1, 9, False),
        ("40%", "40", 0, 0, True),
    ]
    assert dates == ["2025-01-02"]


def test_the_question_and_arguments_count_once_added_as_text() -> None:
    known = Known()
    assert invented("the top 5 in 2030", known) == ["5", "2030"]
    known.add_text("Top 5 customers in 2030?")
    assert invented("the top 5 in 2030", known) == []


def test_adding_values_after_a_check_is_seen_by_the_next_check() -> None:
    known = Known()
    assert invented("12.5", known) == ["12.5"]
    known.add_value(12.5)
    assert invented("12.5", known) == []
