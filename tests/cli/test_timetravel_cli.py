"""``plangate fork`` and ``plangate diff``: a fork from the command line asks again for a write at or after
its point, and the diff of the fork with its origin marks where they part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from test_agent_cli import TOOLS_PY, invoke, script

from plangate.cli import _continue, _inspect, _start, _timetravel


@pytest.fixture
def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """The root command."""

    for module in (_start, _continue, _inspect, _timetravel):
        module.register(root)
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLANGATE_MODEL", raising=False)
    monkeypatch.setenv("PLANGATE_TOOLS", "tools.py:tools")
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    (tmp_path / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return tmp_path


def _place(slot: int) -> dict[str, object]:
    return {"action": "continue", "tool_call": {"name": "place", "arguments": {"task": "gym", "slot": slot}}}


def _origin(app: typer.Typer, home: Path) -> str:
    model = script(home, "origin", _place(3))
    code, out, _ = invoke(app, "agent", "Place the gym", "--model", model, "--mode", "react", "--json")
    assert code == 0, out
    run_id: str = json.loads(out)["run_id"]
    rest = script(home, "rest", {"action": "done", "speak": "Placed."}, "In slot 3.")
    code, out, _ = invoke(app, "approve", run_id, "--model", rest, "--json")
    assert code == 0 and json.loads(out)["status"] == "completed", out
    return run_id


def test_fork_asks_again_in_the_new_run_and_diff_marks_the_divergence(app: typer.Typer, home: Path) -> None:
    origin = _origin(app, home)
    model = script(home, "fork", _place(5), {"action": "done", "speak": "Placed."}, "In slot 5.")

    code, out, err = invoke(
        app,
        "fork",
        origin,
        "--at",
        "1",
        "--model",
        model,
        "--instruction",
        "slot 5",
        "--interactive",
        input="a\n",
    )

    assert code == 0, (out, err)
    assert "Allow place" in out and '"slot": 5' in out
    fork_id = out.splitlines()[-1].split()[1]
    assert fork_id != origin and "completed" in out.splitlines()[-1]
    code, out, err = invoke(app, "diff", origin, fork_id, "--json")
    assert code == 0, err
    found = json.loads(out)
    assert (found["unit"], found["first_divergence"]) == ("round", "1")
    assert found["why"] == 'arguments: {"slot":3,"task":"gym"} vs {"slot":5,"task":"gym"}'
    code, out, _ = invoke(app, "diff", origin, fork_id)
    assert code == 0 and "first divergence at round 1: arguments" in out
    code, out, _ = invoke(app, "status", fork_id)
    assert code == 0 and f"forked from {origin} before round 1" in out
    code, out, _ = invoke(app, "status", origin)
    assert code == 0 and f"forks: {fork_id} (completed, before round 1)" in out
    code, out, _ = invoke(app, "status", origin, "--json")
    assert json.loads(out)["forks"] == [{"run_id": fork_id, "status": "completed", "at": "before round 1"}]
    code, out, _ = invoke(app, "runs", "--origin", origin, "--json")
    assert [run["id"] for run in json.loads(out)] == [fork_id]


def test_fork_refusals_are_one_line_errors(app: typer.Typer, home: Path) -> None:
    origin = _origin(app, home)

    code, _, err = invoke(app, "fork", origin, "--at", "9")
    assert code == 2 and err.strip().startswith(f"error: run '{origin}' has no round 9")
    code, _, err = invoke(app, "fork", origin, "--at", "1", "--args", "[1]")
    assert code == 2 and err.strip() == "error: --args: expected a JSON object, got list"
    code, _, err = invoke(app, "fork", "run_nosuch", "--at", "1")
    assert code == 2 and "run_nosuch" in err
    code, _, err = invoke(app, "diff", origin, "run_nosuch")
    assert code == 2 and "run_nosuch" in err


RETRY_TOOLS = """
from pathlib import Path

from plangate.tools import tool


def _log(name):
    with Path("calls.log").open("a", encoding="utf-8") as log:
        log.write(name + "\\n")


@tool
def fetch() -> dict:
    \"\"\"Fetch.\"\"\"
    _log("fetch")
    return {"ok": True}


@tool
def build() -> dict:
    \"\"\"Build (fails while the file 'broken' exists).\"\"\"
    import os

    _log("build")
    if os.path.exists("broken"):
        raise RuntimeError("the compiler crashed")
    return {"artifact": "a.tar.gz"}


tools = [fetch, build]
"""

TWO = """formula = "two"
[[steps]]
id = "fetch"
tool = { name = "fetch", args = {} }

