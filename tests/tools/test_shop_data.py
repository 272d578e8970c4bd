"""The bundled example data: the committed shop.db holds exactly what the generator makes, and looks sane."""

from __future__ import annotations

import importlib.util
import sqlite3
from contextlib import closing
from pathlib import Path
from types import ModuleType

import pytest

GENERATOR = Path(__file__).resolve().parents[2] / "examples" / "data" / "make_shop_db.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_shop_db", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_regenerating_gives_the_committed_rows(generator: ModuleType, tmp_path: Path, shop_db: Path) -> None:
    fresh = tmp_path / "shop.db"
    generator.build(fresh)
    assert generator.content_digest(fresh) == generator.content_digest(shop_db)


def test_another_seed_gives_other_rows(generator: ModuleType, tmp_path: Path, shop_db: Path) -> None:
    other = tmp_path / "other.db"
    generator.build(other, seed=7)
    assert generator.content_digest(other) != generator.content_digest(shop_db)


def test_the_committed_file_is_small(shop_db: Path) -> None:
    assert shop_db.stat().st_size < 2_000_000


def test_the_dataset_has_the_promised_shape(shop_db: Path) -> None:
    with closing(sqlite3.connect(f"{shop_db.as_uri()}?mode=ro", uri=True)) as db:
        counts = {
            table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("regions", "customers", "products", "orders", "order_items", "returns")
        }
        first, last = db.execute("SELECT min(order_date), max(order_date) FROM orders").fetchone()
        months = db.execute("SELECT count(DISTINCT substr(order_date, 1, 7)) FROM orders").fetchone()[0]
        december, february = (
            db.execute("SELECT count(*) FROM orders WHERE order_date LIKE ?", (month,)).fetchone()[0]
            for month in ("2025-12-%", "2025-02-%")
        )
        h1_2025, h1_2026 = (
            db.execute("SELECT count(*) FROM orders WHERE order_date BETWEEN ? AND ?", span).fetchone()[0]
            for span in (("2025-01-01", "2025-06-30"), ("2026-01-01", "2026-06-30"))
        )
        orphans = db.execute(
            "SELECT count(*) FROM orders o LEFT JOIN customers c USING (customer_id) "
            "WHERE c.customer_id IS NULL"
        ).fetchone()[0]
        early = db.execute(
            "SELECT count(*) FROM orders o JOIN customers c USING (customer_id) "
            "WHERE o.order_date < c.signup_date"
        ).fetchone()[0]
    assert 4 <= counts["regions"] <= 6
    assert 250 <= counts["customers"] <= 350
    assert 35 <= counts["products"] <= 45
    assert 3_800 <= counts["orders"] <= 4_200
    assert counts["order_items"] > counts["orders"]
    assert 0 < counts["returns"] < counts["order_items"] // 10
    assert (first[:7], last[:7], months) == ("2025-01", "2026-06", 18)
    assert december > 1.5 * february  # seasonality
    assert h1_2026 > h1_2025  # growth
    assert (orphans, early) == (0, 0)
