"""Retrying a formula run from a step: only that step and its dependents run again (counted by the tools
themselves), a write downstream asks for consent again, and a formula changed since is never mixed in
silently."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import answer, memory_store, write_formula

from plangate.errors import ConfigError, InteractionError, NotFoundError
from plangate.events import StatusEvent
from plangate.formulas.engine import FormulaEngine
from plangate.formulas.retry import FormulaChangedError, downstream, retry_run
from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.interactions import Approve
from plangate.store import Store
from plangate.tools import ToolRegistry, ToolResult, tool
from plangate.tools.result import OUTCOME_UNKNOWN

BODY = """
[vars.version]
required = true

[[steps]]
id = "fetch"
tool = { name = "fetch", args = { version = "{{version}}" } }

[[steps]]
id = "lint"
needs = ["fetch"]
tool = { name = "lint", args = {} }

[[steps]]
id = "build"
needs = ["fetch"]
tool = { name = "build", args = { version = "{{version}}" } }

[[steps]]
id = "publish"
needs = ["build", "lint"]
tool = { name = "publish", args = { artifact = "{{steps.build.output.artifact}}" } }
"""


class Desk:
    """Tools that log every call they really make; ``build`` fails while ``broken``."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.broken = True

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
            return {"warnings": 0}

        @tool
        def build(version: str) -> dict[str, Any]:
            """Build the artifact."""
            desk.calls.append("build")
            if desk.broken:
                raise RuntimeError("the compiler crashed")
            return {"artifact": f"app-{version}.tar.gz"}

        @tool(effect="write")
        def publish(artifact: str) -> dict[str, Any]:
            """Publish the artifact."""
            desk.calls.append(f"publish {artifact}")
            return {"url": f"https://example.invalid/{artifact}"}

        return ToolRegistry([fetch, lint, build, publish])


def _runner(store: Store, desk: Desk, folder: Path) -> FormulaRunner:
    return FormulaRunner(store, desk.registry(), search_paths=[folder])


def _approve_all(runner: FormulaRunner, result: FormulaResult) -> FormulaResult:
    while result.interaction is not None:
        answer(runner, result.interaction.id, Approve())
        result = asyncio.run(runner.resume(result.run_id))
    return result


def _retry(runner: FormulaRunner, run_id: str, step: str, **options: Any) -> FormulaResult:
    retried = retry_run(runner, run_id, step, **options)
    return asyncio.run(runner.resume(retried))


def test_a_retry_from_the_failed_step_runs_only_it_and_its_dependents(tmp_path: Path) -> None:
    write_formula(tmp_path, "ship", BODY)
    store, desk = memory_store(), Desk()
    runner = _runner(store, desk, tmp_path)
    failed = asyncio.run(runner.start("ship", {"version": "1.0"}))
    assert failed.status == "failed"
    assert sorted(desk.calls) == ["build", "fetch", "lint"]
    desk.calls.clear()
    desk.broken = False

    result = _approve_all(runner, _retry(runner, failed.run_id, "build"))

    assert result.status == "completed"
    assert desk.calls == ["build", "publish app-1.0.tar.gz"]  # fetch and lint kept their results
    assert result.outputs["fetch"] == {"sources": "src-1.0"}
    assert store.get_run(result.run_id).input["retried_from"] == {
        "run_id": failed.run_id,
        "step": "build",
        "formula": "unchanged",
    }
    assert store.get_run(failed.run_id).status == "failed"  # the origin is only read


def test_a_write_downstream_asks_again_and_runs_once_more_only_in_the_retry(tmp_path: Path) -> None:
    write_formula(tmp_path, "ship", BODY)
    store, desk = memory_store(), Desk()
    desk.broken = False
    runner = _runner(store, desk, tmp_path)
    origin = _approve_all(runner, asyncio.run(runner.start("ship", {"version": "2.0"})))
    assert origin.status == "completed" and desk.calls.count("publish app-2.0.tar.gz") == 1

    asked = _retry(runner, origin.run_id, "lint")

    assert asked.status == "waiting" and asked.interaction is not None
    assert asked.interaction.run_id == asked.run_id  # consent asked in the new run
    assert desk.calls.count("publish app-2.0.tar.gz") == 1
    done = _approve_all(runner, asked)
    assert done.status == "completed"
    assert desk.calls.count("publish app-2.0.tar.gz") == 2
    assert desk.calls.count("build") == 1 and desk.calls.count("lint") == 2


