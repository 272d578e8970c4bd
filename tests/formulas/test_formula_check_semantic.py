"""``plangate formula check <source>.semantic.toml``: a semantic layer checked like a formula, against its
database, every issue with its path; the exit codes are the formula check's (0, 1 with errors, 2 when the
file or the database cannot be read), and ``--json`` prints the issues whatever happens."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer
from typer.testing import CliRunner

from plangate.cli import _formula

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
BAD = """
[metrics.revenue]
sql = "sum(order_items.qty * order_items.unit_price)"
where = "orders.stauts != 'cancelled'"

[metrics]
units = "sum(upper(order_items.quantity))"

[dimensions.region]
column = "region.name"
"""


def _run(*args: str) -> tuple[int, str, str]:
    app = typer.Typer()
    _formula.register(app)
    result = CliRunner().invoke(app, ["formula", "check", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_the_bundled_semantic_files_check_clean_against_the_databases_beside_them() -> None:
    code, out, _ = _run(str(DATA / "shop.semantic.toml"))
    assert code == 0 and "ok" in out and "1 metric, 4 dimensions, no issues" in out
    code, out, _ = _run(str(DATA / "chinook.semantic.toml"))
    assert code == 0 and "3 metrics, 4 dimensions" in out


def test_unknown_tables_columns_and_bad_expressions_are_named_with_their_paths(tmp_path: Path) -> None:
    shutil.copyfile(DATA / "shop.db", tmp_path / "shop.db")
    (tmp_path / "shop.semantic.toml").write_text(BAD)
    code, out, _ = _run(str(tmp_path / "shop.semantic.toml"))
    assert code == 1
    assert (
        "metrics.revenue.sql: unknown column 'order_items.qty' (did you mean 'order_items.quantity'?)" in out
    )
    assert "metrics.revenue.where: unknown column 'orders.stauts' (did you mean 'orders.status'?)" in out
    assert "metrics.units: an aggregate's expression may hold only columns" in out
    assert "dimensions.region.column: unknown table 'region' (did you mean 'regions'?)" in out
    code, out, _ = _run(str(tmp_path / "shop.semantic.toml"), "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert {issue["path"] for issue in report["issues"]} == {
        "metrics.revenue.sql",
        "metrics.revenue.where",
        "metrics.units",
        "dimensions.region.column",
    }


def test_a_file_or_database_that_cannot_be_read_exits_2(tmp_path: Path) -> None:
    lonely = tmp_path / "lonely.semantic.toml"
    lonely.write_text('[metrics]\nn = "count(orders.order_id)"\n')
    code, _, err = _run(str(lonely))
    assert code == 2 and "no database beside it (looked for lonely.db" in err and "--data" in err
    code, out, _ = _run(str(lonely), "--data", str(DATA / "shop.db"))
    assert code == 0 and "1 metric, 0 dimensions" in out
    broken = tmp_path / "broken.semantic.toml"
    broken.write_text("[metrics\n")
    code, out, _ = _run(str(broken), "--data", str(DATA / "shop.db"), "--json")
    assert code == 2 and json.loads(out)["issues"][0]["code"] == "toml"
