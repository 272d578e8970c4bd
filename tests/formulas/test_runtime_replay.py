"""Replaying a finished formula run offline: the record's tool results, write receipts, model texts and
answers reproduce it — sub-runs and agent steps' agents included — with no tool, no model and no network
called; a runtime (or a condition) that now decides otherwise is reported at the first step where it does."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field
from runtime_helpers import answer, memory_store, write_formula

from plangate.errors import InteractionError
from plangate.events import StepStateEvent
from plangate.formulas.engine import FormulaEngine
from plangate.formulas.replay import replay_run
from plangate.formulas.retry import retry_run
from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.interactions import Approve
from plangate.models import ModelRequest, ScriptedModel
from plangate.runs import Replayed
from plangate.store import Store
from plangate.tools import ToolRegistry, tool

RELEASE = """
[vars.version]
required = true

[[steps]]
id = "fetch"
tool = { name = "fetch", args = { version = "{{version}}" } }

[[steps]]
id = "lint"
needs = ["fetch"]
retries = 1
tool = { name = "lint", args = {} }

[[steps]]
id = "notes"
needs = ["fetch"]
llm = { prompt = "A title for the notes of {{version}}", schema = { type = "object", required = ["title"] } }

[[steps]]
id = "build"
needs = ["fetch"]
gate = { condition = "env.CI == 'true'", timeout = "1s" }
tool = { name = "build", args = { version = "{{version}}" } }

[[steps]]
id = "publish"
needs = ["build", "lint", "notes"]
[steps.tool]
name = "publish"
args = { artifact = "{{steps.build.output.artifact}}", title = "{{steps.notes.output.title}}" }
"""

NOTES = '```json\n{"title": "Faster builds"}\n```'


class Desk:
    """Tools that log every call they really make; ``lint`` fails its first call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.flaky = 1

    def registry(self) -> ToolRegistry:
        desk = self

        @tool
        def fetch(version: str) -> dict[str, Any]:
            """Fetch the sources."""
            desk.calls.append("fetch")
            return {"sources": f"src-{version}"}

        @tool
        def lint() -> dict[str, Any]:
            """Lint them."""
            desk.calls.append("lint")
            if desk.flaky:
                desk.flaky -= 1
                raise RuntimeError("the linter crashed")
            return {"warnings": 0}

        @tool
        def build(version: str) -> dict[str, Any]:
            """Build the artifact."""
            desk.calls.append("build")
            return {"artifact": f"app-{version}.tar.gz"}

        @tool(effect="write")
        def publish(artifact: str, title: str) -> dict[str, Any]:
            """Publish the artifact."""
            desk.calls.append(f"publish {artifact}")
            return {"url": f"https://example.invalid/{artifact}", "title": title}

        @tool
        def regions() -> dict[str, Any]:
            """The regions."""
            desk.calls.append("regions")
            return {"regions": ["eu", "us"]}

        @tool
        def deploy(region: str) -> dict[str, Any]:
            """Deploy a region."""
            desk.calls.append(f"deploy {region}")
            return {"deployed": region}

        return ToolRegistry([fetch, lint, build, publish, regions, deploy])


def _model(*generated: str) -> ScriptedModel:
    queue = list(generated)

    def answer_(request: ModelRequest) -> str:
        assert request.purpose == "generate", request.purpose
        return queue.pop(0)

    return ScriptedModel(answer_)


def _runner(store: Store, tools: ToolRegistry, folder: Path, **options: Any) -> FormulaRunner:
    options.setdefault("env", {"CI": "true"})
    return FormulaRunner(store, tools, search_paths=[folder], **options)


def _approve_all(runner: FormulaRunner, result: FormulaResult) -> FormulaResult:
    while result.interaction is not None:
        answer(runner, result.interaction.id, Approve())
        result = asyncio.run(runner.resume(result.run_id))
    return result


