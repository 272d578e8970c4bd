"""Owners' limits under load, on a real ``plangate serve`` process on a PostgreSQL store: 20 owners each send
50 concurrent ``POST /v1/runs`` of a formula whose runs take a second. Requests per minute: each owner gets
exactly its limit's worth of runs in each minute the requests reach the server in (one owner has higher
limits of its own, from ``[limits.owners.NAME]``), the rest a 429 with ``Retry-After``; no other status.
Runs at once: past an owner's ``runs_at_once`` a run waits ``queued`` and starts as one ends, so at no moment
do more of an owner's runs go (from their first step to their outcome, read from their events). Nothing is
lost: every request is counted once, every accepted run is in the store and completes.

Run alone for the figures: ``pytest tests/server/test_server_limits_load.py -s`` prints them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from server_helpers import free_port

from plangate.events import OutcomeEvent, StepStateEvent
from plangate.server.tokens import Tokens, hash_token, new_token
from plangate.store import TERMINAL_STATUSES, Store, open_store

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples" / "formulas"
PLANGATE = str(Path(sys.executable).parent / "plangate")
OWNERS = 20
EACH = 50
LIMIT, AT_ONCE = 10, 3
GENEROUS = ("owner-00", 25, 5)  # its requests per minute and runs at once


def _tokens(url: str) -> dict[str, str]:
    store = open_store(url)
    try:
        tokens = Tokens(store)
        made = {f"owner-{n:02d}": new_token() for n in range(OWNERS)}
        for owner, token in made.items():
            tokens.create(owner, hash_token(token))
    finally:
        store.close()
    return made


async def _burst(base: str, tokens: dict[str, str]) -> list[tuple[str, int, str | None, bool]]:
    # a connection per request: none is reused just as the server closes it (keep-alive expiry)
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=180) as client:

        async def one(owner: str) -> tuple[str, int, str | None, bool]:
            response = await client.post(
                "/v1/runs",
                json={"kind": "formula", "formula": "brief"},
                headers={"Authorization": f"Bearer {tokens[owner]}"},
            )
            queued = response.status_code == 201 and response.json()["queue_position"] is not None
            return owner, response.status_code, response.headers.get("retry-after"), queued

        return await asyncio.gather(*(one(owner) for owner in tokens for _ in range(EACH)))


def _most_at_once(store: Store, run_ids: list[str]) -> int:
    """The most runs among ``run_ids`` going at one moment, each from its first step's start (its first
    commit, ``started``, is made with the run, before it may go) to its outcome."""
    edges: list[tuple[float, int]] = []
    for run_id in run_ids:
        events = store.events(run_id)
        start = next(e.at for e in events if isinstance(e, StepStateEvent))
        end = next(e.at for e in events if isinstance(e, OutcomeEvent))
        edges += [(start, 1), (end, -1)]
    going = most = 0
    for _, step in sorted(edges):  # an end before a start at the same instant: that slot was free
        going += step
        most = max(most, going)
    return most


@pytest.mark.timeout(600)
def test_requests_per_minute_and_runs_at_once_hold_exactly_under_load(
    postgres_url: str, tmp_path: Path
) -> None:
    tokens = _tokens(postgres_url)
    (tmp_path / "plangate.toml").write_text(
        f"[limits]\nrequests_per_minute = {LIMIT}\nruns_at_once = {AT_ONCE}\n"
        f"[limits.owners.{GENEROUS[0]}]\nrequests_per_minute = {GENEROUS[1]}\nruns_at_once = {GENEROUS[2]}\n"
    )
    port = free_port()
    args = [PLANGATE, "serve", "--store", postgres_url, "--port", str(port), "--log-level", "warning"]
    args += ["--tools", f"{EXAMPLES / 'tools.py'}:registry", "--path", str(HERE / "schedules")]
    server = subprocess.Popen(args, cwd=tmp_path, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    store = open_store(postgres_url)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, "the server stopped during start-up"
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start within 90 s"
            time.sleep(0.1)
        started = time.time()
        results = asyncio.run(_burst(base, tokens))
        took = time.time() - started
        deadline = time.monotonic() + 300
        while any(run.status not in TERMINAL_STATUSES for run in store.list_runs(limit=1000).items):
            assert server.poll() is None, "the server died"
            assert time.monotonic() < deadline, "the accepted runs did not all end within 300 s"
            time.sleep(0.5)
        drained = time.time() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    try:
        runs = store.list_runs(limit=1000).items
        with store.database.reading("test") as db:  # type: ignore[attr-defined]
            rows = db.all("SELECT owner, minute, count FROM request_counts")
        most = {
            owner: _most_at_once(store, [run.id for run in runs if run.owner == owner]) for owner in tokens
        }
    finally:
        store.close()

    codes = Counter(code for _, code, _, _ in results)
    assert set(codes) <= {201, 429}, codes
    accepted = Counter(owner for owner, code, _, _ in results if code == 201)
    queued = sum(1 for *_, waited in results if waited)
    assert all(retry is not None and 1 <= int(retry) <= 60 for _, code, retry, _ in results if code == 429)
    assert Counter(run.owner for run in runs) == accepted  # nothing lost, nothing more
    assert {run.status for run in runs} == {"completed"}
    # every request counted once, in the minute the server saw it; in each minute an owner got its limit
    counted: dict[str, list[int]] = {}
    for row in rows:
        counted.setdefault(str(row["owner"]), []).append(int(row["count"]))
    per_minute = 0
    for owner in tokens:
        limit, at_once = (GENEROUS[1], GENEROUS[2]) if owner == GENEROUS[0] else (LIMIT, AT_ONCE)
        assert sum(counted[owner]) == EACH, (owner, counted[owner])
        assert accepted[owner] == sum(min(count, limit) for count in counted[owner]), (owner, counted)
        per_minute = max(per_minute, *(min(count, limit) for count in counted[owner]))
        assert most[owner] <= at_once, (owner, most[owner])
    assert most[GENEROUS[0]] == GENEROUS[2] and max(most.values()) == GENEROUS[2]  # the limit was reached
    minutes = int((started + took) // 60) - int(started // 60) + 1
    if minutes == 1:  # within one minute: exactly each owner's limit
        assert accepted == {owner: GENEROUS[1] if owner == GENEROUS[0] else LIMIT for owner in tokens}
    print(
        f"\n{OWNERS} owners x {EACH} concurrent POST /v1/runs: {codes[201]} accepted ({queued} of them "
        f"queued for a slot), {codes[429]} refused (429), no other status; most accepted by an owner in a "
        f"minute {per_minute}; most runs of an owner at once {max(most.values())} (limits {AT_ONCE}, "
        f"{GENEROUS[0]} {GENEROUS[2]}); burst {took:.1f} s, every run ended {drained:.1f} s after it began"
    )
