"""The server's retention pass (``server/_retention.py``): a server with a horizon prunes ended runs past
it at start-up and then every ``[retention] every``, never a run that waits; the horizon comes from
``--prune-older-than`` or plangate.toml."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from plangate.cli._serve import retention_of
from plangate.config import parse_config
from plangate.errors import ConfigError, NotFoundError
from plangate.server._retention import Retention
from plangate.store import Store


def _ended(store: Store, status: str) -> str:
    run = store.create_run("formula", "release", {"vars": {}}, owner="local")
    with store.transaction(run.id) as tx:
        tx.set_snapshot({"phase": "done"})
        tx.set_status(status)  # type: ignore[arg-type]
    return run.id


def _gone(store: Store, run_id: str) -> bool:
    try:
        store.get_run(run_id)
    except NotFoundError:
        return True
    return False


def test_a_server_prunes_ended_runs_past_its_horizon(store: Store, make_app: Callable[..., FastAPI]) -> None:
    early = _ended(store, "completed")
    waiting = _ended(store, "waiting")
    time.sleep(1.1)
    with TestClient(make_app(auth=False, retention=Retention(older_than=1.0, every=0.3))) as client:
        deadline = time.monotonic() + 10
        while not _gone(store, early) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(store, early), "the start-up pass removed the ended run"
        later = _ended(store, "failed")  # ended after start-up: a later pass takes it
        deadline = time.monotonic() + 10
        while not _gone(store, later) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(store, later), "a later pass removed the run that ended meanwhile"
        listed = [run["id"] for run in client.get("/v1/runs").json()["items"]]
    assert listed == [waiting]


def test_the_horizon_comes_from_the_flag_else_the_file() -> None:
    file = parse_config('[retention]\nolder_than = "30d"\nevery = "10m"\n')
    assert retention_of(file, None) == Retention(30 * 86_400.0, 600.0)
    assert retention_of(file, "12h") == Retention(12 * 3600.0, 600.0)
    assert retention_of(parse_config(""), None) is None
    with pytest.raises(ConfigError, match="--prune-older-than: expected an age like '30d'"):
        retention_of(file, "a month")
