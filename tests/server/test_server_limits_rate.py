"""``[limits] requests_per_minute`` in one process: the request past an owner's limit is a 429 with
``Retry-After`` and starts nothing; another owner's limit is its own; reads are not counted."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from plangate.cli._serve import limits_of
from plangate.config import parse_config
from plangate.runs.quotas import Limits, LimitSettings
from plangate.server.tokens import Tokens, hash_token
from plangate.store import SQLiteStore

BODY = {"kind": "formula", "formula": "release", "vars": {"version": "1.0.0"}}


def _a_second_into_a_minute(path: Path) -> SQLiteStore:
    """A store whose clock runs from a second into a minute: a minute is a fixed window, and on the wall
    clock the requests of a test may fall on both sides of a minute's end (two windows, each within
    the limit)."""
    began = time.time()
    offset = math.floor(began / 60) * 60 + 1 - began
    return SQLiteStore(path, clock=lambda: time.time() + offset)


def test_past_the_limit_a_429_says_when_to_retry(store_path: Path, make_app: Callable[..., FastAPI]) -> None:
    store = _a_second_into_a_minute(store_path)
    Tokens(store).create("ana", hash_token("pg_ana"))
    Tokens(store).create("bo", hash_token("pg_bo"))
    ana, bo = {"Authorization": "Bearer pg_ana"}, {"Authorization": "Bearer pg_bo"}
    settings = LimitSettings(Limits(requests_per_minute=2), {"bo": {"requests_per_minute": 1}})
    app = make_app(limits=settings, schedules=False, store=store)
    with store, TestClient(app) as client:
        codes = [client.post("/v1/runs", json=BODY, headers=ana).status_code for _ in range(3)]
        refused = client.post("/v1/runs", json=BODY, headers=ana)
        assert codes == [201, 201, 429] and refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert "made 2 request(s) this minute" in refused.json()["detail"]
        assert [client.post("/v1/runs", json=BODY, headers=bo).status_code for _ in range(2)] == [201, 429]
        assert client.get("/v1/runs", headers=ana).status_code == 200  # reads are not counted
        assert len(client.get("/v1/runs", headers=ana).json()["items"]) == 2


def test_limits_come_from_plangate_toml() -> None:
    config = parse_config(
        "[limits]\nrequests_per_minute = 30\n[limits.owners.ci]\nrequests_per_minute = 300\n"
    )
    limits = limits_of(config)
    assert (limits.of("ana").requests_per_minute, limits.of("ci").requests_per_minute) == (30, 300)
    assert limits_of(parse_config("")).of("ana").requests_per_minute is None
