"""The formula executor: DAG order, gates at run time, people, retries, timeouts, loops, fan-out."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime_helpers import EXAMPLES, Calls, answer, make_tools, memory_store, write_formula

from plangate.errors import FormulaError, InteractionError, StaleInteraction
from plangate.events import GateEvent, OutcomeEvent, StepStateEvent
from plangate.formulas.plan import CookedStep, Plan, ToolExecutor
from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.interactions import Answer, Approve, Edit, Reject
from plangate.store import Store, open_store


def runner_for(tmp_path: Path, calls: Calls, store: Store | None = None, **options: object) -> FormulaRunner:
    return FormulaRunner(
        store or memory_store(),
        make_tools(calls),
        search_paths=[tmp_path, EXAMPLES],
        **options,  # type: ignore[arg-type]
    )


def start(runner: FormulaRunner, name: str, vars: dict[str, object] | None = None) -> FormulaResult:
    return asyncio.run(runner.start(name, vars))


def resume(runner: FormulaRunner, run_id: str) -> FormulaResult:
    return asyncio.run(runner.resume(run_id))


def step_events(store: Store, run_id: str, step_id: str) -> list[StepStateEvent]:
    return [e for e in store.events(run_id) if isinstance(e, StepStateEvent) and e.step_id == step_id]


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A store on each backend (a SQLite file, then PostgreSQL), for the tests that run on both."""
    opened = open_store(store_url)
    yield opened
    opened.close()


def test_release_waits_for_approval_then_publishes_the_built_artifact(tmp_path: Path, store: Store) -> None:
    calls = Calls()
    runner = runner_for(tmp_path, calls, store)
    result = start(runner, "release", {"version": "1.4.0"})

    assert result.status == "waiting"
    assert result.interaction is not None
    assert result.interaction.kind == "approval"
    assert "dist/app-1.4.0.tar.gz" in result.interaction.prompt
    assert calls.names() == ["run_tests", "build_artifact"]
    assert runner.store.get_run(result.run_id).status == "waiting"

    answer(runner, result.interaction.id, Approve(), by="ana")
    result = resume(runner, result.run_id)

    assert result.status == "completed"
    assert calls.log[-1] == (
        "publish",
        {"artifact": "dist/app-1.4.0.tar.gz", "channel": "stable", "owner": "release-team"},
    )
    gates = [e for e in runner.store.events(result.run_id) if isinstance(e, GateEvent)]
    assert gates and gates[-1].satisfied
    assert "run-tests.output.failed is 0" in gates[-1].reason


def test_rejecting_the_approval_fails_it_and_skips_what_needs_it(tmp_path: Path, store: Store) -> None:
    calls = Calls()
    runner = runner_for(tmp_path, calls, store)
    result = start(runner, "release", {"version": "1.4.0"})
    assert result.interaction is not None

    answer(runner, result.interaction.id, Reject(reason="not on a Friday"))
    result = resume(runner, result.run_id)

    assert result.status == "failed"
    assert result.steps["approve"].status == "failed"
    assert result.steps["approve"].reason == "rejected: not on a Friday"
    assert result.steps["publish"].status == "skipped"
    assert "approve" in result.steps["publish"].reason
    assert "publish" not in calls.names()


OUTCOME_FIELDS = {"status", "stage", "code", "user_message", "internal_reason"}


def _last_outcome(store: Store, run_id: str) -> OutcomeEvent:
    events = store.events(run_id)
    assert isinstance(events[-1], OutcomeEvent), [e.type for e in events[-3:]]
    assert [e.type for e in events].count("outcome") == 1
    return events[-1]


def test_a_formula_run_ends_with_one_outcome_event_of_the_agents_shape(tmp_path: Path, store: Store) -> None:
    runner = runner_for(tmp_path, Calls(), store)
    result = start(runner, "release", {"version": "1.4.0"})
    assert result.interaction is not None
    assert not [e for e in store.events(result.run_id) if isinstance(e, OutcomeEvent)]  # waiting: no end
    answer(runner, result.interaction.id, Approve())
    result = resume(runner, result.run_id)

    ended = _last_outcome(store, result.run_id)
    assert (ended.status, ended.stage, ended.code, ended.user_message) == (
        "completed",
        "run",
        "done",
        "all 4 steps finished",
    )
    stored = store.get_run(result.run_id).outcome
    assert stored is not None and set(stored) == OUTCOME_FIELDS
    assert stored["code"] == "done" and stored["status"] == "completed"


