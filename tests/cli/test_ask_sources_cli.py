"""``plangate ask`` on PostgreSQL sources: a ``[[sources]]`` entry of plangate.toml asked about by name (its
URL from an environment variable), a superuser URL refused with the SQL of a read-only role (one message, no
traceback), and ``--allow-privileged`` for a database the user accepts the risk on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer
from test_ask_cli import invoke, script

from plangate.cli import _ask

OPS = "\n".join(
    json.dumps(op)
    for op in [
        {"op": "plan", "summary": "count the regions"},
        {
            "op": "add_step",
            "step": {
                "id": "n",
                "tool": {
                    "name": "db_query",
                    "args": {"source": "warehouse", "sql": "SELECT count(*) AS n FROM regions"},
                },
            },
        },
        {
            "op": "add_step",
            "step": {"id": "answer", "needs": ["n"], "llm": {"prompt": "{{steps.n.output.rows}}"}},
        },
        {"op": "done", "explanation": "count", "run": True},
    ]
)


@pytest.fixture(scope="module")
def warehouse(postgres_server: Any) -> tuple[str, str]:
    name = postgres_server.new_database("ask_cli")
    admin = postgres_server.database_url(name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE TABLE regions (region_id integer PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO regions VALUES (1, 'East'), (2, 'West'), (3, 'South')")
    return admin, postgres_server.reader_url(name)


@pytest.fixture
def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """The root command."""

    _ask.register(root)
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("PLANGATE_MODEL", "PLANGATE_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    return tmp_path


def test_a_declared_source_is_asked_about_by_name(
    app: typer.Typer, home: Path, warehouse: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, reader = warehouse
    monkeypatch.setenv("WAREHOUSE_URL", reader)
    (home / "plangate.toml").write_text('[[sources]]\nname = "warehouse"\nurl_env = "WAREHOUSE_URL"\n')
    model = script(home, "m", OPS, "There are 3 regions.")
    code, out, _ = invoke(app, "ask", "How many regions?", "--data", "warehouse", "--model", model, "--json")
    turn = json.loads(out)
    assert code == 0 and turn["status"] == "done", turn["reason"]
    assert turn["result"]["rows"] == [[3]]


def test_a_superuser_url_is_one_message_with_the_sql_and_allow_privileged_opens_it(
    app: typer.Typer, home: Path, warehouse: tuple[str, str]
) -> None:
    admin, _ = warehouse
    model = script(home, "m", OPS, "There are 3 regions.")
    code, out, _ = invoke(
        app, "ask", "How many regions?", "--data", admin, "--name", "warehouse", "--model", model
    )
    flat = " ".join(out.split())
    assert code == 1 and "Traceback" not in out
    assert "is a superuser" in flat and "CREATE ROLE plangate_reader LOGIN" in flat
    model = script(home, "n", OPS, "There are 3 regions.")
    code, out, _ = invoke(
        app,
        "ask",
        "How many regions?",
        "--data",
        admin,
        "--name",
        "warehouse",
        "--allow-privileged",
        "--model",
        model,
        "--json",
    )
    assert code == 0, out
    assert json.loads(out)["result"]["rows"] == [[3]]
