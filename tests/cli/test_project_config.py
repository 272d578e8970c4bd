"""``plangate.toml`` as every command reads it: model, store, tools and MCP servers installed from PyPI.

Before, the file was documented but never loaded by a command (``load_config`` had no caller): its
``[[mcp]]`` servers were usable only from Python. The MCP servers here are real packages from PyPI, in the
``dev`` extra: ``mcp-server-time`` and ``mcp-server-git`` (on a scratch repository), plus the tests' own
echo server for the faults (a call that hangs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli.app import app
from plangate.events import ToolResultEvent
from plangate.store import SQLiteStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ECHO_SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_echo_server.py"
TOOLS_PY = textwrap.dedent(
    '''
    from plangate.tools import tool

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    tools = [lookup]
    '''
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder, the working directory, with no plangate setting from the environment."""
    names = ("PLANGATE_MODEL", "PLANGATE_TOOLS", "PLANGATE_CONFIG", "PLANGATE_STORE", "PLANGATE_MCP_TIMEOUT")
    for name in names:
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def script(folder: Path, name: str, *responses: object) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps([r if isinstance(r, str) else json.dumps(r) for r in responses]), "utf-8")
    return path


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"action": "continue", "tool_call": {"name": name, "arguments": arguments}}


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_the_working_directory_s_file_sets_the_store_the_model_and_the_tools(project: Path) -> None:
    (project / "tools").mkdir()
    (project / "tools" / "local.py").write_text(TOOLS_PY, encoding="utf-8")
    answers = script(project, "a", call("lookup", query="week"), {"action": "done"}, "The week is free.")
    (project / "plangate.toml").write_text(
        f'store = "sqlite:///state/runs.db"\nmodel = "scripted:{answers}"\n'
        'tools = ["tools/local.py:tools"]\n',
        encoding="utf-8",
    )

    code, out, err = invoke("agent", "Look at my week", "--mode", "react", "--json")

    assert code == 0, err
    assert err == f"model: scripted:{answers} (model in plangate.toml)\n"
    result = json.loads(out)
    assert (result["status"], result["answer"]) == ("completed", "The week is free.")
    store = SQLiteStore(project / "state" / "runs.db")  # the file's store, relative to the file's folder
    results = [e for e in store.events(result["run_id"]) if isinstance(e, ToolResultEvent)]
    assert [(r.tool, r.success) for r in results] == [("lookup", True)]
    store.close()


def test_config_names_the_file_from_anywhere_before_or_after_the_command(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = script(project, "answers", {"route": "reply", "reply": "Hi!"})
    (project / "plangate.toml").write_text(
        f'store = "runs.db"\nmodel = "scripted:{answers}"\n', encoding="utf-8"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = str(project / "plangate.toml")
    monkeypatch.chdir(elsewhere)
    code, out, err = invoke("agent", "hello", "--config", config, "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    for args in (("--config", config, "runs", "--json"), ("runs", "--json", "--config", config)):
        code, out, err = invoke(*args)
        assert code == 0, err
        assert [run["id"] for run in json.loads(out)] == [run_id]
    code, out, _ = invoke("status", run_id, "--config", config, "--json")
    assert json.loads(out)["run"]["status"] == "completed"
    assert not (elsewhere / "runs.db").exists() and (project / "runs.db").exists()
    code, _, err = invoke("runs", "--config", str(elsewhere / "nope.toml"))
    assert code == 2
    missing = elsewhere / "nope.toml"
    assert err.strip() == f"error: {missing}: expected a plangate.toml config file, found nothing there"


def git_repo(folder: Path) -> Path:
    repo = folder / "repo"
    repo.mkdir()
    for command in (["init", "-q"], ["config", "user.email", "t@example.com"], ["config", "user.name", "T"]):
        subprocess.run(["git", *command], cwd=repo, check=True, timeout=30)
    (repo / "notes.txt").write_text("first note\n", encoding="utf-8")
    return repo


def test_mcp_servers_from_pypi_serve_an_agent_read_tools_run_and_write_tools_ask(project: Path) -> None:
    repo = git_repo(project)
    (project / "plangate.toml").write_text(
        textwrap.dedent(
            f"""
            store = "runs.db"

            [[mcp]]
            name = "time"
            command = {json.dumps(sys.executable)}
            args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
            effect_default = "read"

            [[mcp]]
            name = "repo"
            command = {json.dumps(sys.executable)}
            args = ["-m", "mcp_server_git", "--repository", "repo"]
            effect_default = "write"
            [mcp.effects]
            git_status = "read"
            """
        ),
        encoding="utf-8",
    )
    first = script(
        project,
        "first",
        call("context_tools_add", domain="time"),
        call("time_get_current_time", timezone="Europe/Paris"),
        call("context_tools_add", domain="repo"),
        call("repo_git_status", repo_path=str(repo)),
        call("repo_git_add", repo_path=str(repo), files=["notes.txt"]),
    )
    code, out, err = invoke("agent", "Stage my notes", "-m", f"scripted:{first}", "--mode", "react",
                            "--detach", "--json")  # fmt: skip
    assert code == 0, err
    waiting = json.loads(out)
    # The reads ran at once; the first write of the run waits for consent.
    assert waiting["status"] == "waiting"
    assert waiting["interaction"]["kind"] == "confirm"
    assert waiting["interaction"]["tool"]["name"] == "repo_git_add"
    store = SQLiteStore(project / "runs.db")
    results = {e.tool: e for e in store.events(waiting["run_id"]) if isinstance(e, ToolResultEvent)}
    assert results["time_get_current_time"].success
    assert '"timezone": "Europe/Paris"' in results["time_get_current_time"].observation
    assert "notes.txt" in results["repo_git_status"].observation
    assert "repo_git_add" not in results
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=repo, capture_output=True,
                            text=True, check=True, timeout=30)  # fmt: skip
    assert staged.stdout == ""

    rest = script(project, "rest", {"action": "done"}, "Your notes are staged.")
    code, out, err = invoke("approve", waiting["interaction"]["id"], "-m", f"scripted:{rest}", "--json")

    assert code == 0, err
    assert json.loads(out)["status"] == "completed"
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=repo, capture_output=True,
                            text=True, check=True, timeout=30)  # fmt: skip
    assert staged.stdout == "notes.txt\n"
    (receipt,) = [r for r in store.receipts(waiting["run_id"]) if r.source == "write_receipt"]
    assert (receipt.name, receipt.success) == ("repo_git_add", True)
    store.close()


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        ('command = "no-such-mcp-server"', "command not found: no-such-mcp-server"),
        (
            f'command = {json.dumps(sys.executable)}\nargs = ["-c", "import sys; sys.exit(3)"]',
            "it closed the connection before answering (did it exit? its stderr may say why)",
        ),
        (
            f'command = {json.dumps(sys.executable)}\nargs = ["-c", "import time; time.sleep(60)"]\n'
            "startup_timeout = 1",
            "no answer within 1 s",
        ),
    ],
    ids=["missing", "crashing", "hanging"],
)
def test_a_server_that_cannot_start_is_a_one_line_error_naming_it(
    project: Path, server: str, reason: str
) -> None:
    text = f'store = "runs.db"\n[[mcp]]\nname = "broken"\n{server}\n'
    (project / "plangate.toml").write_text(text, "utf-8")
    answers = script(project, "answers", {"route": "reply", "reply": "Hi!"})

    code, out, err = invoke("agent", "hello", "-m", f"scripted:{answers}")

    assert (code, out) == (2, "")
    error = err.strip().splitlines()[-1]  # after the line naming the model
    assert error.startswith("error: plangate.toml: MCP server 'broken' (command: ")
    assert error.endswith(f"failed to start: {reason}")
    assert not (project / "runs.db").exists() or not SQLiteStore(project / "runs.db").list_runs().items