def test_a_failed_formula_runs_outcome_says_which_step_failed_and_why(tmp_path: Path, store: Store) -> None:
    runner = runner_for(tmp_path, Calls(), store)
    result = start(runner, "release", {"version": "1.4.0"})
    assert result.interaction is not None
    answer(runner, result.interaction.id, Reject("not on a Friday"))
    result = resume(runner, result.run_id)

    ended = _last_outcome(store, result.run_id)
    assert (ended.status, ended.code) == ("failed", "step_failed")
    assert ended.user_message == "failed steps: approve (rejected: not on a Friday)"
    assert result.reason == ended.user_message


def test_a_cancelled_formula_run_ends_with_an_outcome_event(tmp_path: Path, store: Store) -> None:
    runner = runner_for(tmp_path, Calls(), store)
    result = start(runner, "release", {"version": "1.4.0"})

    runner.cancel(result.run_id, "the release was called off")

    ended = _last_outcome(store, result.run_id)
    assert (ended.status, ended.stage, ended.code, ended.user_message) == (
        "cancelled",
        "run",
        "cancelled",
        "the release was called off",
    )
    stored = store.get_run(result.run_id).outcome
    assert stored is not None and set(stored) == OUTCOME_FIELDS


def test_an_interaction_resolves_once_and_edit_does_not_fit_a_formula_step(tmp_path: Path) -> None:
    runner = runner_for(tmp_path, Calls())
    result = start(runner, "release", {"version": "1.4.0"})
    assert result.interaction is not None
    with pytest.raises(InteractionError):
        answer(runner, result.interaction.id, Edit(arguments={"x": 1}))
    answer(runner, result.interaction.id, Approve())
    before = runner.store.last_seq(result.run_id)
    with pytest.raises(StaleInteraction):
        answer(runner, result.interaction.id, Reject(reason="too late"))
    assert runner.store.last_seq(result.run_id) == before


def test_a_failing_step_is_retried_then_succeeds(tmp_path: Path) -> None:
    calls = Calls()
    calls.fail_times["run_tests"] = 1  # release.formula.toml gives run-tests one retry
    runner = runner_for(tmp_path, calls)
    result = start(runner, "release", {"version": "1.4.0"})

    assert result.status == "waiting"
    assert calls.names()[:3] == ["run_tests", "run_tests", "build_artifact"]
    assert result.steps["run-tests"].attempt == 2
    states = [e.status for e in step_events(runner.store, result.run_id, "run-tests")]
    assert states == ["running", "ready", "running", "complete"]


def test_a_step_out_of_retries_fails_the_run_but_independent_work_finishes(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "branches",
        """
        [[steps]]
        id = "broken"
        retries = 2
        tool = { name = "work", args = { name = "broken", fail = true } }
        [[steps]]
        id = "after-broken"
        needs = ["broken"]
        tool = { name = "work", args = { name = "after" } }
        [[steps]]
        id = "later"
        needs = ["after-broken"]
        tool = { name = "work", args = { name = "later" } }
        [[steps]]
        id = "independent"
        tool = { name = "work", args = { name = "independent" } }
        """,
    )
    calls = Calls()
    result = start(runner_for(tmp_path, calls), "branches")

    assert result.status == "failed"
    assert result.steps["broken"].status == "failed"
    assert result.steps["broken"].attempt == 3
    assert "broken broke" in result.steps["broken"].reason
    assert result.steps["after-broken"].status == "skipped"
    assert result.steps["later"].status == "skipped"
    assert result.steps["independent"].status == "complete"
    assert sorted(calls.names()) == ["work"] * 4  # three attempts, one independent step


def test_ready_steps_run_concurrently_up_to_the_limit(tmp_path: Path) -> None:
    steps = "\n".join(
        f'[[steps]]\nid = "s{i}"\ntool = {{ name = "work", args = {{ name = "s{i}", delay = 0.02 }} }}\n'
        for i in range(12)
    )
    write_formula(tmp_path, "wide", steps)
    calls = Calls()
    result = start(runner_for(tmp_path, calls, concurrency=3), "wide")
    assert result.status == "completed"
    assert calls.max_running == 3

    calls = Calls()
    start(runner_for(tmp_path, calls, concurrency=8), "wide")
    assert calls.max_running == 8


