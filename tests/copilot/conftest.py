"""Fixtures of the copilot tests: the bundled databases, opened as a turn's scope."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from plangate.copilot._scope import Scope, open_scope

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
SHOP_DB = DATA / "shop.db"
CHINOOK_DB = DATA / "chinook.sqlite"


@pytest.fixture(scope="session")
def shop_scope() -> Scope:
    return open_scope(SHOP_DB)


@pytest.fixture(scope="session")
def chinook_scope() -> Scope:
    return open_scope(CHINOOK_DB)


@pytest.fixture
def shop_copy(tmp_path: Path) -> Path:
    target = tmp_path / "shop.db"
    shutil.copyfile(SHOP_DB, target)
    return target
