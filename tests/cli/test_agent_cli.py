"""``plangate agent`` from the command line, and ``approve | reject | answer | resume`` on agent runs."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from plangate.cli import _continue, _inspect, _loading, _start
from plangate.store import SQLiteStore

TOOLS_PY = textwrap.dedent(
    '''
    from plangate.tools import tool

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    @tool(effect="write")
    def place(task: str, slot: int) -> str:
        """Place a task in a slot."""
        return f"placed {task} at {slot}"

    tools = [lookup, place]
    '''
)


@pytest.fixture
def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """The root command."""

    _start.register(root)
    _continue.register(root)
    _inspect.register(root)
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLANGATE_MODEL", raising=False)
    monkeypatch.delenv("PLANGATE_TOOLS", raising=False)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    (tmp_path / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return tmp_path


def script(home: Path, name: str, *responses: object) -> str:
    path = home / f"{name}.json"
    path.write_text(
        json.dumps([r if isinstance(r, str) else json.dumps(r) for r in responses]), encoding="utf-8"
    )
    return f"scripted:{path}"


def invoke(app: typer.Typer, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), input=input)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


PLACE = {"action": "continue", "tool_call": {"name": "place", "arguments": {"task": "gym", "slot": 3}}}
LOOKUP = {
    "action": "continue",
    "speak": "Let me look.",
    "tool_call": {"name": "lookup", "arguments": {"query": "week"}},
}


def test_agent_streams_the_run_live_and_ends_completed(app: typer.Typer, home: Path) -> None:
    model = script(home, "s", LOOKUP, {"action": "done", "speak": "All done."}, "The week is free.")

    code, out, err = invoke(
        app, "agent", "Look at my week", "--model", model, "--tools", "tools.py:tools", "--mode", "react"
    )

    assert (code, err) == (0, f"model: {model} (--model)\n")
    lines = out.splitlines()
    assert lines[:4] == [
        "round 1 tool lookup",
        "Let me look.",
        '  ↳ lookup {"query": "week"}',
        "  ← found week",
    ]
    assert "The week is free." in lines
    assert "outcome: completed (done)" in lines
    assert re.fullmatch(r"run run_\S+ completed \(done\) · [\d,]+ tokens in, [\d,]+ out", lines[-1])


def test_without_a_model_the_default_is_used_and_named(
    app: typer.Typer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default rule itself (PLANGATE_MODEL, then API keys, then local) is tested with the registry; the
    # real local model answering through this command is tested with the model (test_local_model.py).
    spec = script(home, "default", {"route": "reply", "reply": "Hi!"})
    monkeypatch.setattr(_loading, "default_model_spec", lambda: (spec, "no API key"))

    code, out, err = invoke(app, "agent", "hello")

    assert code == 0 and "Hi!" in out
    assert err == f"model: {spec} (no API key)\n"


def test_an_unknown_model_is_a_one_line_error(app: typer.Typer, home: Path) -> None:
    code, out, err = invoke(app, "agent", "hello", "--model", "nosuch:thing")

    assert code == 2 and out == ""
    assert err.strip() == (
        "error: 'nosuch:thing': unknown model provider 'nosuch', expected one of anthropic, local, openai, "
        "scripted"
    )


def test_done_when_completes_the_run_on_its_proof_and_a_bad_one_is_a_clear_error(
    app: typer.Typer, home: Path
) -> None:
    model = script(home, "goal", LOOKUP, "The week is free.")
    goal = "receipts.any(tool == 'lookup' and success)"

    code, out, _ = invoke(
        app,
        "agent",
        "Look",
        "--model",
        model,
        "--tools",
        "tools.py:tools",
        "--mode",
        "react",
        "--done-when",
        goal,
    )

    assert code == 0 and "outcome: completed (proven)" in out.splitlines()
    code, out, err = invoke(app, "agent", "Look", "--model", model, "--done-when", "receipts.any(tol == 1)")
    assert (code, out) == (2, "")
    assert err.splitlines()[1] == (
        "error: Agent done_when: unknown receipt field 'tol' at column 14; expected tool, success, step, "
        "source or output (did you mean 'tool'?)"
    )


def test_the_model_can_come_from_the_environment(
    app: typer.Typer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANGATE_MODEL", script(home, "env", {"route": "reply", "reply": "Hi!"}))

    code, out, _ = invoke(app, "agent", "hello", "--json")

    assert code == 0
    assert json.loads(out)["answer"] == "Hi!"


def test_detach_prints_the_interaction_and_approve_finishes_the_run(app: typer.Typer, home: Path) -> None:
    first = script(home, "first", PLACE)
    rest = script(home, "rest", {"action": "done"}, "The gym is in slot 3.")

    code, out, _ = invoke(
        app,
        "agent",
        "Put the gym in slot 3",
        "-m",
        first,
        "--tools",
        "tools.py:tools",
        "--mode",
        "react",
        "--detach",
    )

    assert code == 0, out
    match = re.search(r"waiting on interaction (int_\S+) \(confirm\): Allow place", out)
    assert match is not None, out
    interaction = match.group(1)
    tools = f"--tools {home / 'tools.py'}:tools"
    assert f"answer with: plangate approve {interaction} {tools} --model scripted:NEXT.json  |  " in out

    code, out, err = invoke(
        app, "approve", interaction, "--model", rest, "--tools", "tools.py:tools", "--json"
    )

    assert (code, err) == (0, "")
    result = json.loads(out)
    assert (result["status"], result["answer"]) == ("completed", "The gym is in slot 3.")
    store = SQLiteStore(home / "runs.db")
    (receipt,) = store.receipts(result["run_id"])
    assert (receipt.source, receipt.name) == ("write_receipt", "place")
    store.close()


def test_reject_and_answer_commands_resolve_agent_runs(app: typer.Typer, home: Path) -> None:
    first = script(home, "first", PLACE)
    ask = script(home, "ask", {"action": "ask_user", "speak": "Which slot then?"})
    end = script(home, "end", {"action": "done"}, "Noted.")
    code, out, _ = invoke(
        app,
        "agent",
        "Place the gym",
        "-m",
        first,
        "--tools",
        "tools.py:tools",
        "--mode",
        "react",
        "--detach",
        "--json",
    )
    waiting = json.loads(out)

    code, out, _ = invoke(
        app, "reject", waiting["interaction"]["id"], "--reason", "taken", "--model", ask, "--json",
        "--tools", "tools.py:tools",
    )  # fmt: skip
    asked = json.loads(out)
    assert code == 0 and asked["interaction"]["kind"] == "ask_user"
    code, out, _ = invoke(
        app, "answer", asked["interaction"]["id"], "slot 5", "--model", end, "--json",
        "--tools", "tools.py:tools",
    )  # fmt: skip

    assert code == 0 and json.loads(out)["answer"] == "Noted."
    store = SQLiteStore(home / "runs.db")
    results = [e for e in store.events(waiting["run_id"]) if e.type == "tool_result"]
    assert [r.error_code for r in results] == ["rejected"]  # type: ignore[union-attr]
    store.close()


def test_no_resume_commits_the_answer_and_resume_runs_the_approved_call(app: typer.Typer, home: Path) -> None:
    # Before, --no-resume was refused for agent runs; an agent run's answer is committed as a formula's is,
    # and the approved call runs where the run is advanced next (here: `plangate resume`), exactly once.
    code, out, _ = invoke(
        app,
        "agent",
        "Place",
        "-m",
        script(home, "s", PLACE),
        "--tools",
        "tools.py:tools",
        "--mode",
        "react",
        "--detach",
        "--json",
    )
    waiting = json.loads(out)

    code, out, _ = invoke(
        app, "approve", waiting["interaction"]["id"], "--no-resume", "--tools", "tools.py:tools"
    )

    assert code == 0, out
    assert f"continues with: plangate resume {waiting['run_id']}" in out
    store = SQLiteStore(home / "runs.db")
    assert store.receipts(waiting["run_id"]) == []
    rest = script(home, "rest", {"action": "done"}, "Placed.")
    code, out, _ = invoke(app, "resume", waiting["run_id"], "-m", rest, "--tools", "tools.py:tools", "--json")
    assert code == 0, out
    assert (json.loads(out)["status"], json.loads(out)["answer"]) == ("completed", "Placed.")
    assert [r.summary for r in store.receipts(waiting["run_id"])] == ["placed gym at 3"]
    store.close()


@pytest.mark.parametrize(
    ("answers", "slot", "tool_result"),
    [
        ("a\n", 3, "  ← placed gym at 3"),
        ('e\n{"task": "gym", "slot": 7}\n', 7, "  ← placed gym at 7"),
        (
            'e\nnot json\n{"task": "gym", "slot": "x"}\ne\n{"task": "gym", "slot": 8}\n',
            8,
            "  ← placed gym at 8",
        ),
        ("r\nslot is taken\n", None, "  ← blocked (rejected): slot is taken"),
    ],
)
def test_consent_is_asked_in_the_terminal(
    app: typer.Typer, home: Path, answers: str, slot: int | None, tool_result: str
) -> None:
    model = script(home, "s", PLACE, {"action": "done"}, "Finished.")

    code, out, _ = invoke(
        app,
        "agent",
        "Place the gym",
        "-m",
        model,
        "--tools",
        "tools.py:tools",
        "--mode",
        "react",
        "--interactive",
        input=answers,
    )

    assert code == 0, out
    assert tool_result in out.splitlines()
    if "not json" in answers:
        assert "not JSON: Expecting value at column 1" in out
        assert "arguments.slot: expected an integer, got 'x'" in out
    store = SQLiteStore(home / "runs.db")
    run = store.list_runs(limit=1).items[0]
    receipts = store.receipts(run.id)
    assert [r.summary for r in receipts] == ([] if slot is None else [f"placed gym at {slot}"])
    store.close()


def test_a_question_is_answered_in_the_terminal(app: typer.Typer, home: Path) -> None:
    model = script(
        home, "s", {"action": "ask_user", "speak": "Which day?"}, {"action": "done"}, "Tuesday it is."
    )

    code, out, _ = invoke(
        app, "agent", "Pick a day", "-m", model, "--mode", "react", "--interactive", input="Tuesday\n"
    )

    assert code == 0
    assert "Tuesday it is." in out.splitlines()


def test_an_aborted_run_exits_1(app: typer.Typer, home: Path) -> None:
    model = script(home, "s", "garbage", "garbage", "garbage")

    code, out, _ = invoke(app, "agent", "go", "-m", model, "--mode", "react", "--max-rounds", "5")

    assert code == 1
    assert "correction (malformed_output)" in out
    assert re.search(r"run run_\S+ aborted \(corrections_exhausted\)", out)


def test_resume_continues_an_agent_run(app: typer.Typer, home: Path) -> None:
    code, out, _ = invoke(
        app,
        "agent",
        "Pick",
        "-m",
        script(home, "s", {"action": "ask_user", "speak": "?"}),
        "--mode",
        "react",
        "--detach",
        "--json",
    )
    run_id = json.loads(out)["run_id"]

    code, out, _ = invoke(app, "resume", run_id, "--json")

    assert code == 0
    assert json.loads(out)["status"] == "waiting"


def test_a_scripted_file_can_use_the_tagged_wire(app: typer.Typer, home: Path) -> None:
    path = home / "tagged.json"
    responses = ['<decision>{"action": "done"}</decision>Nothing to do.', "All good."]
    path.write_text(json.dumps({"wire": "tagged", "responses": responses}), encoding="utf-8")

    code, out, _ = invoke(app, "agent", "anything?", "-m", f"scripted:{path}", "--mode", "react", "--json")

    assert code == 0
    assert json.loads(out)["answer"] == "All good."


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the responses file: No such file or directory"),
        ("[1, 2]", 'expected a JSON list of response strings (or {"responses": [...]})'),
        ('{"wire": "xml", "responses": []}', "wire: expected 'json' or 'tagged', got 'xml'"),
    ],
)
def test_a_bad_scripted_file_is_a_one_line_error(
    app: typer.Typer, home: Path, content: str | None, message: str
) -> None:
    path = home / "bad.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")

    code, _, err = invoke(app, "agent", "hi", "-m", f"scripted:{path}")

    assert code == 2
    assert err.strip() == f"error: scripted:{path}: {message}"


def test_cancel_ends_a_waiting_agent_run_and_expires_its_question(app: typer.Typer, home: Path) -> None:
    first = script(home, "first", PLACE)
    code, out, _ = invoke(
        app, "agent", "Place the gym", "-m", first, "--tools", "tools.py:tools", "--mode", "react",
        "--detach", "--json",
    )  # fmt: skip
    waiting = json.loads(out)
    assert waiting["status"] == "waiting"

    code, out, err = invoke(app, "cancel", waiting["run_id"], "--reason", "not today")

    assert (code, err) == (0, f"cancelled {waiting['run_id']}\n")
    store = SQLiteStore(home / "runs.db")
    run = store.get_run(waiting["run_id"])
    assert run.status == "cancelled"
    assert store.get_interaction(waiting["interaction"]["id"]).status == "expired"
    assert store.events(run.id)[-1].type == "outcome"
    store.close()
    code, _, err = invoke(app, "cancel", waiting["run_id"])
    assert code == 2 and "already ended (cancelled)" in err


def test_the_answer_is_printed_once_when_done_says_it_already(app: typer.Typer, home: Path) -> None:
    # the model's done says the answer; the summary that follows falls back to that same text
    model = script(home, "s", {"action": "done", "speak": "All done."})

    code, out, _ = invoke(app, "agent", "hi", "-m", model, "--mode", "react")

    assert code == 0, out
    assert out.splitlines().count("All done.") == 1
    code, out, _ = invoke(app, "agent", "hi", "-m", model, "--mode", "react", "--json")
    assert json.loads(out)["answer"] == "All done."
