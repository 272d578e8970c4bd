"""Fixtures for the tool tests: the committed example database and private copies of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SHOP_DB = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.db"


@pytest.fixture(scope="session")
def shop_db() -> Path:
    """The committed examples/data/shop.db (read it, never write it)."""
    return SHOP_DB


@pytest.fixture
def shop_copy(tmp_path: Path) -> Path:
    """A copy of shop.db that a test may try (and fail) to change without touching the committed file."""
    target = tmp_path / "shop.db"
    shutil.copyfile(SHOP_DB, target)
    return target
