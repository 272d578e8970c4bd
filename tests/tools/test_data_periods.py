"""Period bounds, date columns and the category columns of a source."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from plangate.errors import ConfigError
from plangate.tools.data import DataSources, QueryLimits
from plangate.tools.data.env import DATA_ENV, sources_from_env
from plangate.tools.data.periods import DateRange, bound_range, date_ranges, iso_date, period_between
from plangate.tools.data.profile import category_columns

CHINOOK = Path(__file__).resolve().parents[2] / "examples" / "data" / "chinook.sqlite"


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("2025", date(2025, 1, 1), date(2026, 1, 1)),
        ("2025-12", date(2025, 12, 1), date(2026, 1, 1)),
        ("2024-02", date(2024, 2, 1), date(2024, 3, 1)),
        ("2025-03-14", date(2025, 3, 14), date(2025, 3, 15)),
        (" 2025 ", date(2025, 1, 1), date(2026, 1, 1)),
    ],
)
def test_a_bound_means_the_whole_year_month_or_day(text: str, start: date, end: date) -> None:
    assert bound_range(text) == (start, end)


@pytest.mark.parametrize("text", ["25", "2025/03", "March 2025", "2025-3", "2025-02-30", "2025-13"])
def test_a_malformed_bound_says_what_was_expected(text: str) -> None:
    with pytest.raises(ConfigError, match="period"):
        bound_range(text)


def test_a_period_runs_from_the_start_of_from_to_the_end_of_to() -> None:
    period = period_between("2025-02", "2025-03")
    assert (period.start, period.end, period.label) == (
        date(2025, 2, 1),
        date(2025, 4, 1),
        "2025-02 .. 2025-03",
    )
    assert period_between(None, "2025").start is None and period_between("2025", None).end is None
    assert period.overlaps(date(2025, 3, 31), date(2026, 1, 1))
    assert not period.overlaps(date(2025, 4, 1), date(2026, 1, 1))


def test_iso_dates_and_timestamps_are_read_by_their_day() -> None:
    assert iso_date("2021-01-01 00:00:00") == date(2021, 1, 1)
    assert iso_date("2021-02-31") is None and iso_date("not a date") is None and iso_date(20210101) is None


def test_date_ranges_are_the_first_and_last_dates_of_date_columns(shop_db: Path) -> None:
    sources = DataSources()
    source = sources.register("shop", shop_db)
    ranges = date_ranges(source, source.schema(QueryLimits()).tables, QueryLimits())
    found = {(r.table, r.column): (r.first, r.last) for r in ranges}
    assert found[("orders", "order_date")] == (date(2025, 1, 1), date(2026, 6, 30))
    assert ("returns", "returned_on") in found and ("products", "name") not in found
    assert DateRange("orders", "order_date", date(2025, 1, 1), date(2026, 6, 30)).describe() == (
        "orders.order_date has rows from 2025-01-01 to 2026-06-30"
    )


def test_datetime_columns_of_another_database_have_ranges_too() -> None:
    sources = DataSources()
    source = sources.register("chinook", CHINOOK)
    ranges = date_ranges(source, source.schema(QueryLimits()).tables, QueryLimits())
    invoice = next(r for r in ranges if (r.table, r.column) == ("Invoice", "InvoiceDate"))
    assert (invoice.first, invoice.last) == (date(2021, 1, 1), date(2025, 12, 22))


def test_category_columns_are_short_text_columns_with_their_values(shop_db: Path) -> None:
    sources = DataSources()
    source = sources.register("shop", shop_db)
    found = {
        c.name: set(c.values)
        for c in category_columns(source, source.schema(QueryLimits()).tables, QueryLimits())
    }
    assert found["orders.status"] == {"delivered", "shipped", "processing", "cancelled"}
    assert found["orders.channel"] == {"web", "mobile", "store", "phone"}
    assert "customers.email" not in found and "orders.order_date" not in found


def test_plangate_data_names_the_sources_of_saved_formulas(shop_db: Path) -> None:
    sources = sources_from_env({DATA_ENV: f"sales={shop_db}, music={CHINOOK}"})
    assert sources.names() == ["sales", "music"]
    assert sources_from_env({}).names() == ["shop"]
    with pytest.raises(ConfigError, match="expected name=path_or_url pairs"):
        sources_from_env({DATA_ENV: str(shop_db)})


def test_the_env_registry_is_built_only_when_asked_for(
    monkeypatch: pytest.MonkeyPatch, shop_db: Path
) -> None:
    import plangate.tools.data.env as env

    monkeypatch.setenv(DATA_ENV, f"shop={shop_db}")
    assert env.registry.names() == ["db_schema", "db_query", "db_aggregate"]
    with pytest.raises(AttributeError):
        env.nothing  # noqa: B018
    assert os.environ[DATA_ENV].startswith("shop=")