def test_a_gate_holds_a_step_until_its_condition_holds(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "gated",
        """
        [[steps]]
        id = "slow"
        tool = { name = "work", args = { name = "slow", delay = 0.05 } }
        [[steps]]
        id = "guarded"
        gate = { condition = "slow.status == 'complete' and slow.output.name == 'slow'" }
        tool = { name = "work", args = { name = "guarded" } }
        """,
    )
    calls = Calls()
    runner = runner_for(tmp_path, calls)
    result = start(runner, "gated")

    assert result.status == "completed"
    assert calls.names() == ["work", "work"]
    assert [args["name"] for _, args in calls.log] == ["slow", "guarded"]
    gates = [e for e in runner.store.events(result.run_id) if isinstance(e, GateEvent)]
    assert [g.satisfied for g in gates] == [False, True]
    assert "slow.status is 'running'" in gates[0].reason
    waiting = step_events(runner.store, result.run_id, "guarded")[0]
    assert waiting.status == "waiting" and waiting.reason.startswith("gate: ")


def test_a_gate_that_never_opens_fails_the_step_after_its_timeout(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "stuck",
        """
        [[steps]]
        id = "a"
        tool = { name = "work", args = { name = "a" } }
        [[steps]]
        id = "b"
        needs = ["a"]
        gate = { condition = "a.output.name == 'never'", timeout = "1s" }
        tool = { name = "work", args = { name = "b" } }
        """,
    )
    calls = Calls()
    began = time.monotonic()
    result = start(runner_for(tmp_path, calls, poll_interval=0.1), "stuck")

    assert time.monotonic() - began >= 1.0
    assert result.status == "failed"
    assert result.steps["b"].reason.startswith("gate timed out after 1s")
    assert [args["name"] for _, args in calls.log] == ["a"]


def test_a_gate_timer_waits_before_the_step_runs(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "timed",
        """
        [[steps]]
        id = "later"
        gate = { timer = "1s" }
        tool = { name = "work", args = { name = "later" } }
        """,
    )
    began = time.monotonic()
    result = start(runner_for(tmp_path, Calls()), "timed")
    assert result.status == "completed"
    assert time.monotonic() - began >= 1.0


def test_a_gate_with_nothing_left_to_change_it_leaves_the_run_waiting(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "blocked",
        """
        [[steps]]
        id = "b"
        gate = { condition = "vars.go == 'yes'" }
        tool = { name = "work", args = { name = "b" } }
        [vars]
        go = "no"
        """,
    )
    result = start(runner_for(tmp_path, Calls()), "blocked")
    assert result.status == "waiting"
    assert result.interaction is None
    assert "vars.go is 'no'" in result.reason


def test_a_human_gate_asks_for_approval_before_the_step(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "guarded",
        """
        [[steps]]
        id = "drop-table"
        gate = { human = "Really drop the table?" }
        tool = { name = "work", args = { name = "drop" } }
        """,
    )
    calls = Calls()
    runner = runner_for(tmp_path, calls)
    result = start(runner, "guarded")
    assert result.status == "waiting"
    assert result.interaction is not None and result.interaction.prompt == "Really drop the table?"
    assert calls.log == []

    answer(runner, result.interaction.id, Approve())
    assert resume(runner, result.run_id).status == "completed"
    assert calls.names() == ["work"]


def test_an_input_step_records_the_answer_for_later_steps_and_refuses_an_approval(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "asks",
        """
        [[steps]]
        id = "name"
        human = { prompt = "What should the release be called?", kind = "input" }
        [[steps]]
        id = "use"
        needs = ["name"]
        tool = { name = "notify", args = { message = "naming it {{steps.name.output.answer}}" } }
        """,
    )
    calls = Calls()
    runner = runner_for(tmp_path, calls)
    result = start(runner, "asks")
    assert result.interaction is not None and result.interaction.kind == "ask_user"
    # before, an approval was taken: the step completed with no answer, and the step reading it failed
    with pytest.raises(InteractionError, match="asks for an answer: answer it with text"):
        answer(runner, result.interaction.id, Approve())
    assert runner.store.get_interaction(result.interaction.id).status == "open"
    answer(runner, result.interaction.id, Answer(text="Aurora"))
    result = resume(runner, result.run_id)
    assert result.status == "completed"
    assert calls.log == [("notify", {"message": "naming it Aurora"})]