def test_a_retry_of_a_run_started_with_yes_records_it_and_does_not_ask(tmp_path: Path) -> None:
    write_formula(tmp_path, "ship", BODY)
    store, desk = memory_store(), Desk()
    desk.broken = False
    runner = _runner(store, desk, tmp_path)
    origin = asyncio.run(runner.start("ship", {"version": "3.0"}, always_execute=True))
    assert origin.status == "completed"

    again = _retry(runner, origin.run_id, "publish")

    assert again.status == "completed"
    assert desk.calls.count("publish app-3.0.tar.gz") == 2
    codes = [e.code for e in store.events(again.run_id) if isinstance(e, StatusEvent)]
    assert "always_execute" in codes and "retried" in codes


def test_a_changed_formula_asks_which_to_use(tmp_path: Path) -> None:
    path = write_formula(tmp_path, "ship", BODY)
    store, desk = memory_store(), Desk()
    runner = _runner(store, desk, tmp_path)
    failed = asyncio.run(runner.start("ship", {"version": "1.0"}))
    path.write_text(path.read_text().replace("args = {} }", 'args = {} }\ntimeout = "5m"'), encoding="utf-8")
    count = len(store.list_runs(limit=100).items)

    with pytest.raises(
        FormulaChangedError, match=r"--formula-changed=use-new .* or --formula-changed=use-recorded"
    ):
        retry_run(runner, failed.run_id, "build")
    assert len(store.list_runs(limit=100).items) == count  # nothing stored

    desk.broken = False
    recorded = _retry(runner, failed.run_id, "build", formula_changed="use-recorded")
    assert store.get_run(recorded.run_id).input["retried_from"]["formula"] == "use-recorded"
    new = _retry(runner, failed.run_id, "build", formula_changed="use-new")
    assert store.get_run(new.run_id).input["retried_from"]["formula"] == "use-new"
    assert (
        store.get_run(new.run_id).input["formula_digest"]
        != store.get_run(failed.run_id).input["formula_digest"]
    )


def test_retry_refusals_store_nothing(tmp_path: Path) -> None:
    write_formula(tmp_path, "ship", BODY)
    store, desk = memory_store(), Desk()
    runner = _runner(store, desk, tmp_path)
    failed = asyncio.run(runner.start("ship", {"version": "1.0"}))
    engine = FormulaEngine(runner)
    run = store.get_run(failed.run_id)

    with pytest.raises(InteractionError, match="has no step 'nosuch'"):
        retry_run(runner, failed.run_id, "nosuch")
    with pytest.raises(NotFoundError):
        retry_run(runner, failed.run_id, "build", owner="mallory")
    with pytest.raises(ConfigError, match="unknown field 'at_round'"):
        engine.fork(run, {"at_round": 1})
    with pytest.raises(ConfigError, match="formula_changed"):
        engine.fork(run, {"from_step": "build", "formula_changed": "maybe"})
    assert len(store.list_runs(limit=100).items) == 1


def test_downstream_follows_needs_children_and_containers(tmp_path: Path) -> None:
    write_formula(tmp_path, "ship", BODY)
    runner = _runner(memory_store(), Desk(), tmp_path)
    plan = runner.plan("ship", {"version": "1"})
    assert downstream(plan, "build") == {"build", "publish"}
    assert downstream(plan, "fetch") == {"fetch", "lint", "build", "publish"}


def _stored_retry(tmp_path: Path) -> tuple[Store, Desk, FormulaRunner, str]:
    """A run of ``ship`` that failed at ``build``, and its retry from there, stored but not started (no state
    yet: it is copied from its origin when the retry starts)."""
    write_formula(tmp_path, "ship", BODY)
    store, desk = memory_store(), Desk()
    runner = _runner(store, desk, tmp_path)
    failed = asyncio.run(runner.start("ship", {"version": "1.0"}))
    return store, desk, runner, retry_run(runner, failed.run_id, "build")


def test_a_retry_stored_but_not_committed_yet_is_committed_once_when_advanced(tmp_path: Path) -> None:
    store, desk, runner, retried = _stored_retry(tmp_path)
    # as a process killed right after storing the retry leaves it: no state, no events
    assert store.get_snapshot(retried) is None and store.events(retried) == []
    desk.calls.clear()
    desk.broken = False

    result = _approve_all(
        runner, asyncio.run(FormulaRunner(store, desk.registry(), search_paths=[tmp_path]).resume(retried))
    )

    assert result.status == "completed"
    assert desk.calls == ["build", "publish app-1.0.tar.gz"]
    codes = [e.code for e in store.events(retried) if isinstance(e, StatusEvent)]
    assert codes.count("retried") == 1


