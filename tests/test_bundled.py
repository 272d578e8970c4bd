"""``plangate.bundled``: the examples are found in an installed package first, else in the source checkout,
and a broken install says where it looked; ``plangate demo --where`` prints the folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate import bundled
from plangate.cli.app import app
from plangate.errors import ConfigError
from plangate.tools.data import shop_db_path

REPO = Path(__file__).resolve().parents[1]


def _examples(root: Path) -> Path:
    for part in ("formulas", "data"):
        (root / part).mkdir(parents=True)
    return root


def test_a_checkout_finds_the_repositorys_examples() -> None:
    assert bundled.examples_dir() == REPO / "examples"
    assert bundled.example_path("data", "shop.db") == shop_db_path() == REPO / "examples" / "data" / "shop.db"


def test_the_packaged_examples_win_over_a_checkouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = _examples(tmp_path / "site-packages" / "plangate" / "examples")
    monkeypatch.setattr(bundled, "PACKAGED", packaged)
    assert bundled.examples_dir() == packaged


def test_a_broken_install_names_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundled, "PACKAGED", tmp_path / "packaged")
    monkeypatch.setattr(bundled, "_CHECKOUT", tmp_path / "checkout")
    (tmp_path / "packaged" / "formulas").mkdir(parents=True)  # half there is not there
    with pytest.raises(ConfigError) as info:
        bundled.examples_dir()
    assert str(info.value) == (
        f"the bundled examples are missing: expected them at {str(tmp_path / 'packaged')!r} (reinstall "
        f"plangate) or, in a source checkout, at {str(tmp_path / 'checkout')!r}"
    )
    with pytest.raises(ConfigError, match="the bundled examples are missing"):
        shop_db_path()


def test_demo_where_prints_the_folder_and_a_broken_install_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["demo", "--where"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.strip() == str(REPO / "examples")

    monkeypatch.setattr(bundled, "PACKAGED", tmp_path / "packaged")
    monkeypatch.setattr(bundled, "_CHECKOUT", tmp_path / "checkout")
    broken = runner.invoke(app, ["demo"])
    assert broken.exit_code == 2
    assert broken.stderr.startswith("error: the bundled examples are missing: ")
    assert "Traceback" not in broken.output