def test_a_manual_step_waits_until_someone_completes_it(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "manual",
        """
        [[steps]]
        id = "sign-contract"
        title = "Sign the contract"
        [[steps]]
        id = "announce"
        needs = ["sign-contract"]
        tool = { name = "notify", args = { message = "signed by {{steps.sign-contract.output.by}}" } }
        """,
    )
    calls = Calls()
    runner = runner_for(tmp_path, calls)
    result = start(runner, "manual")
    assert result.status == "waiting"
    assert "plangate complete" in result.steps["sign-contract"].reason

    with pytest.raises(InteractionError):
        runner.complete_step(result.run_id, "announce", {})
    runner.complete_step(result.run_id, "sign-contract", {"by": "Lee"})
    result = resume(runner, result.run_id)
    assert result.status == "completed"
    assert calls.log == [("notify", {"message": "signed by Lee"})]


def test_a_slow_step_fails_at_its_timeout(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "slow",
        """
        [[steps]]
        id = "slow"
        timeout = "1s"
        tool = { name = "work", args = { name = "slow", delay = 5 } }
        """,
    )
    began = time.monotonic()
    result = start(runner_for(tmp_path, Calls()), "slow")
    assert time.monotonic() - began < 4
    assert result.status == "failed"
    assert result.steps["slow"].reason == "timed out after 1s"


def test_a_step_with_children_completes_when_they_do(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "nested",
        """
        [[steps]]
        id = "checks"
        [[steps.children]]
        id = "lint"
        tool = { name = "work", args = { name = "lint" } }
        [[steps.children]]
        id = "types"
        tool = { name = "work", args = { name = "types" } }
        [[steps]]
        id = "after"
        needs = ["checks"]
        gate = { condition = "children(checks).all(status == 'complete')" }
        tool = { name = "work", args = { name = "after" } }
        """,
    )
    calls = Calls()
    result = start(runner_for(tmp_path, calls), "nested")
    assert result.status == "completed", result.reason
    assert result.steps["checks"].status == "complete"
    assert [a["name"] for _, a in calls.log][-1] == "after"


def test_until_loop_adds_iterations_until_the_condition_holds(tmp_path: Path) -> None:
    calls = Calls()
    calls.healthy_after = 2
    text = (EXAMPLES / "retry-until.formula.toml").read_text().replace('timer = "2s"', 'timer = "1s"')
    (tmp_path / "retry-until.formula.toml").write_text(text)
    runner = runner_for(tmp_path, calls)
    result = start(runner, "retry-until")

    assert result.status == "completed", result.reason
    checks = [a["attempt"] for name, a in calls.log if name == "check_health"]
    assert checks == [1, 2]
    assert result.steps["wait-healthy.iter2.check"].output == {"healthy": True}
    assert "wait-healthy.iter3.check" not in result.steps
    assert calls.names()[-1] == "notify"


def test_until_loop_that_never_holds_fails_after_max(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "never",
        """
        [[steps]]
        id = "poll"
        [steps.loop]
        until = "check.output.healthy == true"
        max = 3
        var = "attempt"
        [[steps.loop.body]]
        id = "check"
        tool = { name = "check_health", args = { attempt = "{{attempt}}" } }
        """,
    )
    calls = Calls()
    calls.healthy_after = 99
    result = start(runner_for(tmp_path, calls), "never")
    assert result.status == "failed"
    assert "after 3 iterations" in result.steps["poll"].reason
    assert [a["attempt"] for _, a in calls.log] == [1, 2, 3]


def test_on_complete_fans_out_one_sub_run_per_element(tmp_path: Path, store: Store) -> None:
    calls = Calls()
    runner = runner_for(tmp_path, calls, store)
    result = start(runner, "fanout")

    assert result.status == "completed", result.reason
    deployed = sorted(a["region"] for name, a in calls.log if name == "deploy")
    assert deployed == ["ap-south", "eu-west", "us-east"]
    children = runner.store.list_runs(parent_run_id=result.run_id).items
    assert len(children) == 3 and all(c.status == "completed" for c in children)
    runs = result.steps["list-regions"].output["runs"]  # type: ignore[index]
    assert isinstance(runs, list) and len(runs) == 3
    assert calls.names()[-1] == "check_health"  # verify ran after every region


def test_a_formula_step_runs_a_sub_formula(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "parent",
        """
        [[steps]]
        id = "region"
        formula = { name = "deploy-region", vars = { region = "eu-north" } }
        [[steps]]
        id = "tell"
        needs = ["region"]
        [steps.tool]
        name = "notify"
        args = { message = "done: {{steps.region.output.outputs.deploy.deployed}}" }
        """,
    )
    calls = Calls()
    runner = runner_for(tmp_path, calls)
    result = start(runner, "parent")
    assert result.status == "completed", result.reason
    assert calls.log[-1] == ("notify", {"message": "done: eu-north"})
    child_id = result.steps["region"].output["run_id"]  # type: ignore[index]
    assert runner.store.get_run(str(child_id)).parent_run_id == result.run_id


