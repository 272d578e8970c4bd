"""Nothing stored is executed: continuing a run never imports the tool spec its stored input names.

A run records where its tools came from (``--tools``); before, ``plangate approve / resume / ...`` without
``--tools`` imported that ``module:attr`` or file, so anyone who could write the database ran code as whoever
answered next. Here the stored spec is tampered to name code that leaves a marker file when imported, and
every way of continuing the run is tried: the marker never appears. The tools come from the command line,
``plangate.toml`` or an installed ``plangate.tools`` entry point; missing ones are named.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli.app import app

pytestmark = pytest.mark.timeout(120)

TOOLS_PY = textwrap.dedent(
    '''
    from plangate.tools import tool

    @tool(effect="write")
    def place(task: str, slot: int) -> str:
        """Place a task in a slot."""
        return f"placed {task} at {slot}"

    tools = [place]
    '''
)
PLACE = {"action": "continue", "tool_call": {"name": "place", "arguments": {"task": "gym", "slot": 3}}}


def evil_source(marker: Path) -> str:
    """Tools that look right, and write ``marker`` as soon as they are imported."""
    return f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n" + TOOLS_PY


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("PLANGATE_MODEL", "PLANGATE_TOOLS", "PLANGATE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    (tmp_path / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return tmp_path


def script(home: Path, name: str, *responses: object) -> str:
    path = home / f"{name}.json"
    path.write_text(json.dumps([r if isinstance(r, str) else json.dumps(r) for r in responses]), "utf-8")
    return f"scripted:{path}"


def invoke(*args: str) -> tuple[int, str]:
    """The exit code, and stdout (or stderr when the command failed)."""
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout if result.exit_code == 0 else result.stderr


def tamper(home: Path, run_id: str, specs: list[str]) -> None:
    """Rewrite the run's stored tool specs, as someone with write access to the database could."""
    with sqlite3.connect(home / "runs.db") as db:
        (raw,) = db.execute("SELECT input FROM runs WHERE id = ?", (run_id,)).fetchone()
        data = json.loads(raw)
        data["tools"] = specs
        db.execute("UPDATE runs SET input = ? WHERE id = ?", (json.dumps(data), run_id))


def on_path(folder: Path) -> str:
    """``PYTHONPATH`` with ``folder`` first (and whatever the tests themselves run with after it)."""
    return os.pathsep.join(part for part in (str(folder), os.environ.get("PYTHONPATH", "")) if part)


def waiting_agent_run(home: Path) -> tuple[str, str]:
    first = script(home, "first", PLACE)
    code, out = invoke("agent", "Put the gym in slot 3", "-m", first, "--tools", "tools.py:tools",
                       "--mode", "react", "--detach", "--json")  # fmt: skip
    assert code == 0, out
    waiting = json.loads(out)
    return waiting["run_id"], waiting["interaction"]["id"]


def test_approving_an_agent_run_never_imports_the_file_its_input_names(home: Path) -> None:
    run_id, interaction = waiting_agent_run(home)
    marker = home / "marker"
    (home / "evil.py").write_text(evil_source(marker), encoding="utf-8")
    tamper(home, run_id, [f"{home / 'evil.py'}:tools"])
    rest = script(home, "rest", {"action": "done"}, "Placed.")

    code, out = invoke("approve", interaction, "--model", rest)
    assert code == 2
    assert out.startswith(f"error: run {run_id!r} needs tools that are not available here: place (it was ")
    assert not marker.exists()
    code, out = invoke("resume", run_id, "--model", rest)
    assert code == 2 and "needs tools that are not available here: place" in out
    assert not marker.exists()

    code, out = invoke("approve", interaction, "--model", rest, "--tools", "tools.py:tools", "--json")
    assert code == 0, out
    assert json.loads(out)["status"] == "completed"
    assert not marker.exists()


FORMULA = textwrap.dedent(
    """
    formula = "ship"
    [[steps]]
    id = "ok"
    human = { prompt = "Ship it?" }
    [[steps]]
    id = "go"
    needs = ["ok"]
    tool = { name = "place", args = { task = "ship", slot = 1 } }
    consent = "auto"
    """
)