def test_a_retry_not_started_yet_is_shown_and_cancelled(tmp_path: Path) -> None:
    # A retry waiting in its owner's queue has no state until it starts (copied from its origin then).
    # Before, showing it and cancelling it both failed: "run ... has no formula state".
    store, _, runner, retried = _stored_retry(tmp_path)

    assert FormulaEngine(runner).describe(store.get_run(retried)) == {"steps": []}
    runner.cancel(retried, "not needed any more")

    run = store.get_run(retried)
    assert run.status == "cancelled" and run.outcome is not None
    assert [e.code for e in store.events(retried) if isinstance(e, StatusEvent)] == ["cancelled"]


UNKNOWN = """
[[steps]]
id = "fetch"
tool = { name = "fetch", args = { version = "1" } }

[[steps]]
id = "publish"
needs = ["fetch"]
tool = { name = "publish", args = { artifact = "{{steps.fetch.output.sources}}" } }

[[steps]]
id = "lint"
needs = ["fetch"]
tool = { name = "lint", args = {} }
"""


def test_a_write_whose_outcome_was_unknown_stays_unknown_in_a_retry_until_a_person_says(
    tmp_path: Path,
) -> None:
    write_formula(tmp_path, "cut", UNKNOWN)
    store = memory_store()
    calls: list[str] = []

    @tool
    def fetch(version: str) -> dict[str, Any]:
        """Fetch."""
        calls.append("fetch")
        return {"sources": f"src-{version}"}

    @tool(effect="write")
    def publish(artifact: str) -> ToolResult:
        """Publish; the first call is cut off after it was sent (it may have happened)."""
        calls.append(f"publish {artifact}")
        return ToolResult.failed(OUTCOME_UNKNOWN, "the connection dropped after the request was sent")

    @tool
    def lint() -> dict[str, Any]:
        """Lint."""
        calls.append("lint")
        return {"warnings": 0}

    runner = FormulaRunner(store, ToolRegistry([fetch, publish, lint]), search_paths=[tmp_path])
    origin = asyncio.run(runner.start("cut", always_execute=True))
    assert origin.status == "waiting" and origin.interaction is not None
    assert "may or may not have happened" in origin.interaction.prompt
    runner.cancel(origin.run_id, "given up on")
    assert calls.count("publish src-1") == 1

    retried = _retry(runner, origin.run_id, "lint")  # publish is not downstream of lint

    assert calls.count("publish src-1") == 1  # never run again blindly, --yes or not
    assert retried.status == "waiting" and retried.interaction is not None
    assert retried.interaction.run_id == retried.run_id
    assert "may or may not have happened" in retried.interaction.prompt
    assert f"run {origin.run_id}" in retried.interaction.prompt
    done = _approve_all(runner, retried)  # a person says it happened
    assert done.status == "completed"
    assert done.steps["publish"].output == {"outcome_unknown": True, "happened": True}
    assert calls.count("publish src-1") == 1 and calls.count("lint") == 2
    (receipt,) = [r for r in store.receipts(done.run_id) if r.name == "publish"]
    assert receipt.success and "a person said it happened" in receipt.summary

    # offline, the retry is replayed as it ran: the write in doubt asked about again, and answered
    verdict = asyncio.run(FormulaEngine(runner).replay(store.get_run(done.run_id)))
    assert verdict.reproduced, verdict.diff.why
    assert calls.count("publish src-1") == 1


def test_fan_out_sub_runs_downstream_are_new_sub_runs_of_the_retry(tmp_path: Path) -> None:
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
        """,
    )
    calls: list[str] = []

    @tool
    def regions() -> dict[str, Any]:
        """The regions."""
        calls.append("regions")
        return {"regions": ["eu", "us"]}

    @tool
    def deploy(region: str) -> dict[str, Any]:
        """Deploy a region."""
        calls.append(f"deploy {region}")
        return {"deployed": region}

    store = memory_store()
    runner = FormulaRunner(store, ToolRegistry([regions, deploy]), search_paths=[tmp_path])
    origin = asyncio.run(runner.start("wide"))
    assert origin.status == "completed"
    before = sorted(run.id for run in store.list_runs(parent_run_id=origin.run_id).items)

    again = _retry(runner, origin.run_id, "list")

    assert again.status == "completed"
    new = sorted(run.id for run in store.list_runs(parent_run_id=again.run_id).items)
    assert len(new) == 2 and all(run_id.startswith(f"{again.run_id}.list.fan") for run_id in new)
    assert sorted(run.id for run in store.list_runs(parent_run_id=origin.run_id).items) == before
    assert sorted(calls) == ["deploy eu", "deploy eu", "deploy us", "deploy us", "regions", "regions"]