def test_a_sub_run_waiting_on_a_person_suspends_the_parent_until_answered(
    tmp_path: Path, store: Store
) -> None:
    write_formula(
        tmp_path,
        "outer",
        """
        [[steps]]
        id = "inner"
        formula = { name = "release", vars = { version = "2.0.0" } }
        """,
    )
    runner = runner_for(tmp_path, Calls(), store)
    result = start(runner, "outer")
    assert result.status == "waiting"
    assert result.interaction is not None
    assert result.interaction.run_id != result.run_id  # the question belongs to the sub-run

    answer(runner, result.interaction.id, Approve())
    result = resume(runner, result.run_id)
    assert result.status == "completed", result.reason


def test_a_formula_that_fails_check_writes_nothing(tmp_path: Path) -> None:
    write_formula(
        tmp_path,
        "bad",
        """
        [[steps]]
        id = "a"
        needs = ["nope"]
        tool = { name = "work", args = { name = "a" } }
        """,
    )
    runner = runner_for(tmp_path, Calls())
    with pytest.raises(FormulaError, match="nope"):
        start(runner, "bad")
    with pytest.raises(FormulaError, match="version"):
        start(runner, "release", {})
    assert runner.store.list_runs().items == []


def test_cancel_ends_a_waiting_run_and_expires_its_question(tmp_path: Path, store: Store) -> None:
    runner = runner_for(tmp_path, Calls(), store)
    result = start(runner, "release", {"version": "1.0.0"})
    assert result.interaction is not None
    runner.cancel(result.run_id, "changed our minds")
    assert runner.store.get_run(result.run_id).status == "cancelled"
    assert runner.store.get_interaction(result.interaction.id).status == "expired"
    with pytest.raises(InteractionError):
        runner.cancel(result.run_id)


def test_another_handle_on_the_store_resumes_the_approved_run(tmp_path: Path, store_url: str) -> None:
    """Another process (here: another store object and runner) continues with nothing but the ids."""
    first = open_store(store_url)
    try:
        result = start(runner_for(tmp_path, Calls(), first), "release", {"version": "1.4.0"})
        assert result.interaction is not None
    finally:
        first.close()
    second = open_store(store_url)
    try:
        calls = Calls()
        later = runner_for(tmp_path, calls, second)
        answer(later, result.interaction.id, Approve(), by="ana")
        finished = resume(later, result.run_id)
        assert finished.status == "completed"
        assert calls.names() == ["publish"]  # nothing that ran before the wait runs again
        seqs = [event.seq for event in second.events(result.run_id)]
        assert seqs == list(range(1, len(seqs) + 1))
    finally:
        second.close()


def test_a_runner_takes_a_store_by_its_path_or_url(tmp_path: Path) -> None:
    # the README's Python block: FormulaRunner(".plangate/plangate.db", tools)
    calls = Calls()
    first = FormulaRunner(str(tmp_path / "runs.db"), make_tools(calls), search_paths=[EXAMPLES])
    waiting = start(first, "release", {"version": "1.4.0"})
    assert waiting.interaction is not None
    for store in (tmp_path / "runs.db", f"sqlite:///{tmp_path / 'runs.db'}"):
        runner = FormulaRunner(store, make_tools(calls))
        assert runner.store.get_run(waiting.run_id).status == "waiting"
    answer(runner, waiting.interaction.id, Approve())
    assert resume(runner, waiting.run_id).status == "completed"


@pytest.mark.parametrize("number", [math.nan, math.inf])
def test_a_plan_json_cannot_hold_is_refused_before_a_run_is_stored(number: float) -> None:
    store = memory_store()
    runner = FormulaRunner(store, make_tools(Calls()))
    step = CookedStep(id="a", title="a", executor=ToolExecutor(name="deploy", args={"region": number}))
    plan = Plan(formula="numbers", steps=[step])
    with pytest.raises(FormulaError, match="numbers cannot be stored: the run's plan: expected JSON data"):
        asyncio.run(runner.start(plan))
    with pytest.raises(FormulaError, match="numbers cannot be stored"):
        runner.submit(plan)
    assert store.list_runs().items == []  # no run left without an outcome