def test_resolving_a_formula_run_never_imports_the_module_its_input_names(home: Path) -> None:
    # A module name, imported from a folder on the path of the process that answers.
    (home / "ship.formula.toml").write_text(FORMULA, encoding="utf-8")
    code, out = invoke("run", "ship.formula.toml", "--tools", "tools.py:tools", "--detach", "--json")
    assert code == 0, out
    started = json.loads(out)
    marker = home / "marker"
    evil = home / "site"
    evil.mkdir()
    (evil / "evil_tools.py").write_text(evil_source(marker), encoding="utf-8")
    tamper(home, started["run_id"], ["evil_tools:tools"])

    env = {**os.environ, "PYTHONPATH": on_path(evil), "PLANGATE_STORE": f"sqlite:///{home / 'runs.db'}"}
    plangate = [sys.executable, "-c", "from plangate.cli.app import main; main()"]
    answer = [*plangate, "approve", started["interaction"]["id"]]
    refused = subprocess.run(answer, env=env, cwd=home, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2, refused.stderr
    expected = "needs tools that are not available here: place (it was started with --tools evil_tools:tools)"
    assert expected in refused.stderr
    assert not marker.exists()
    resumed = subprocess.run([*plangate, "resume", started["run_id"]], env=env, cwd=home,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert resumed.returncode == 2 and not marker.exists()

    done = subprocess.run([*answer, "--tools", "tools.py:tools", "--json"], env=env, cwd=home,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"]["go"]["status"] == "complete"
    assert not marker.exists()


def test_an_installed_entry_point_may_be_named_by_a_stored_run(home: Path) -> None:
    # The allow-list: tools a package declares under the plangate.tools entry points. A stored spec may
    # pick one of those; nothing else.
    site = home / "site"
    (site / "shop_tools-1.0.dist-info").mkdir(parents=True)
    (site / "shop_tools-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shop-tools\nVersion: 1.0\n", encoding="utf-8"
    )
    (site / "shop_tools-1.0.dist-info" / "entry_points.txt").write_text(
        "[plangate.tools]\nshop = shop_tools:tools\n", encoding="utf-8"
    )
    (site / "shop_tools.py").write_text(TOOLS_PY, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": on_path(site), "PLANGATE_STORE": f"sqlite:///{home / 'runs.db'}"}
    plangate = [sys.executable, "-c", "from plangate.cli.app import main; main()"]
    first, rest = script(home, "first", PLACE), script(home, "rest", {"action": "done"}, "Placed.")
    started = subprocess.run(
        [*plangate, "agent", "Put the gym in slot 3", "-m", first, "--tools", "shop_tools:tools", "--mode",
         "react", "--detach", "--json"],
        env=env, cwd=home, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    waiting = json.loads(started.stdout)

    approved = subprocess.run(
        [*plangate, "approve", waiting["interaction"]["id"], "-m", rest, "--json"],
        env=env, cwd=home, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["status"] == "completed"


def test_a_tool_the_run_recorded_by_name_is_found_among_the_installed_entry_points(home: Path) -> None:
    # started with the file of an installed package's tools, approved elsewhere without --tools: the
    # entry point offering the tool the run recorded (by its name) is used; the stored spec is not imported
    site = home / "site"
    (site / "shop_tools-1.0.dist-info").mkdir(parents=True)
    (site / "shop_tools-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shop-tools\nVersion: 1.0\n", encoding="utf-8"
    )
    (site / "shop_tools-1.0.dist-info" / "entry_points.txt").write_text(
        "[plangate.tools]\nshop = shop_tools:tools\n", encoding="utf-8"
    )
    (site / "shop_tools.py").write_text(TOOLS_PY, encoding="utf-8")
    marker = home / "imported.txt"
    (home / "evil.py").write_text(evil_source(marker), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": on_path(site), "PLANGATE_STORE": f"sqlite:///{home / 'runs.db'}"}
    plangate = [sys.executable, "-c", "from plangate.cli.app import main; main()"]
    first, rest = script(home, "first", PLACE), script(home, "rest", {"action": "done"}, "Placed.")
    started = subprocess.run(
        [*plangate, "agent", "Put the gym in slot 3", "-m", first, "--tools", "site/shop_tools.py:tools",
         "--mode", "react", "--detach", "--json"],
        env=env, cwd=home, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    waiting = json.loads(started.stdout)
    tamper(home, waiting["run_id"], [f"{home / 'evil.py'}:tools"])

    approved = subprocess.run(
        [*plangate, "approve", waiting["interaction"]["id"], "-m", rest, "--json"],
        env=env, cwd=home, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["status"] == "completed"
    assert not marker.exists()
