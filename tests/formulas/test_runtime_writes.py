"""Write steps keep the agent's promises: consent to the exact call, an intent before it, a receipt after it,
and after a crash a reconcile or a question, never a blind second run (SPEC §2 Runtime, §6)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import answer, failed_steps, memory_store, write_formula

from plangate.errors import FormulaError, InteractionError, StoreError
from plangate.events import InteractionOpenedEvent, StatusEvent, StepStateEvent, ToolCallEvent
from plangate.formulas import check_formula, load_formula
from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.interactions import Answer, Approve, Edit, Reject
from plangate.runs.consent import arguments_digest
from plangate.store import Store
from plangate.tools import ToolRegistry, ToolResult, current_call, tool


class Ledger:
    """A write tool that counts, from inside the tool, every call it really made, by idempotency key."""

    def __init__(self, store: Store | None = None) -> None:
        self.writes: list[tuple[str, str | None]] = []  # (artifact, idempotency key)
        self.by_key: dict[str, ToolResult] = {}
        self.entered = threading.Event()
        self.store = store
        self.intent_at_call: list[str] = []

    def registry(
        self,
        *,
        reconcile: bool = False,
        idempotent: bool | None = None,
        block: float = 0.0,
        timeout: float | None = None,
    ) -> ToolRegistry:
        ledger = self

        def reconciler(key: str) -> ToolResult | None:
            return ledger.by_key.get(key)

        @tool(
            effect="write",
            reconcile=reconciler if reconcile else None,
            idempotent=idempotent,
            timeout=timeout,
        )
        def publish(artifact: str, channel: str = "stable") -> dict[str, Any]:
            """Publish an artifact."""
            call = current_call()
            key = call.idempotency_key if call is not None else None
            if ledger.store is not None and key is not None:
                intent = ledger.store.get_write_intent(key)
                ledger.intent_at_call.append(intent.status if intent is not None else "missing")
            ledger.entered.set()
            if block:
                time.sleep(block)
            ledger.writes.append((artifact, key))
            result = {"url": f"https://downloads.invalid/{channel}/{artifact}"}
            if key is not None:
                ledger.by_key[key] = ToolResult.done("published", data=result)
            return result

        @tool
        def build(version: str = "1.0.0") -> dict[str, Any]:
            """Build the artifact."""
            return {"artifact": f"app-{version}.tgz"}

        return ToolRegistry([publish, build])


PUBLISH = """
[[steps]]
id = "build"
tool = { name = "build" }
[[steps]]
id = "publish"
needs = ["build"]
{consent}
tool = { name = "publish", args = { artifact = "{{steps.build.output.artifact}}" } }
[[steps]]
id = "announce"
needs = ["publish"]
tool = { name = "build", args = { version = "announced" } }
"""


def publish_formula(tmp_path: Path, consent: str = "") -> Path:
    return write_formula(tmp_path, "rel", PUBLISH.replace("{consent}", consent))


def start(runner: FormulaRunner, source: object, **options: Any) -> FormulaResult:
    return asyncio.run(runner.start(source, **options))  # type: ignore[arg-type]


def resume(runner: FormulaRunner, run_id: str) -> FormulaResult:
    return asyncio.run(runner.resume(run_id))


def statuses(store: Store, run_id: str) -> list[str]:
    return [e.code for e in store.events(run_id) if isinstance(e, StatusEvent)]


# -- consent ------------------------------------------------------------------------------------------------


def test_a_write_step_asks_consent_to_its_exact_call_and_writes_nothing_before(tmp_path: Path) -> None:
    ledger = Ledger()
    runner = FormulaRunner(memory_store(), ledger.registry())

    result = start(runner, publish_formula(tmp_path))

    assert result.status == "waiting"
    asked = result.interaction
    assert asked is not None and asked.kind == "confirm" and asked.step_id == "publish"
    assert asked.tool is not None
    assert asked.tool.name == "publish"
    assert asked.tool.arguments == {"artifact": "app-1.0.0.tgz", "channel": "stable"}
    assert asked.tool.arguments_digest == arguments_digest({"artifact": "app-1.0.0.tgz", "channel": "stable"})
    assert "Allow publish" in asked.prompt and "app-1.0.0.tgz" in asked.prompt
    assert ledger.writes == []
    assert runner.store.pending_write_intents(result.run_id) == []  # nothing promised before consent
    opened = [e for e in runner.store.events(result.run_id) if isinstance(e, InteractionOpenedEvent)]
    assert opened[-1].tool == asked.tool

    answer(runner, asked.id, Approve(), by="ana")
    done = resume(runner, result.run_id)

    assert done.status == "completed", done.reason
    assert ledger.writes == [("app-1.0.0.tgz", asked.id)]  # the consent's id is the idempotency key
    intent = runner.store.get_write_intent(asked.id)
    assert intent is not None and intent.status == "done" and intent.tool == "publish"
    assert intent.arguments_digest == asked.tool.arguments_digest
    receipts = runner.store.receipts(done.run_id)
    assert [(r.source, r.name, r.success) for r in receipts] == [("write_receipt", "publish", True)]
    assert done.outputs["publish"] == {"url": "https://downloads.invalid/stable/app-1.0.0.tgz"}


def test_the_intent_commits_before_the_call_and_the_receipt_with_the_step(tmp_path: Path) -> None:
    store = memory_store()
    ledger = Ledger(store)
    runner = FormulaRunner(store, ledger.registry())

    result = start(runner, publish_formula(tmp_path, 'consent = "auto"'))

    assert result.status == "completed", result.reason
    # committed, and still waiting for its receipt, during the call
    assert ledger.intent_at_call == ["intent"]
    calls = [e for e in store.events(result.run_id) if isinstance(e, ToolCallEvent)]
    assert [(c.tool, c.step_id) for c in calls] == [("publish", "publish")]
    intent = store.get_write_intent(calls[0].call_id)
    assert intent is not None and intent.status == "done"
    assert [(r.source, r.step_index) for r in store.receipts(result.run_id)] == [("write_receipt", 1)]


def test_rejecting_the_consent_fails_the_step_writes_nothing_and_skips_what_needs_it(tmp_path: Path) -> None:
    ledger = Ledger()
    runner = FormulaRunner(memory_store(), ledger.registry())
    result = start(runner, publish_formula(tmp_path))
    assert result.interaction is not None

    answer(runner, result.interaction.id, Reject(reason="not this week"))
    done = resume(runner, result.run_id)

    assert done.status == "failed"
    assert done.steps["publish"].status == "failed"
    assert done.steps["publish"].reason == "rejected: not this week"
    assert done.steps["announce"].status == "skipped"
    assert ledger.writes == []
    assert runner.store.receipts(done.run_id) == []


def test_edit_runs_the_edited_call_and_refuses_arguments_that_do_not_fit(tmp_path: Path) -> None:
    ledger = Ledger()
    runner = FormulaRunner(memory_store(), ledger.registry())
    result = start(runner, publish_formula(tmp_path))
    asked = result.interaction
    assert asked is not None

    with pytest.raises(InteractionError, match="do not fit"):
        answer(runner, asked.id, Edit(arguments={"artifact": 5, "colour": "red"}))
    with pytest.raises(InteractionError, match="approve, edit or reject"):
        answer(runner, asked.id, Answer(text="yes"))
    assert runner.store.get_interaction(asked.id).status == "open"  # nothing changed

    answer(runner, asked.id, Edit(arguments={"artifact": "app-1.0.1.tgz", "channel": "beta"}))
    done = resume(runner, result.run_id)

    assert done.status == "completed", done.reason
    assert ledger.writes == [("app-1.0.1.tgz", asked.id)]
    intent = runner.store.get_write_intent(asked.id)
    assert intent is not None
    assert intent.arguments_digest == arguments_digest({"artifact": "app-1.0.1.tgz", "channel": "beta"})


def test_consent_auto_on_the_step_runs_the_write_without_asking(tmp_path: Path) -> None:
    ledger = Ledger()
    runner = FormulaRunner(memory_store(), ledger.registry())

    result = start(runner, publish_formula(tmp_path, 'consent = "auto"'))

    assert result.status == "completed", result.reason
    assert len(ledger.writes) == 1
    assert runner.store.list_interactions(run_id=result.run_id) == []
    running = [
        e
        for e in runner.store.events(result.run_id)
        if isinstance(e, StepStateEvent) and e.step_id == "publish" and e.status == "running"
    ]
    assert running[0].reason == 'running without asking: the step says consent = "auto"'
    assert runner.store.pending_write_intents(result.run_id) == []


def test_always_execute_runs_writes_unasked_and_says_so_in_the_events(tmp_path: Path) -> None:
    ledger = Ledger()
    runner = FormulaRunner(memory_store(), ledger.registry())

    result = start(runner, publish_formula(tmp_path), always_execute=True)

    assert result.status == "completed", result.reason
    assert len(ledger.writes) == 1
    assert runner.store.list_interactions(run_id=result.run_id) == []
    assert "always_execute" in statuses(runner.store, result.run_id)
    assert runner.store.get_run(result.run_id).input["always_execute"] is True


def test_a_read_tool_step_never_asks(tmp_path: Path) -> None:
    ledger = Ledger()
    runner = FormulaRunner(memory_store(), ledger.registry())
    path = write_formula(tmp_path, "reads", '[[steps]]\nid = "b"\ntool = { name = "build" }\n')

    assert start(runner, path).status == "completed"


# -- the formula says it; check warns -----------------------------------------------------------------------


def test_consent_is_a_step_field_checked_with_its_path(tmp_path: Path) -> None:
    bad = write_formula(
        tmp_path, "bad", '[[steps]]\nid = "a"\nconsent = "always"\ntool = { name = "build" }\n'
    )
    with pytest.raises(FormulaError, match=r"steps\[0\]\.consent: expected 'ask' or 'auto'"):
        load_formula(bad)
    human = write_formula(
        tmp_path, "human", '[[steps]]\nid = "a"\nconsent = "auto"\nhuman = { prompt = "ok?" }\n'
    )
    with pytest.raises(FormulaError, match=r"steps\[0\]\.consent: consent applies to tool steps"):
        load_formula(human)


def test_check_warns_when_a_write_step_says_nothing_of_consent(tmp_path: Path) -> None:
    registry = Ledger().registry()

    _, issues = check_formula(publish_formula(tmp_path), tools=registry)

    warnings = [i for i in issues if i.code == "write-without-consent"]
    assert [(i.level, i.path) for i in warnings] == [("warning", "steps[1].consent")]
    assert "publish" in warnings[0].message and 'consent = "auto"' in warnings[0].message
    for said in ('consent = "ask"', 'consent = "auto"'):
        _, quiet = check_formula(publish_formula(tmp_path, said), tools=registry)
        assert [i for i in quiet if i.code == "write-without-consent"] == []
    _, by_name = check_formula(publish_formula(tmp_path), tools=registry.names())
    # names alone say nothing of effects
    assert [i for i in by_name if i.code == "write-without-consent"] == []


# -- recovery -----------------------------------------------------------------------------------------------


def _cut_off(runner: FormulaRunner, source: Path, ledger: Ledger, **options: Any) -> str:
    """Start a run and stop it (as a killed process would) while its write is in its tool."""

    async def scenario() -> str:
        task = asyncio.ensure_future(runner.start(source, **options))
        assert await asyncio.to_thread(ledger.entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (run,) = runner.store.list_runs(kind="formula").items
        return run.id

    return asyncio.run(scenario())


def test_after_a_crash_a_write_the_tool_reconciles_is_not_run_again(tmp_path: Path) -> None:
    ledger = Ledger()
    store = memory_store()
    registry = ledger.registry(reconcile=True, block=0.2)
    run_id = _cut_off(FormulaRunner(store, registry), publish_formula(tmp_path, 'consent = "auto"'), ledger)
    assert len(ledger.writes) == 1  # the sync tool's thread finished its write after the cut
    (pending,) = store.pending_write_intents(run_id)

    done = resume(FormulaRunner(store, registry), run_id)

    assert done.status == "completed", done.reason
    assert ledger.writes == [("app-1.0.0.tgz", pending.key)]  # once: reconciled, not run again
    assert "reconciled" in statuses(store, run_id)
    assert store.get_write_intent(pending.key).status == "done"  # type: ignore[union-attr]
    assert done.outputs["publish"] == {"url": "https://downloads.invalid/stable/app-1.0.0.tgz"}


def test_after_a_crash_a_write_that_left_no_trace_runs_once_under_the_same_key(tmp_path: Path) -> None:
    ledger = Ledger()
    store = memory_store()
    registry = ledger.registry(reconcile=True, block=0.2)
    run_id = _cut_off(FormulaRunner(store, registry), publish_formula(tmp_path, 'consent = "auto"'), ledger)
    (pending,) = store.pending_write_intents(run_id)
    ledger.writes.clear()
    ledger.by_key.clear()  # as if the cut-off call never reached the other side

    done = resume(FormulaRunner(store, ledger.registry(reconcile=True)), run_id)

    assert done.status == "completed", done.reason
    assert ledger.writes == [("app-1.0.0.tgz", pending.key)]
    assert "not_run" in statuses(store, run_id)


def test_after_a_crash_a_write_nobody_can_reconcile_asks_a_person(tmp_path: Path) -> None:
    ledger = Ledger()
    store = memory_store()
    registry = ledger.registry(block=0.2)
    run_id = _cut_off(FormulaRunner(store, registry), publish_formula(tmp_path, 'consent = "auto"'), ledger)
    assert len(ledger.writes) == 1
    runner = FormulaRunner(store, registry)

    waiting = resume(runner, run_id)

    assert waiting.status == "waiting"
    assert waiting.steps["publish"].status == "waiting"
    asked = waiting.interaction
    assert asked is not None and asked.step_id == "publish"
    assert "may or may not have happened" in asked.prompt
    assert "outcome_unknown" in statuses(store, run_id)
    assert len(ledger.writes) == 1  # not run again
    with pytest.raises(InteractionError, match="approve if it did"):
        answer(runner, asked.id, Answer(text="maybe"))

    answer(runner, asked.id, Approve())
    done = resume(runner, run_id)

    assert done.status == "completed", done.reason
    assert len(ledger.writes) == 1
    assert done.steps["publish"].output == {"outcome_unknown": True, "happened": True}
    assert store.pending_write_intents(run_id) == []
    assert [r.success for r in store.receipts(run_id)] == [True]


def test_a_person_saying_the_write_did_not_happen_fails_the_step(tmp_path: Path) -> None:
    ledger = Ledger()
    store = memory_store()
    registry = ledger.registry(block=0.2)
    run_id = _cut_off(FormulaRunner(store, registry), publish_formula(tmp_path, 'consent = "auto"'), ledger)
    runner = FormulaRunner(store, registry)
    asked = resume(runner, run_id).interaction
    assert asked is not None

    answer(runner, asked.id, Reject(reason="nothing on the server"))
    done = resume(runner, run_id)

    assert done.status == "failed"
    assert "did not happen" in done.steps["publish"].reason
    assert done.steps["announce"].status == "skipped"
    assert len(ledger.writes) == 1
    assert store.pending_write_intents(run_id) == []


# -- timeouts -----------------------------------------------------------------------------------------------


def test_a_write_past_its_step_timeout_is_never_retried_while_its_call_may_still_run(tmp_path: Path) -> None:
    ledger = Ledger()
    source = write_formula(
        tmp_path,
        "slow",
        """
        [[steps]]
        id = "publish"
        consent = "auto"
        retries = 2
        timeout = "1s"
        tool = { name = "publish", args = { artifact = "big.tgz" } }
        """,
    )
    runner = FormulaRunner(memory_store(), ledger.registry(block=1.5))

    result = start(runner, source)  # returns once the worker thread, still writing after the timeout, ended

    assert result.status == "waiting"
    assert result.steps["publish"].attempt == 1  # no retry
    assert result.interaction is not None and "timed out" in result.interaction.prompt
    assert ledger.writes == [("big.tgz", f"{result.run_id}:publish:1")]  # one call, however many retries


def test_a_write_past_its_tool_timeout_asks_instead_of_retrying(tmp_path: Path) -> None:
    ledger = Ledger()
    source = write_formula(
        tmp_path,
        "slow",
        """
        [[steps]]
        id = "publish"
        consent = "auto"
        retries = 3
        tool = { name = "publish", args = { artifact = "big.tgz" } }
        """,
    )
    runner = FormulaRunner(memory_store(), ledger.registry(block=0.3, timeout=0.05))

    result = start(runner, source)

    assert result.status == "waiting"
    assert result.steps["publish"].status == "waiting" and result.steps["publish"].attempt == 1
    assert result.interaction is not None and "stopped after" in result.interaction.prompt
    assert len(ledger.writes) == 1
    assert len(runner.store.pending_write_intents(result.run_id)) == 1  # settled only by a person


def test_a_timed_out_idempotent_write_is_retried(tmp_path: Path) -> None:
    ledger = Ledger()
    source = write_formula(
        tmp_path,
        "slow",
        """
        [[steps]]
        id = "publish"
        consent = "auto"
        retries = 1
        tool = { name = "publish", args = { artifact = "big.tgz" } }
        """,
    )
    runner = FormulaRunner(memory_store(), ledger.registry(idempotent=True, block=0.3, timeout=0.05))

    result = start(runner, source)

    assert result.status == "failed"
    assert result.steps["publish"].attempt == 2
    assert "stopped after" in result.steps["publish"].reason
    assert runner.store.pending_write_intents(result.run_id) == []


# -- sub-runs -----------------------------------------------------------------------------------------------


def test_writes_inside_fan_out_sub_runs_ask_consent_and_run_once_each(tmp_path: Path) -> None:
    ledger = Ledger()
    write_formula(
        tmp_path,
        "one",
        """
        [vars.item]
        required = true
        [[steps]]
        id = "publish"
        tool = { name = "publish", args = { artifact = "{{item}}" } }
        """,
    )
    write_formula(
        tmp_path,
        "many",
        """
        [[steps]]
        id = "list"
        tool = { name = "build" }
        [steps.on_complete]
        for_each = "output.items"
        formula = "one"
        vars = { item = "{item}" }
        parallel = true
        """,
    )

    @tool
    def listing() -> dict[str, Any]:
        """Three artifacts."""
        return {"items": ["a", "b", "c"]}

    registry = ledger.registry()
    tools = ToolRegistry([registry.get("publish"), tool(name="build")(listing.function)])
    runner = FormulaRunner(memory_store(), tools, search_paths=[tmp_path])

    result = start(runner, "many")
    asked: list[str] = []
    while result.status == "waiting" and result.interaction is not None:
        assert result.interaction.kind == "confirm" and result.interaction.run_id != result.run_id
        assert len(ledger.writes) == len(asked)  # only the consented ones ran, once each
        asked.append(result.interaction.id)
        answer(runner, result.interaction.id, Approve())
        result = resume(runner, result.run_id)

    assert result.status == "completed", result.reason
    assert sorted(a for a, _ in ledger.writes) == ["a", "b", "c"]
    assert sorted(k for _, k in ledger.writes if k is not None) == sorted(asked)
    assert len(asked) == 3


def test_always_execute_holds_for_sub_formulas_too(tmp_path: Path) -> None:
    ledger = Ledger()
    write_formula(tmp_path, "inner", PUBLISH.replace("{consent}", ""))
    write_formula(tmp_path, "outer", '[[steps]]\nid = "inner"\nformula = { name = "inner" }\n')
    runner = FormulaRunner(memory_store(), ledger.registry(), search_paths=[tmp_path])

    result = start(runner, "outer", always_execute=True)

    assert result.status == "completed", result.reason
    assert len(ledger.writes) == 1
    (child,) = runner.store.list_runs(parent_run_id=result.run_id).items
    assert child.input["always_execute"] is True
    assert "always_execute" in statuses(runner.store, child.id)


def test_after_a_crash_an_idempotent_write_without_reconcile_runs_again_under_the_same_key(
    tmp_path: Path,
) -> None:
    ledger = Ledger()
    store = memory_store()
    registry = ledger.registry(idempotent=True, block=0.2)
    run_id = _cut_off(FormulaRunner(store, registry), publish_formula(tmp_path, 'consent = "auto"'), ledger)
    (pending,) = store.pending_write_intents(run_id)

    done = resume(FormulaRunner(store, registry), run_id)

    assert done.status == "completed", done.reason
    # harmless by the tool's own word: the same call, under the same key
    assert ledger.writes == [("app-1.0.0.tgz", pending.key)] * 2
    assert "rerun" in statuses(store, run_id)
    assert store.pending_write_intents(run_id) == []


def test_a_store_that_fails_before_a_write_stops_the_run_and_never_fails_the_step(tmp_path: Path) -> None:
    """The store lost as a write's lease is confirmed (a database restarting) stops the run's advance where
    it stands, as a crash would: the step is not failed for it, and the run resumes and writes once."""
    ledger = Ledger()
    store = memory_store()
    registry = ledger.registry(reconcile=True)
    extend = store.extend_lease
    failures: list[str] = []

    def extend_lease_once_lost(lease: Any, ttl: float) -> Any:
        if not failures:
            failures.append(lease.run_id)
            raise StoreError("extend the lease failed on the store: the connection to the database was lost")
        return extend(lease, ttl)

    store.extend_lease = extend_lease_once_lost  # type: ignore[method-assign]
    with pytest.raises(StoreError, match="connection to the database was lost"):
        start(FormulaRunner(store, registry), publish_formula(tmp_path, 'consent = "auto"'))
    (run_id,) = failures
    assert store.get_run(run_id).status == "running"
    assert failed_steps(store, run_id) == []
    assert ledger.writes == []  # stopped before the call
    (pending,) = store.pending_write_intents(run_id)

    done = resume(FormulaRunner(store, registry), run_id)

    assert done.status == "completed", done.reason
    assert ledger.writes == [("app-1.0.0.tgz", pending.key)]
    assert store.pending_write_intents(run_id) == []