def test_a_hanging_call_ends_at_the_server_s_timeout_and_the_run_goes_on(project: Path) -> None:
    (project / "plangate.toml").write_text(
        textwrap.dedent(
            f"""
            store = "runs.db"
            mcp_timeout = 1
            [[mcp]]
            name = "notes"
            command = {json.dumps(sys.executable)}
            args = [{json.dumps(str(ECHO_SERVER))}]
            effect_default = "read"
            """
        ),
        encoding="utf-8",
    )
    answers = script(
        project,
        "answers",
        call("context_tools_add", domain="notes"),
        call("notes_stall", seconds=30),
        {"action": "done"},
        "It hung.",
    )

    code, out, err = invoke("agent", "Wait for it", "-m", f"scripted:{answers}", "--mode", "react", "--json")

    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "completed"
    store = SQLiteStore(project / "runs.db")
    _, stalled = [e for e in store.events(result["run_id"]) if isinstance(e, ToolResultEvent)]
    assert (stalled.error_code, stalled.error_message) == (
        "mcp_timeout",
        "MCP server 'notes' gave no answer within 1 s",
    )
    store.close()


def test_formula_check_knows_the_tools_and_mcp_servers_of_plangate_toml(project: Path) -> None:
    # Before, `formula check` never read plangate.toml: without --tools it checked no tool name at all, so
    # a typo passed and a write step of an MCP server was not flagged.
    (project / "tools").mkdir()
    (project / "tools" / "local.py").write_text(TOOLS_PY, encoding="utf-8")
    (project / "plangate.toml").write_text(
        textwrap.dedent(
            f"""
            tools = ["tools/local.py:tools"]
            [[mcp]]
            name = "time"
            command = {json.dumps(sys.executable)}
            args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
            effect_default = "write"
            """
        ),
        encoding="utf-8",
    )
    steps = [
        {"id": "find", "tool": {"name": "lookup", "args": {"query": "week"}}},
        {"id": "now", "tool": {"name": "time_get_current_time", "args": {"timezone": "UTC"}}},
        {"id": "typo", "tool": {"name": "lokup", "args": {"query": "x"}}},
    ]
    (project / "week.formula.json").write_text(json.dumps({"formula": "week", "steps": steps}), "utf-8")

    code, out, err = invoke("formula", "check", "week", "--path", str(project), "--json")

    assert code == 1, err
    issues = {(issue["code"], issue["path"]) for issue in json.loads(out)["issues"]}
    assert ("unknown-tool", "steps[2].tool.name") in issues
    assert ("write-without-consent", "steps[1].consent") in issues
    assert not any(path.startswith("steps[0]") for _, path in issues)
    named = {issue["message"] for issue in json.loads(out)["issues"] if issue["code"] == "unknown-tool"}
    assert any("'lokup'" in message and "lookup" in message for message in named)
