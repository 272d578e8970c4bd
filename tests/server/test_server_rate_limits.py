"""Requests per minute per owner (``server/_rate.py``), under load on a real ``plangate serve`` process on a
PostgreSQL store: 20 owners each send 50 concurrent ``POST /v1/runs``; each owner gets exactly its limit's
worth of runs in each minute the requests reach the server in (one owner a higher limit of its own, from
``[limits.owners.NAME]``), the rest a 429 with ``Retry-After``, no 5xx; every request is counted once and
every run accepted is in the store, none more."""

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

from plangate.server.tokens import Tokens, hash_token, new_token
from plangate.store import open_store

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples" / "formulas"
PLANGATE = str(Path(sys.executable).parent / "plangate")
OWNERS = 20
EACH = 50
LIMIT = 10
GENEROUS = ("owner-00", 25)


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


async def _burst(base: str, tokens: dict[str, str]) -> list[tuple[str, int, str | None]]:
    # a connection per request: none is reused just as the server closes it (keep-alive expiry)
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as client:

        async def one(owner: str) -> tuple[str, int, str | None]:
            response = await client.post(
                "/v1/runs",
                json={"kind": "formula", "formula": "nightly"},
                headers={"Authorization": f"Bearer {tokens[owner]}"},
            )
            return owner, response.status_code, response.headers.get("retry-after")

        return await asyncio.gather(*(one(owner) for owner in tokens for _ in range(EACH)))


@pytest.mark.timeout(300)
def test_each_owner_gets_exactly_its_limit_under_load(postgres_url: str, tmp_path: Path) -> None:
    tokens = _tokens(postgres_url)
    (tmp_path / "plangate.toml").write_text(
        f"[limits]\nrequests_per_minute = {LIMIT}\n"
        f"[limits.owners.{GENEROUS[0]}]\nrequests_per_minute = {GENEROUS[1]}\n"
    )
    port = free_port()
    args = [PLANGATE, "serve", "--store", postgres_url, "--port", str(port), "--log-level", "warning"]
    args += ["--tools", f"{EXAMPLES / 'tools.py'}:registry", "--path", str(HERE / "schedules")]
    server = subprocess.Popen(args, cwd=tmp_path, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
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
    finally:
        server.terminate()
        server.wait(timeout=30)
    codes = Counter(code for _, code, _ in results)
    assert set(codes) <= {201, 429}, codes
    accepted = Counter(owner for owner, code, _ in results if code == 201)
    minutes = int((started + took) // 60) - int(started // 60) + 1
    assert all(retry is not None and 1 <= int(retry) <= 60 for _, code, retry in results if code == 429)
    store = open_store(postgres_url)
    try:
        stored = Counter(run.owner for run in store.list_runs(limit=1000).items)
        with store.database.reading("test") as db:  # type: ignore[attr-defined]
            rows = db.all("SELECT owner, minute, count FROM request_counts")
    finally:
        store.close()
    assert stored == accepted
    # every request counted once, in the minute the server saw it; in each minute an owner got its limit
    counted: dict[str, list[int]] = {}
    for row in rows:
        counted.setdefault(str(row["owner"]), []).append(int(row["count"]))
    for owner in tokens:
        limit = GENEROUS[1] if owner == GENEROUS[0] else LIMIT
        assert sum(counted[owner]) == EACH, (owner, counted[owner])
        assert accepted[owner] == sum(min(count, limit) for count in counted[owner]), (owner, counted)
    if minutes == 1:  # within one minute: exactly each owner's limit
        assert accepted == {owner: GENEROUS[1] if owner == GENEROUS[0] else LIMIT for owner in tokens}
    print(f"{OWNERS} owners x {EACH}: {codes[201]} accepted, {codes[429]} refused in {took:.1f} s")