[[steps]]
id = "build"
needs = ["fetch"]
tool = { name = "build", args = {} }
"""


def test_retry_from_the_failed_step_runs_only_it_and_a_changed_formula_asks(
    app: typer.Typer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "retry_tools.py").write_text(RETRY_TOOLS, encoding="utf-8")
    monkeypatch.setenv("PLANGATE_TOOLS", "retry_tools.py:tools")
    (home / "two.formula.toml").write_text(TWO, encoding="utf-8")
    (home / "broken").write_text("", encoding="utf-8")
    code, out, _ = invoke(app, "run", "two", "--path", ".", "--json")
    assert code != 0 or json.loads(out)["status"] == "failed"
    origin = json.loads(out)["run_id"]
    (home / "broken").unlink()

    code, out, err = invoke(app, "retry", origin, "--from", "build", "--path", ".", "--json")

    assert code == 0, (out, err)
    assert json.loads(out)["status"] == "completed"
    assert (home / "calls.log").read_text(encoding="utf-8").split() == ["fetch", "build", "build"]
    retried = json.loads(out)["run_id"]
    code, out, _ = invoke(app, "status", origin)
    assert code == 0 and f"retries: {retried} (completed, from step build)" in out
    code, out, _ = invoke(app, "status", retried, "--json")
    assert json.loads(out)["origin"] == {"run_id": origin, "relation": "retry", "at": "from step build"}

    code, out, err = invoke(app, "replay", retried, "--path", ".")
    assert code == 0, (out, err)
    assert f"run {retried} reproduced: 2 step(s)" in out  # offline: nothing called again
    assert (home / "calls.log").read_text(encoding="utf-8").split() == ["fetch", "build", "build"]
    stricter = RETRY_TOOLS.replace("def build() -> dict:", "def build(target: str) -> dict:")
    (home / "strict_tools.py").write_text(stricter, encoding="utf-8")
    code, out, _ = invoke(app, "replay", retried, "--path", ".", "--tools", "strict_tools.py:tools")
    assert code == 1 and "first divergence at step build: status: complete vs failed" in out
    (home / "two.formula.toml").write_text(TWO.replace("args = {} }\n\n", 'args = {} }\ntimeout = "5m"\n\n'))
    code, _, err = invoke(app, "retry", origin, "--from", "build", "--path", ".")
    assert code == 2 and "--formula-changed=use-new" in err
    code, out, err = invoke(
        app, "retry", origin, "--from", "build", "--path", ".", "--formula-changed", "use-new", "--json"
    )
    assert code == 0 and json.loads(out)["status"] == "completed", err


def test_replay_reproduces_a_run_offline_and_reports_a_changed_tool(app: typer.Typer, home: Path) -> None:
    origin = _origin(app, home)

    code, out, err = invoke(app, "replay", origin, "--json")
    assert code == 0, (out, err)
    assert json.loads(out)["reproduced"] is True
    code, out, _ = invoke(app, "replay", origin)
    assert code == 0 and f"run {origin} reproduced: 2 round(s)" in out

    stricter = TOOLS_PY.replace(
        "def place(task: str, slot: int)", "def place(task: str, slot: Literal[1, 2])"
    )
    (home / "strict.py").write_text("from typing import Literal\n" + stricter, encoding="utf-8")
    code, out, _ = invoke(app, "replay", origin, "--tools", "strict.py:tools")
    assert code == 1
    assert "first divergence at round 1: result: ok: placed gym at 3 vs" in out


GATED = """formula = "gated"
[[steps]]
id = "fetch"
tool = { name = "fetch", args = {} }

[[steps]]
id = "ok"
needs = ["fetch"]
human = { prompt = "Go on?", kind = "approve" }
"""


def test_resume_of_a_run_whose_formula_changed_says_so_until_told(
    app: typer.Typer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "retry_tools.py").write_text(RETRY_TOOLS, encoding="utf-8")
    monkeypatch.setenv("PLANGATE_TOOLS", "retry_tools.py:tools")
    (home / "gated.formula.toml").write_text(GATED, encoding="utf-8")
    code, out, _ = invoke(app, "run", "gated", "--path", ".", "--detach", "-q")
    assert code == 0, out
    run_id = out.strip()
    code, _, err = invoke(app, "resume", run_id, "--path", ".", "--detach")
    assert code == 0, err  # unchanged: it goes on (and waits again)
    (home / "gated.formula.toml").write_text(GATED.replace("Go on?", "Really go on?"), encoding="utf-8")

    code, _, err = invoke(app, "resume", run_id, "--path", ".", "--detach")
    assert code == 2 and "changed since run" in err and "--formula-changed=use-recorded" in err
    code, _, err = invoke(app, "resume", run_id, "--path", ".", "--detach", "--formula-changed", "use-new")
    assert code == 2 and "retry it" in err
    resume = ["resume", run_id, "--path", ".", "--detach"]
    code, _, err = invoke(app, *resume, "--formula-changed", "use-recorded")
    assert code == 0, err
