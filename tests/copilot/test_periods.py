"""The period a question names, read from its words."""

from __future__ import annotations

from datetime import date

import pytest

from plangate.copilot._periods import asked_period


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("Which 3 regions had the highest revenue in 2025?", date(2025, 1, 1), date(2026, 1, 1)),
        ("2025 revenue per region", date(2025, 1, 1), date(2026, 1, 1)),
        ("Sales in March 2024", date(2024, 3, 1), date(2024, 4, 1)),
        ("sales in mar. 2024", date(2024, 3, 1), date(2024, 4, 1)),
        ("sales in March 2024 and April 2024", date(2024, 3, 1), date(2024, 5, 1)),
        ("orders in Q1 2025", date(2025, 1, 1), date(2025, 4, 1)),
        ("orders in 2025 Q4", date(2025, 10, 1), date(2026, 1, 1)),
        ("H2 2025 returns", date(2025, 7, 1), date(2026, 1, 1)),
        ("Which products sold best in the third quarter of 2026?", date(2026, 7, 1), date(2026, 10, 1)),
        ("sales in the 4th quarter 2025", date(2025, 10, 1), date(2026, 1, 1)),
        ("returns in the first half of 2025", date(2025, 1, 1), date(2025, 7, 1)),
        ("orders on 2025-03-14", date(2025, 3, 14), date(2025, 3, 15)),
        ("orders in 2025-03", date(2025, 3, 1), date(2025, 4, 1)),
        ("between 2023 and 2024", date(2023, 1, 1), date(2025, 1, 1)),
        ("2025年3月的收入是多少", date(2025, 3, 1), date(2025, 4, 1)),
        ("2030年的订单", date(2030, 1, 1), date(2031, 1, 1)),
        ("revenue for fy 2026", date(2026, 1, 1), date(2027, 1, 1)),
    ],
)
def test_explicit_periods_are_read(question: str, start: date, end: date) -> None:
    period = asked_period(question)
    assert period is not None
    assert (period.start, period.end) == (start, end)


@pytest.mark.parametrize(
    "question",
    [
        "Which 3 regions had the highest revenue?",
        "top 2000 customers by spend",
        "How many orders last year?",
        "orders with more than 2024 items",
        "",
    ],
)
def test_no_period_is_read_where_none_is_named(question: str) -> None:
    assert asked_period(question) is None


def test_the_label_names_the_days_covered() -> None:
    period = asked_period("in 2025")
    assert period is not None and period.label == "2025-01-01 to 2025-12-31"
