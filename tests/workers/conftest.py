"""Fixtures of the worker tests: a store schema of the test's own, the session's Redis emptied, workers
that are all stopped at the end, whatever the test did to them."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import fault_tools
import pytest
import redis
from worker_helpers import Workers

from plangate.store import Store, open_store
from plangate.workers import RunQueue


@pytest.fixture
def broker(redis_url: str) -> str:
    """The session's Redis, emptied: no message of an earlier test reaches this test's workers."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    return redis_url


@pytest.fixture
def store_url(postgres_url: str) -> str:
    fault_tools.prepare_table(postgres_url)
    return postgres_url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def queue(broker: str) -> Iterator[RunQueue]:
    made = RunQueue(broker)
    yield made
    made.close()


@pytest.fixture
def workers(store_url: str, broker: str, tmp_path: Path) -> Iterator[Workers]:
    made = Workers(store_url, broker, tmp_path)
    try:
        yield made
    finally:
        made.stop_all()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A worker test that failed shows what each of its workers logged last, to tell why."""
    report = yield
    made = getattr(item, "funcargs", {}).get("workers")
    if report.when == "call" and report.failed and isinstance(made, Workers):
        report.sections.append(("worker logs", made.tails()))
    return report
