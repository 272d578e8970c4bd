"""The throwaway servers the project starts: the test session's Redis and PostgreSQL; `./dev services`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from services_plugin import PostgresServer, services

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "services.py"


def test_the_sessions_redis_answers_ping(redis_url: str) -> None:
    parts = urlsplit(redis_url)
    assert parts.scheme == "redis" and parts.hostname == "127.0.0.1"
    assert parts.port is not None and services.ping(parts.port)


def test_the_sessions_postgres_is_version_15_or_newer_on_loopback(postgres_server: PostgresServer) -> None:
    assert urlsplit(postgres_server.url).hostname == "127.0.0.1"
    with psycopg.connect(postgres_server.url) as conn:
        assert conn.info.server_version >= 150000


@pytest.mark.slow
def test_dev_services_starts_both_prints_their_urls_and_stops_them(tmp_path: Path) -> None:
    state = tmp_path / "services.json"
    started = subprocess.run(
        [sys.executable, str(SCRIPT), "start", "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    try:
        assert started.returncode == 0, started.stderr
        lines = dict(line.split(": ", 1) for line in started.stdout.splitlines() if ": " in line)
        postgres, redis = lines["PostgreSQL"].strip(), lines["Redis"].strip()
        assert "Stop them with: ./dev services stop" in started.stdout
        assert f"export PLANGATE_STORE={postgres}" in started.stdout
        with psycopg.connect(postgres) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("plangate",)
        redis_port = urlsplit(redis).port
        assert redis_port is not None and services.ping(redis_port)
        folder = Path(json.loads(state.read_text())["folder"])
        assert folder.is_dir()

        again = subprocess.run(
            [sys.executable, str(SCRIPT), "start", "--state", str(state)], capture_output=True, text=True
        )
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        stopped = subprocess.run(
            [sys.executable, str(SCRIPT), "stop", "--state", str(state)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert stopped.returncode == 0 and stopped.stdout.strip() == "services stopped"
    assert not state.exists() and not folder.exists()
    assert not services.ping(redis_port)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(postgres, connect_timeout=2).close()
