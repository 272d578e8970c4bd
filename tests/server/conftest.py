"""Fixtures of the server tests: a store file, the example tools, an app and a client in a temporary cwd."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import EXAMPLES, example_tools

from plangate.server import create_app
from plangate.store import SQLiteStore, Store


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cwd of the test: the example tools write under ``.plangate/demo`` there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def store_path(workdir: Path) -> Path:
    return workdir / "server.db"


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    opened = SQLiteStore(store_path)
    yield opened
    opened.close()


@pytest.fixture
def make_app(store: Store) -> Callable[..., FastAPI]:
    """Build an app on the test's store with the example tools and formulas; keywords go to create_app."""

    def make(**options: Any) -> FastAPI:
        options.setdefault("search_paths", [EXAMPLES])
        tools = options.pop("tools", None) or example_tools()
        return create_app(options.pop("store", store), tools, **options)

    return make


@pytest.fixture
def client(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """A client of an app without authentication (every request is owner 'local')."""
    with TestClient(make_app(auth=False)) as opened:
        yield opened