def _replay(runner: FormulaRunner, run_id: str) -> Replayed:
    return asyncio.run(FormulaEngine(runner).replay(runner.store.get_run(run_id)))


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Store, Desk, str]:
    write_formula(tmp_path, "release", RELEASE)
    store, desk = memory_store(), Desk()
    runner = _runner(store, desk.registry(), tmp_path, model=_model(NOTES))
    result = _approve_all(runner, asyncio.run(runner.start("release", {"version": "1.0"})))
    assert result.status == "completed", result.reason
    return store, desk, result.run_id


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket opened during the replay fails the test."""

    def refused(*_: Any, **__: Any) -> None:
        raise AssertionError("the replay opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refused)


def test_the_raw_text_of_an_llm_step_is_stored_with_its_state(recorded: tuple[Store, Desk, str]) -> None:
    store, _, run_id = recorded
    notes = [e for e in store.events(run_id) if isinstance(e, StepStateEvent) and e.step_id == "notes"]
    assert notes[-1].status == "complete" and notes[-1].output == {"title": "Faster builds"}
    assert notes[-1].raw == NOTES  # what the model returned, code fence and all
    assert all(
        e.raw is None for e in store.events(run_id) if isinstance(e, StepStateEvent) and e.step_id != "notes"
    )


def test_a_replay_reproduces_the_run_with_no_tool_no_model_and_no_network_called(
    recorded: tuple[Store, Desk, str], tmp_path: Path, no_network: None
) -> None:
    store, desk, run_id = recorded
    calls = list(desk.calls)
    runner = _runner(store, desk.registry(), tmp_path, model="openai:gpt-4o-mini")  # never called

    verdict = _replay(runner, run_id)

    assert verdict.reproduced, verdict.diff.why
    assert verdict.status == "completed"
    assert desk.calls == calls  # every result played back: the write was not made again
    rows = {row.key: row.a for row in verdict.diff.rows}
    assert set(rows) == {"fetch", "lint", "notes", "build", "publish", "outcome"}
    assert rows["lint"] is not None and rows["lint"].startswith("complete (attempt 2)")
    assert verdict.diff.rows[-1].key == "outcome"


def test_a_tool_that_now_refuses_its_recorded_arguments_is_the_first_divergence(
    recorded: tuple[Store, Desk, str], tmp_path: Path
) -> None:
    store, desk, run_id = recorded

    @tool
    def build(version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+$")]) -> dict[str, Any]:
        """Build the artifact (now of a full semantic version only)."""
        return {"artifact": version}

    tools = desk.registry()
    stricter = ToolRegistry([*(tools.get(name) for name in tools.names() if name != "build"), build])

    verdict = _replay(_runner(store, stricter, tmp_path), run_id)

    assert not verdict.reproduced
    assert verdict.diff.first == "build"
    assert verdict.diff.why.startswith("status: complete vs failed (build: ")
    assert "should match pattern" in verdict.diff.why  # the replay's reason: its arguments are now refused
    assert verdict.status == "failed"


def test_a_condition_that_now_decides_otherwise_is_reported_at_its_step(
    recorded: tuple[Store, Desk, str], tmp_path: Path
) -> None:
    store, desk, run_id = recorded
    runner = _runner(store, desk.registry(), tmp_path, env={"CI": "false"}, poll_interval=0.05)

    verdict = _replay(runner, run_id)

    assert (verdict.reproduced, verdict.diff.first) == (False, "build")  # its gate now never opens
    assert verdict.diff.why.startswith("status: complete vs failed")


def test_a_write_approved_by_a_person_is_asked_again_and_answered_from_the_record(
    recorded: tuple[Store, Desk, str], tmp_path: Path
) -> None:
    store, desk, run_id = recorded
    verdict = _replay(_runner(store, desk.registry(), tmp_path), run_id)
    asked = [row for row in verdict.diff.rows if row.key == "publish"]
    assert verdict.reproduced and asked[0].b == asked[0].a
    assert desk.calls.count("publish app-1.0.tar.gz") == 1


def test_a_retry_replays_from_its_origin_and_the_steps_it_carried(tmp_path: Path) -> None:
    write_formula(tmp_path, "release", RELEASE)
    store, desk = memory_store(), Desk()
    desk.flaky = 2  # lint fails both its attempts: the run fails
    runner = _runner(store, desk.registry(), tmp_path, model=_model(NOTES))
    failed = asyncio.run(runner.start("release", {"version": "2.0"}))
    assert failed.status == "failed"
    retried = _approve_all(runner, asyncio.run(runner.resume(retry_run(runner, failed.run_id, "lint"))))
    assert retried.status == "completed"
    calls = list(desk.calls)

    verdict = _replay(runner, retried.run_id)

    assert verdict.reproduced, verdict.diff.why
    assert desk.calls == calls
    carried = {row.key: row.a for row in verdict.diff.rows}
    assert carried["fetch"] is not None and carried["fetch"].startswith("complete")


def test_sub_runs_and_agent_steps_are_replayed_with_their_runs(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "region",
        """
        [vars.region]
        required = true
        [[steps]]
        id = "deploy"
        tool = { name = "deploy", args = { region = "{{region}}" } }
        """,
    )
    write_formula(
        tmp_path,
        "wide",
        """
        [[steps]]
        id = "list"
        tool = { name = "regions" }
        [steps.on_complete]
        for_each = "output.regions"
        formula = "region"
        vars = { region = "{item}" }
        parallel = true
        [[steps]]
        id = "review"
        needs = ["list"]
        agent = { prompt = "Check the deploys", tools = ["fetch", "publish"], mode = "react" }
        """,
    )
    store, desk = memory_store(), Desk()
    decisions = [
        {"action": "continue", "tool_call": {"name": "fetch", "arguments": {"version": "9"}}},
        {
            "action": "continue",
            "tool_call": {"name": "publish", "arguments": {"artifact": "a", "title": "t"}},
        },
        {"action": "done"},
    ]
    script = [json.dumps(d) for d in decisions] + ["Reviewed."]
    runner = _runner(store, desk.registry(), tmp_path, model=ScriptedModel(script))
    result = _approve_all(runner, asyncio.run(runner.start("wide")))
    assert result.status == "completed", result.reason
    calls = list(desk.calls)

    verdict = _replay(runner, result.run_id)

    assert verdict.reproduced, verdict.diff.why
    assert desk.calls == calls
    keys = [row.key for row in verdict.diff.rows]
    assert {"list.fan1.0 › deploy", "list.fan1.1 › deploy", "review.agent1 › 1", "review.agent1 › 3"} <= set(
        keys
    )
    assert keys[-1] == "outcome"


def test_a_changed_agent_tool_is_reported_in_the_agents_round(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "ask",
        """
        [[steps]]
        id = "review"
        agent = { prompt = "Fetch it", tools = ["fetch"], mode = "react" }
        """,
    )
    store, desk = memory_store(), Desk()
    decision = {"action": "continue", "tool_call": {"name": "fetch", "arguments": {"version": "9"}}}
    script = ScriptedModel([json.dumps(decision), json.dumps({"action": "done"}), "Done."])
    runner = _runner(store, desk.registry(), tmp_path, model=script)
    result = asyncio.run(runner.start("ask"))
    assert result.status == "completed", result.reason

    @tool
    def fetch(version: Annotated[int, Field(ge=10)]) -> dict[str, Any]:
        """Fetch the sources (now of version 10 on)."""
        return {"sources": version}

    verdict = _replay(_runner(store, ToolRegistry([fetch]), tmp_path), result.run_id)

    assert verdict.diff.first == "review.agent1 › 1"
    assert verdict.diff.why.startswith("result: ok: ")


def test_only_a_finished_root_formula_run_is_replayed(tmp_path: Path) -> None:
    write_formula(tmp_path, "release", RELEASE)
    store, desk = memory_store(), Desk()
    desk.flaky = 0
    runner = _runner(store, desk.registry(), tmp_path, model=_model(NOTES))
    waiting = asyncio.run(runner.start("release", {"version": "3.0"}))
    assert waiting.status == "waiting"
    with pytest.raises(InteractionError, match="only a run that ended is replayed"):
        _replay(runner, waiting.run_id)


def test_a_run_whose_loop_grew_its_plan_replays_from_the_plan_it_started_with(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "poll",
        """
        [[steps]]
        id = "wait"
        [steps.loop]
        until = "check.output.healthy == true"
        max = 4
        var = "attempt"
        [[steps.loop.body]]
        id = "check"
        tool = { name = "health", args = { attempt = "{{attempt}}" } }
        """,
    )
    calls: list[int] = []

    @tool
    def health(attempt: int) -> dict[str, Any]:
        """Healthy from the third check on."""
        calls.append(attempt)
        return {"healthy": attempt >= 3}

    store = memory_store()
    runner = _runner(store, ToolRegistry([health]), tmp_path)
    result = asyncio.run(runner.start("poll"))
    assert result.status == "completed" and calls == [1, 2, 3]

    verdict = _replay(runner, result.run_id)

    assert verdict.reproduced, verdict.diff.why
    assert calls == [1, 2, 3]
    assert {"wait.iter1.check", "wait.iter3.check"} <= {row.key for row in verdict.diff.rows}


def test_an_llm_step_that_names_its_own_model_replays_without_it(tmp_path: Path) -> None:
    responses = tmp_path / "notes.json"
    responses.write_text(json.dumps(['{"title": "Hello"}']), encoding="utf-8")
    write_formula(
        tmp_path,
        "named",
        f"""
        [[steps]]
        id = "notes"
        llm = {{ prompt = "A title", model = "scripted:{responses}", schema = {{ type = "object" }} }}
        """,
    )
    store = memory_store()
    runner = _runner(store, ToolRegistry(), tmp_path)
    result = asyncio.run(runner.start("named"))
    assert result.status == "completed" and result.outputs["notes"] == {"title": "Hello"}
    responses.unlink()  # the model the formula names is not there any more: the record plays it back

    verdict = _replay(runner, result.run_id)

    assert verdict.reproduced, verdict.diff.why


def test_a_replay_that_does_not_end_in_time_is_cut_off_and_compared_as_far_as_it_went(
    recorded: tuple[Store, Desk, str], tmp_path: Path
) -> None:
    store, desk, run_id = recorded
    runner = _runner(store, desk.registry(), tmp_path, env={"CI": "false"}, poll_interval=0.05)
    plan = runner.load(run_id).plan
    assert plan.index["build"].gate is not None

    verdict = asyncio.run(replay_run(runner, store.get_run(run_id), limit=0.3))

    assert verdict.status == "cut off after 0.3 s"
    assert not verdict.reproduced and verdict.diff.first == "build"
