"""Fixtures of the store tests: every test that takes ``store`` runs once per backend of ``BACKENDS``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from store_backends import BACKENDS, SHARED, Backend, FakeClock, Place

from plangate.store import Store


def _place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    def postgres_url() -> str:
        if request.scope == "function":
            url: str = request.getfixturevalue("postgres_url")  # a lent schema, emptied
            return url
        make: Callable[[], str] = request.getfixturevalue("postgres_schemas")  # a fresh one
        return make()

    return Place(tmp_path, postgres_url)


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return BACKENDS[request.param](_place(request, tmp_path))


@pytest.fixture(params=SHARED)
def shared_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return BACKENDS[request.param](_place(request, tmp_path))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(backend: Backend, clock: FakeClock) -> Iterator[Store]:
    opened = backend.open(clock)
    yield opened
    opened.close()


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def module_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One store per module and backend, for property tests (hypothesis refuses function-scoped fixtures)."""
    opened = BACKENDS[request.param](_place(request, tmp_path_factory.mktemp(request.param))).open()
    yield opened
    opened.close()
