"""``plangate token create | list | revoke`` and ``plangate serve`` from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from server_helpers import EXAMPLES
from typer.testing import CliRunner

from plangate.cli.app import app
from plangate.server.tokens import PEPPER_ENV, TOKEN_PREFIX, Tokens, hash_token
from plangate.store import SQLiteStore

TOOLS = f"{EXAMPLES / 'tools.py'}:registry"


@pytest.fixture
def cli(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{workdir / 'cli.db'}")
    monkeypatch.delenv(PEPPER_ENV, raising=False)
    return CliRunner()


def _created(cli: CliRunner, *args: str) -> dict[str, Any]:
    result = cli.invoke(app, ["token", "create", *args, "--json"])
    assert result.exit_code == 0, result.output
    created: dict[str, Any] = json.loads(result.stdout)
    return created


def test_token_create_prints_the_token_once_and_stores_only_its_hash(cli: CliRunner, workdir: Path) -> None:
    result = cli.invoke(app, ["token", "create", "--owner", "alice", "--name", "laptop"])

    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert token.startswith(TOKEN_PREFIX) and len(token) > 40
    assert "it is not shown again" in result.stderr
    with SQLiteStore(workdir / "cli.db") as store:
        found = Tokens(store).find(hash_token(token))
        assert found is not None and (found.owner, found.name) == ("alice", "laptop")
    raw = (workdir / "cli.db").read_bytes()
    assert token.encode() not in raw


def test_token_list_shows_ids_owners_and_names_never_tokens(cli: CliRunner) -> None:
    alice = _created(cli, "--owner", "alice", "--name", "laptop")
    bob = _created(cli, "--owner", "bob")

    listed = cli.invoke(app, ["token", "list", "--json"])
    table = cli.invoke(app, ["token", "list"])
    only_bob = cli.invoke(app, ["token", "list", "--owner", "bob", "--json"])

    records = json.loads(listed.stdout)
    assert [(r["id"], r["owner"], r["name"]) for r in records] == [
        (alice["id"], "alice", "laptop"),
        (bob["id"], "bob", ""),
    ]
    for output in (listed.stdout, table.stdout):
        assert alice["token"] not in output and bob["token"] not in output
    assert alice["id"] in table.stdout and "active" in table.stdout
    assert [r["owner"] for r in json.loads(only_bob.stdout)] == ["bob"]


def test_token_revoke_makes_the_token_stop_working(cli: CliRunner, workdir: Path) -> None:
    alice = _created(cli, "--owner", "alice")

    result = cli.invoke(app, ["token", "revoke", alice["id"]])

    assert result.exit_code == 0, result.output
    assert f"revoked {alice['id']}" in result.stderr
    with SQLiteStore(workdir / "cli.db") as store:
        assert Tokens(store).find(hash_token(alice["token"])) is None
    listed = json.loads(cli.invoke(app, ["token", "list", "--json"]).stdout)
    assert listed[0]["revoked_at"] is not None
    unknown = cli.invoke(app, ["token", "revoke", "tok_nope"])
    assert unknown.exit_code == 2
    assert "no token 'tok_nope'" in unknown.stderr


def test_a_token_made_with_a_pepper_is_checked_with_it(
    cli: CliRunner, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PEPPER_ENV, "kitchen")
    token = _created(cli, "--owner", "alice")["token"]

    with SQLiteStore(workdir / "cli.db") as store:
        assert Tokens(store).find(hash_token(token)) is None
        assert Tokens(store).find(hash_token(token, b"kitchen")) is not None


def test_token_create_needs_an_owner(cli: CliRunner) -> None:
    result = cli.invoke(app, ["token", "create", "--owner", "  "])

    assert result.exit_code == 2
    assert "--owner" in result.stderr


class _Served:
    """Stands for ``uvicorn.run``: records the call and runs ``probe`` on the app while it is "served"."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.probe: Callable[[TestClient], None] = lambda client: None

    def run(self, application: Any, **options: Any) -> None:
        self.calls.append(options)
        with TestClient(application) as client:
            self.probe(client)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> _Served:
    import uvicorn

    served = _Served()
    monkeypatch.setattr(uvicorn, "run", served.run)
    return served


def test_serve_builds_the_app_with_the_projects_store_tools_and_formulas(
    cli: CliRunner, served: _Served
) -> None:
    token = _created(cli, "--owner", "alice")["token"]
    seen: dict[str, Any] = {}

    def probe(client: TestClient) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        seen["anonymous"] = client.get("/v1/runs").status_code
        seen["tools"] = {t["name"] for t in client.get("/v1/tools", headers=headers).json()["items"]}
        seen["formulas"] = {f["name"] for f in client.get("/v1/formulas", headers=headers).json()["items"]}

    served.probe = probe
    result = cli.invoke(
        app, ["serve", "--port", "8411", "--tools", TOOLS, "--path", str(EXAMPLES), "--log-level", "warning"]
    )

    assert result.exit_code == 0, result.output
    [call] = served.calls
    assert (call["host"], call["port"], call["log_level"]) == ("127.0.0.1", 8411, "warning")
    assert "warning" not in result.stderr
    assert seen["anonymous"] == 401
    assert "publish" in seen["tools"]
    assert "release" in seen["formulas"]


def test_serve_without_auth_warns_and_acts_as_local(cli: CliRunner, served: _Served) -> None:
    codes: list[int] = []
    served.probe = lambda client: codes.append(client.get("/v1/runs").status_code)

    result = cli.invoke(app, ["serve", "--no-auth", "--host", "0.0.0.0"])

    assert result.exit_code == 0, result.output
    assert "--no-auth" in result.stderr and "other machines can reach" in result.stderr
    assert codes == [200]


def test_serve_with_tools_that_cannot_load_fails_in_one_line(cli: CliRunner, served: _Served) -> None:
    result = cli.invoke(app, ["serve", "--tools", "no_such_module:tools"])

    assert result.exit_code == 2
    assert "cannot import 'no_such_module'" in result.stderr
    assert served.calls == []
