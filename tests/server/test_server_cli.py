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

import plangate
from plangate.cli.app import app
from plangate.models import PROVIDERS, ScriptedModel
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


def test_serve_starts_when_its_model_cannot_run_here_and_says_which_it_is(
    cli: CliRunner, served: _Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # a provider of the test's own, that a request may name (a request never names a model file)
    done = json.dumps({"action": "done", "speak": "Hello."})
    monkeypatch.setitem(
        PROVIDERS, "replay", lambda model_id: ScriptedModel([done], name=f"replay:{model_id}")
    )
    seen: dict[str, Any] = {}

    def probe(client: TestClient) -> None:
        seen["info"] = client.get("/v1/info").json()
        seen["formulas"] = client.get("/v1/formulas").status_code
        refused = client.post("/v1/runs", json={"kind": "agent", "prompt": "hello"})
        seen["agent"] = (refused.status_code, refused.json()["type"], refused.json()["detail"])
        asked = client.post("/v1/ask", json={"question": "Which region sold most?"})
        seen["ask"] = (asked.status_code, asked.json()["detail"])
        seen["runs"] = client.get("/v1/runs").json()["items"]
        own = {"kind": "agent", "prompt": "hello", "model": "replay:hello"}
        seen["own model"] = client.post("/v1/runs", json=own).status_code

    served.probe = probe
    result = cli.invoke(app, ["serve", "--no-auth", "--path", str(EXAMPLES), "--model", "openai:gpt-4o-mini"])

    assert result.exit_code == 0, result.output
    assert "model of agent runs: openai:gpt-4o-mini (--model) cannot run here: " in result.stderr
    hint = "openai:gpt-4o-mini needs an API key: set OPENAI_API_KEY or pass api_key="
    assert seen["info"] == {
        "version": plangate.__version__,
        "model": {
            "spec": "openai:gpt-4o-mini",
            "description": "openai:gpt-4o-mini",
            "origin": "--model",
            "available": False,
            "problem": hint,
        },
    }
    assert seen["formulas"] == 200  # everything that needs no model is served
    # a run or a question that needs the model is refused with what is missing, and nothing is stored
    refusal = f"this server's model cannot run here: {hint}"
    assert seen["agent"] == (503, "urn:plangate:problem:model-unavailable", refusal)
    assert seen["ask"] == (503, refusal)
    assert seen["runs"] == []
    assert seen["own model"] == 201  # a request that names a model of its own runs with it


def test_serve_names_the_model_it_runs_with(cli: CliRunner, served: _Served, tmp_path: Path) -> None:
    script = tmp_path / "responses.json"
    script.write_text('["hello"]', encoding="utf-8")
    infos: list[Any] = []
    served.probe = lambda client: infos.append(client.get("/v1/info").json()["model"])

    result = cli.invoke(app, ["serve", "--no-auth", "--model", f"scripted:{script}"])

    assert result.exit_code == 0, result.output
    assert "model of agent runs: scripted:" in result.stderr and "cannot run here" not in result.stderr
    # the path of the file is not shown to clients, as in every response
    assert infos == [
        {
            "spec": "scripted:…/responses.json",
            "description": "scripted:…/responses.json",
            "origin": "--model",
            "available": True,
            "problem": None,
        }
    ]


def test_serve_with_an_unknown_model_provider_fails_in_one_line(cli: CliRunner, served: _Served) -> None:
    result = cli.invoke(app, ["serve", "--no-auth", "--model", "nosuch:model"])

    assert result.exit_code == 2
    assert "unknown model provider 'nosuch'" in result.stderr
    assert served.calls == []
