"""Agent and llm steps: an agent as a child run whose questions are the formula's; one model call, checked."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import (
    EXAMPLES,
    answer,
    failed_steps,
    failing_child_creation,
    memory_store,
    write_formula,
)
from typer.testing import CliRunner

from plangate.errors import InteractionError, StaleInteraction, StoreError
from plangate.events import StatusEvent
from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.interactions import Answer, Approve, Reject
from plangate.models import ModelRequest, ScriptedModel
from plangate.runs.tools import ToolsDiffer
from plangate.store import SQLiteStore, Store, open_store
from plangate.tools import ToolRegistry, tool
from plangate.tools.schedule import ScheduleStore

PLACE = {"action": "continue", "tool_call": {"name": "place", "arguments": {"task": "gym", "slot": 3}}}
LOOKUP = {"action": "continue", "tool_call": {"name": "lookup", "arguments": {"query": "week"}}}
DONE = {"action": "done"}


class Desk:
    """A read tool, a write tool and a note-taking tool, recording what they were asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

        @tool
        def lookup(query: str) -> str:
            """Look something up."""
            self.calls.append(("lookup", {"query": query}))
            return f"found {query}: the week is free"

        @tool(effect="write")
        def place(task: str, slot: int) -> str:
            """Place a task in a slot."""
            self.calls.append(("place", {"task": task, "slot": slot}))
            return f"placed {task} at {slot}"

        @tool
        def note(text: str) -> str:
            """Write a note."""
            self.calls.append(("note", {"text": text}))
            return f"noted: {text}"

        self.registry = ToolRegistry([lookup, place, note])

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def scripted(*decisions: object, summary: str = "Done.", generate: list[str] | None = None) -> ScriptedModel:
    """A model that answers by purpose: route → act without a plan, execute → the next of ``decisions``,
    deliver → ``summary``, generate → the next of ``generate``."""
    queue = [d if isinstance(d, str) else json.dumps(d) for d in decisions]
    generated = list(generate or [])

    def answer(request: ModelRequest) -> str:
        if request.purpose == "route":
            return json.dumps({"route": "execute"})
        if request.purpose == "execute":
            return queue.pop(0)
        if request.purpose == "deliver":
            return summary
        if request.purpose == "generate":
            return generated.pop(0)
        raise AssertionError(f"unexpected model call for {request.purpose!r}")

    return ScriptedModel(answer)


def as_any(value: object) -> Any:
    """A JSON value from an output, for assertions that index into it."""
    return value


def purposes(model: ScriptedModel) -> list[str]:
    return [request.purpose for request in model.requests]


AGENT_THEN_NOTE = """
[vars.topic]
default = "week"

[[steps]]
id = "look"
agent = { prompt = "Look up the {{topic}} and plan the gym", tools = ["lookup", "place"] }

[[steps]]
id = "report"
needs = ["look"]
tool = { name = "note", args = { text = "{{steps.look.output.answer}}" } }
"""


def agent_runs(store: Store, run_id: str) -> list[str]:
    return [run.id for run in store.list_runs(parent_run_id=run_id, kind="agent").items]


def start(runner: FormulaRunner, path: Path) -> FormulaResult:
    return asyncio.run(runner.start(path))


# -- agent steps ----------------------------------------------------------------------------------------


def test_an_agent_step_answers_with_a_read_tool_and_a_later_step_reads_its_answer(tmp_path: Path) -> None:
    desk = Desk()
    model = scripted(LOOKUP, DONE, summary="The week is free.")
    store = memory_store()
    runner = FormulaRunner(store, desk.registry, model=model)

    result = start(runner, write_formula(tmp_path, "brief", AGENT_THEN_NOTE))

    assert result.status == "completed", result.reason
    (child,) = agent_runs(store, result.run_id)
    assert child == f"{result.run_id}.look.agent1"
    assert result.outputs["look"] == {
        "answer": "The week is free.",
        "outcome": {"status": "completed", "code": "done"},
        "run_id": child,
        "receipts": [
            {
                "step_index": 0,
                "source": "tool_observation",
                "name": "lookup",
                "success": True,
                "summary": "found week: the week is free",
            }
        ],
    }
    assert desk.calls == [("lookup", {"query": "week"}), ("note", {"text": "The week is free."})]
    assert store.get_run(child).parent_run_id == result.run_id
    first = model.requests[0].messages
    assert first[-1].content.startswith("Look up the week and plan the gym")  # rendered from the var
    execute_system = next(r for r in model.requests if r.purpose == "execute").messages[0].content
    assert '"lookup"' in execute_system and '"note"' not in execute_system  # only the tools it names


def test_a_formula_runs_outcome_adds_up_its_agent_steps_usage(tmp_path: Path) -> None:
    desk = Desk()
    model = scripted(LOOKUP, DONE, summary="The week is free.")
    store = memory_store()
    result = start(
        FormulaRunner(store, desk.registry, model=model), write_formula(tmp_path, "b", AGENT_THEN_NOTE)
    )
    assert result.status == "completed", result.reason
    (child,) = agent_runs(store, result.run_id)
    child_outcome = store.get_run(child).outcome
    assert child_outcome is not None
    child_usage = child_outcome["usage"]
    assert isinstance(child_usage, dict) and child_usage["calls"] == len(model.requests) == 4
    outcome = store.get_run(result.run_id).outcome
    assert outcome is not None and outcome["usage"] == child_usage
    (event,) = [e for e in store.events(result.run_id) if e.type == "outcome"]
    assert event.usage == child_usage


def test_a_formula_without_model_calls_has_no_usage(tmp_path: Path) -> None:
    formula = '[[steps]]\nid = "n"\ntool = { name = "note", args = { text = "hi" } }\n'
    store = memory_store()
    result = start(FormulaRunner(store, Desk().registry), write_formula(tmp_path, "n", formula))
    assert result.status == "completed", result.reason
    outcome = store.get_run(result.run_id).outcome
    assert outcome is not None and "usage" not in outcome


def test_a_write_waits_for_consent_shown_on_the_formula_and_approving_it_finishes_both(
    tmp_path: Path,
) -> None:
    desk = Desk()
    model = scripted(PLACE, DONE, summary="The gym is in slot 3.")
    store = memory_store()
    runner = FormulaRunner(store, desk.registry, model=model)

    waiting = start(runner, write_formula(tmp_path, "gym", AGENT_THEN_NOTE))

    assert waiting.status == "waiting"
    child = f"{waiting.run_id}.look.agent1"
    interaction = waiting.interaction
    assert interaction is not None
    assert (interaction.run_id, interaction.kind) == (child, "confirm")
    assert interaction.prompt == 'Allow place (Place a task in a slot.) with {"slot": 3, "task": "gym"}?'
    step = waiting.steps["look"]
    assert (step.status, step.reason) == ("waiting", f"agent {child} waits on a person: {interaction.prompt}")
    assert runner.load(waiting.run_id).steps["look"].wait == {"kind": "subrun", "run_ids": [child]}
    assert desk.calls == []  # nothing was written before consent

    assert answer(runner, interaction.id, Approve(), by="dana") == waiting.run_id
    assert desk.calls == []  # committed, not acted on: the approved call runs when the formula goes on
    result = asyncio.run(runner.resume(waiting.run_id))

    assert result.status == "completed", result.reason
    assert desk.calls == [("place", {"task": "gym", "slot": 3}), ("note", {"text": "The gym is in slot 3."})]
    assert [r["source"] for r in as_any(result.outputs["look"]["receipts"])] == ["write_receipt"]
    assert agent_runs(store, waiting.run_id) == [child]
    assert purposes(model) == ["route", "execute", "execute", "deliver"]  # one agent, never restarted
    assert store.get_interaction(interaction.id).resolved_by == "dana"
    with pytest.raises(StaleInteraction):
        answer(runner, interaction.id, Approve())


PROVEN_STEP = """
[[steps]]
id = "book"

[steps.agent]
prompt = "Book the gym"
tools = ["lookup", "place"]
done_when = "receipts.any(tool == 'place' and success)"

[[steps]]
id = "report"
needs = ["book"]
tool = { name = "note", args = { text = "{{steps.book.output.outcome.code}}" } }
"""


def test_an_agent_step_with_a_done_when_completes_on_its_proof_with_no_done_decision(tmp_path: Path) -> None:
    desk = Desk()
    model = scripted(LOOKUP, PLACE, summary="The gym is in slot 3.")
    store = memory_store()
    runner = FormulaRunner(store, desk.registry, model=model)

    waiting = start(runner, write_formula(tmp_path, "book", PROVEN_STEP))
    assert waiting.status == "waiting" and waiting.interaction is not None
    answer(runner, waiting.interaction.id, Approve())
    result = asyncio.run(runner.resume(waiting.run_id))

    assert result.status == "completed", result.reason
    book = result.steps["book"]
    assert (book.status, book.reason) == ("complete", "agent completed (proven)")
    assert as_any(result.outputs["book"])["outcome"] == {"status": "completed", "code": "proven"}
    # Two rounds (a read, then the write), no round to declare done: the receipt of the write proved it.
    assert purposes(model) == ["route", "execute", "execute", "deliver"]
    assert desk.calls[-1] == ("note", {"text": "proven"})
    child = f"{waiting.run_id}.book.agent1"
    proven = [e for e in store.events(child) if e.type == "status" and e.code == "proven"]
    assert len(proven) == 1 and "receipt #2 (place, write_receipt)" in proven[0].text  # type: ignore[union-attr]


def test_rejecting_the_consent_tells_the_agent_and_its_abort_fails_the_step(tmp_path: Path) -> None:
    desk = Desk()
    abort = {"action": "abort", "abort": {"code": "declined", "user_message": "Nothing was placed."}}
    model = scripted(PLACE, abort)
    store = memory_store()
    runner = FormulaRunner(store, desk.registry, model=model)
    waiting = start(runner, write_formula(tmp_path, "gym", AGENT_THEN_NOTE))
    assert waiting.interaction is not None

    answer(runner, waiting.interaction.id, Reject(reason="slot 3 is taken"))
    result = asyncio.run(runner.resume(waiting.run_id))

    assert result.status == "failed"
    look = result.steps["look"]
    assert (look.status, look.reason) == ("failed", "agent aborted (declined): Nothing was placed.")
    assert look.output is not None and look.output["outcome"] == {"status": "aborted", "code": "declined"}
    assert result.steps["report"].status == "skipped"
    assert desk.calls == []
    assert "slot 3 is taken" in model.requests[-1].messages[-1].content  # the model heard why


def test_an_answer_that_does_not_fit_the_agent_changes_nothing(tmp_path: Path) -> None:
    store = memory_store()
    runner = FormulaRunner(store, Desk().registry, model=scripted(PLACE))
    waiting = start(runner, write_formula(tmp_path, "gym", AGENT_THEN_NOTE))
    assert waiting.interaction is not None
    before = store.last_seq(waiting.interaction.run_id)

    with pytest.raises(InteractionError, match="takes approve, edit or reject; found answer"):
        answer(runner, waiting.interaction.id, Answer(text="yes"))

    assert store.last_seq(waiting.interaction.run_id) == before
    assert store.get_interaction(waiting.interaction.id).status == "open"


def test_answer_is_the_one_way_from_async_code_too(tmp_path: Path) -> None:
    desk = Desk()
    runner = FormulaRunner(memory_store(), desk.registry, model=scripted(PLACE, DONE))

    async def scenario() -> FormulaResult:
        waiting = await runner.start(write_formula(tmp_path, "gym", AGENT_THEN_NOTE))
        assert waiting.interaction is not None
        answered = await runner.answer(waiting.interaction.id, Approve())
        assert (answered.run_id, answered.continuing) == (waiting.run_id, False)  # at rest: resume it
        return await runner.resume(answered.run_id)

    assert asyncio.run(scenario()).status == "completed"
    assert desk.names() == ["place", "note"]


def test_a_new_runner_resumes_the_waiting_agent_and_never_starts_a_second(tmp_path: Path) -> None:
    desk = Desk()
    store = memory_store()
    path = write_formula(tmp_path, "gym", AGENT_THEN_NOTE)
    first = scripted(PLACE)
    waiting = start(FormulaRunner(store, desk.registry, model=first), path)
    assert waiting.interaction is not None
    later = scripted(DONE, summary="Placed.")
    runner = FormulaRunner(store, desk.registry, model=later)  # another process, with only the store

    again = asyncio.run(runner.resume(waiting.run_id))

    assert again.status == "waiting"
    assert again.interaction is not None and again.interaction.id == waiting.interaction.id
    assert later.requests == []
    answer(runner, waiting.interaction.id, Approve())
    result = asyncio.run(runner.resume(waiting.run_id))
    assert result.status == "completed", result.reason
    assert purposes(first) == ["route", "execute"]
    assert purposes(later) == ["execute", "deliver"]
    assert agent_runs(store, waiting.run_id) == [f"{waiting.run_id}.look.agent1"]
    assert desk.names() == ["place", "note"]


def test_a_runner_without_the_agents_tools_leaves_the_run_waiting_with_the_reason(tmp_path: Path) -> None:
    desk = Desk()
    store = memory_store()
    waiting = start(
        FormulaRunner(store, desk.registry, model=scripted(PLACE)),
        write_formula(tmp_path, "gym", AGENT_THEN_NOTE),
    )
    child = f"{waiting.run_id}.look.agent1"

    with pytest.raises(ToolsDiffer, match="this process lacks lookup, place, note") as refused:
        asyncio.run(FormulaRunner(store, ToolRegistry(), model=scripted()).resume(waiting.run_id))

    run = store.get_run(waiting.run_id)
    assert run.status == "waiting" and store.get_run(child).status == "waiting"
    last = store.events(run.id)[-1]
    assert isinstance(last, StatusEvent) and (last.code, last.text) == ("tools_differ", refused.value.reason)
    assert waiting.interaction is not None
    assert store.get_interaction(waiting.interaction.id).status == "open"  # nothing was lost


def test_a_step_cut_off_while_its_agent_works_resumes_that_agent(tmp_path: Path) -> None:
    store = memory_store()
    looked: list[str] = []
    entered: list[asyncio.Event] = []

    @tool
    async def lookup(query: str) -> str:
        """Look something up (the first time, it never returns: the process stops meanwhile)."""
        looked.append(query)
        if len(looked) == 1:
            entered[0].set()
            await asyncio.Event().wait()
        return "found it"

    tools = ToolRegistry([lookup])
    path = write_formula(
        tmp_path, "look", '[[steps]]\nid = "look"\nagent = { prompt = "Look", tools = ["lookup"] }\n'
    )
    first = scripted(LOOKUP)

    async def cut_off() -> None:
        entered.append(asyncio.Event())
        task = asyncio.ensure_future(FormulaRunner(store, tools, model=first).start(path))
        await entered[0].wait()
        task.cancel()  # what a stopped process leaves behind: the step and its agent both "running"
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cut_off())
    (formula,) = store.list_runs(kind="formula").items
    assert store.get_run(f"{formula.id}.look.agent1").status == "running"
    later = scripted(LOOKUP, DONE, summary="Found it.")

    result = asyncio.run(FormulaRunner(store, tools, model=later).resume(formula.id))

    assert result.status == "completed", result.reason
    assert result.outputs["look"]["answer"] == "Found it."
    assert agent_runs(store, formula.id) == [f"{formula.id}.look.agent1"]
    assert "route" not in purposes(later)  # the agent went on from its last commit
    assert looked == ["week", "week"]


def test_an_exhausted_agent_fails_the_step_and_a_retry_starts_a_fresh_agent(tmp_path: Path) -> None:
    store = memory_store()
    model = scripted(LOOKUP, LOOKUP)
    runner = FormulaRunner(store, Desk().registry, model=model)
    body = """
    [[steps]]
    id = "look"
    retries = 1
    agent = { prompt = "Look", tools = ["lookup"], max_rounds = 1 }
    """

    result = start(runner, write_formula(tmp_path, "look", body))

    assert result.status == "failed"
    look = result.steps["look"]
    assert look.reason == "agent exhausted (max_rounds): I used all 1 rounds before finishing."
    assert look.attempt == 2
    assert agent_runs(store, result.run_id) == [
        f"{result.run_id}.look.agent2",
        f"{result.run_id}.look.agent1",
    ]


def test_an_unknown_agent_tool_is_a_check_error(tmp_path: Path) -> None:
    runner = FormulaRunner(memory_store(), Desk().registry, model=scripted())
    body = '[[steps]]\nid = "look"\nagent = { prompt = "Look", tools = ["lookup", "lokup"] }\n'

    with pytest.raises(Exception, match=r"steps\[0\].agent.tools: the executor names unknown tool 'lokup'"):
        runner.plan(write_formula(tmp_path, "look", body))


def test_cancelling_the_formula_cancels_its_waiting_agent(tmp_path: Path) -> None:
    store = memory_store()
    runner = FormulaRunner(store, Desk().registry, model=scripted(PLACE))
    waiting = start(runner, write_formula(tmp_path, "gym", AGENT_THEN_NOTE))
    assert waiting.interaction is not None

    runner.cancel(waiting.run_id, "not this week")

    assert store.get_run(waiting.run_id).status == "cancelled"
    assert store.get_run(waiting.interaction.run_id).status == "cancelled"
    assert store.get_interaction(waiting.interaction.id).status == "expired"


def test_an_agent_run_that_no_formula_started_is_not_the_runners_to_answer() -> None:
    from plangate.agent import Agent

    store = memory_store()
    desk = Desk()
    alone = Agent(model=scripted(PLACE), tools=desk.registry, store=store).run("Place the gym")
    assert alone.interaction is not None

    with pytest.raises(InteractionError, match="which no formula run started"):
        answer(FormulaRunner(store, desk.registry), alone.interaction.id, Approve())


# -- the command line -----------------------------------------------------------------------------------

CLI_TOOLS = '''
from plangate.tools import tool

@tool(effect="write")
def place(task: str, slot: int) -> str:
    """Place a task in a slot."""
    return f"placed {task} at {slot}"

@tool
def note(text: str) -> str:
    """Write a note."""
    return f"noted: {text}"

tools = [place, note]
'''


def test_plangate_approve_answers_the_agent_and_continues_the_formula(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plangate.cli.app import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    (tmp_path / "tools.py").write_text(CLI_TOOLS, encoding="utf-8")
    first = tmp_path / "first.json"
    first.write_text(json.dumps([json.dumps({"route": "execute"}), json.dumps(PLACE)]), encoding="utf-8")
    rest = tmp_path / "rest.json"
    rest.write_text(json.dumps([json.dumps(DONE), "The gym is in slot 3."]), encoding="utf-8")
    body = AGENT_THEN_NOTE.replace('tools = ["lookup", "place"]', 'tools = ["place"]')
    path = write_formula(tmp_path, "gym", body)
    cli = CliRunner()

    ran = cli.invoke(
        app, ["run", str(path), "--tools", "tools.py:tools", "-m", f"scripted:{first}", "--detach", "--json"]
    )
    assert ran.exit_code == 0, ran.output
    waiting = json.loads(ran.output)
    assert waiting["status"] == "waiting" and waiting["interaction"]["kind"] == "confirm"

    # The tools are named again: a run's stored tool specs are never imported.
    approve = ["approve", waiting["interaction"]["id"], "-m", f"scripted:{rest}", "--tools", "tools.py:tools"]
    approved = cli.invoke(app, [*approve, "--json"])

    assert approved.exit_code == 0, approved.output
    result = json.loads(approved.output)
    assert (result["run_id"], result["status"]) == (waiting["run_id"], "completed")
    assert result["steps"]["report"]["output"] == {"result": "noted: The gym is in slot 3."}
    store = SQLiteStore(tmp_path / "runs.db")
    (receipt,) = store.receipts(f"{waiting['run_id']}.look.agent1")
    assert (receipt.source, receipt.name) == ("write_receipt", "place")
    store.close()


# -- llm steps ------------------------------------------------------------------------------------------

REVENUE_SCHEMA = {
    "type": "object",
    "properties": {"region": {"type": "string"}, "revenue": {"type": "number"}},
    "required": ["region", "revenue"],
    "additionalProperties": False,
}


def llm_formula(tmp_path: Path, *, schema: dict[str, Any] | None = REVENUE_SCHEMA, retries: int = 0) -> Path:
    spec: dict[str, Any] = {"prompt": "Which region sold most in {{month}}?"}
    if schema is not None:
        spec["schema"] = schema
    data = {
        "formula": "top",
        "vars": {"month": "2026-06"},
        "steps": [{"id": "top", "retries": retries, "llm": spec}],
    }
    path = tmp_path / "top.formula.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def run_llm(tmp_path: Path, *answers: str, **options: Any) -> tuple[FormulaResult, ScriptedModel]:
    model = scripted(generate=list(answers))
    runner = FormulaRunner(memory_store(), model=model)
    return start(runner, llm_formula(tmp_path, **options)), model


def test_an_llm_step_with_a_schema_makes_one_generate_call_and_outputs_the_object(tmp_path: Path) -> None:
    result, model = run_llm(tmp_path, '```json\n{"region": "East", "revenue": 96974.22}\n```')

    assert result.status == "completed", result.reason
    assert result.outputs["top"] == {"region": "East", "revenue": 96974.22}
    (request,) = model.requests
    assert request.purpose == "generate"
    assert request.response_schema is not None and request.response_schema.schema == REVENUE_SCHEMA
    assert request.messages[-1].content == "Which region sold most in 2026-06?"
    assert json.dumps(REVENUE_SCHEMA, sort_keys=True) in request.messages[0].content


def test_an_llm_step_without_a_schema_outputs_the_text(tmp_path: Path) -> None:
    result, model = run_llm(tmp_path, "East, by a wide margin.", schema=None)

    assert result.outputs["top"] == {"text": "East, by a wide margin."}
    assert model.requests[0].response_schema is None


def test_an_answer_that_is_not_json_fails_the_step_with_the_reason(tmp_path: Path) -> None:
    result, _ = run_llm(tmp_path, "Sure! East sold the most.")

    top = result.steps["top"]
    assert (result.status, top.status) == ("failed", "failed")
    assert top.reason == (
        "llm: the answer is not usable JSON: invalid JSON at line 1 column 1: Expecting value "
        "('Sure! East sold the most.')"
    )
    assert top.output == {"text": "Sure! East sold the most."}


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ('{"region": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests deeper than 64 levels"),
        ('{"region": ' + "[" * 250 + "]" * 250 + "}", "nests deeper than 64 levels"),
        ('{"region": "East", "revenue": NaN}', "NaN is not a JSON number"),
        ('{"region": "East", "revenue": ' + "9" * 5000 + "}", "(5000 digits) is too large"),
        ('{"region": "East", "region": "West", "revenue": 1}', "the key 'region' appears twice"),
    ],
)
def test_a_hostile_json_answer_fails_the_step_and_the_run_ends(
    tmp_path: Path, answer: str, reason: str
) -> None:
    result, _ = run_llm(tmp_path, answer)

    top = result.steps["top"]
    assert (result.status, top.status) == ("failed", "failed")
    assert top.reason is not None and top.reason.startswith("llm: the answer is not usable JSON: ")
    assert reason in top.reason


def test_an_answer_that_does_not_fit_the_schema_fails_the_step_with_where(tmp_path: Path) -> None:
    result, _ = run_llm(tmp_path, '{"region": "East", "revenue": "a lot"}')

    assert result.steps["top"].reason == (
        "llm: the answer does not fit the schema: at $.revenue: expected a number, got 'a lot'"
    )


def test_retries_ask_the_model_again_after_a_bad_answer(tmp_path: Path) -> None:
    result, model = run_llm(tmp_path, '{"region": "East"}', '{"region": "East", "revenue": 1.5}', retries=1)

    assert result.status == "completed", result.reason
    assert result.steps["top"].attempt == 2
    assert result.outputs["top"] == {"region": "East", "revenue": 1.5}
    assert purposes(model) == ["generate", "generate"]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ('{"region": "East", "revenue": "a lot"}', "at $.revenue: expected a number, got 'a lot'"),
        ('{"revenue": 3}', "at $.region: required, got nothing"),
        (
            '{"region": "East", "revenue": 3, "note": "x"}',
            "at $.note: unexpected field (expected one of: region, revenue)",
        ),
        ('["East"]', 'at $: expected an object, got ["East"]'),
        ('{"region": "East", "revenue": -2}', "at $.revenue: expected a number at least 0, got -2"),
        ('{"region": "Mars", "revenue": 3}', "at $.region: matches none of the allowed forms, got 'Mars'"),
    ],
)
def test_each_way_an_answer_breaks_the_schema_is_said_with_where(
    tmp_path: Path, answer: str, reason: str
) -> None:
    # The wording of tool arguments (tools/json_schema.py), for every keyword of the specification.
    schema = {
        **REVENUE_SCHEMA,
        "properties": {
            "region": {"anyOf": [{"enum": ["East", "West"]}, {"type": "string", "pattern": "^[A-Z]{2}$"}]},
            "revenue": {"type": "number", "minimum": 0},
        },
    }
    result, _ = run_llm(tmp_path, answer, schema=schema)

    assert result.steps["top"].reason == f"llm: the answer does not fit the schema: {reason}"


def test_a_schema_that_is_not_a_json_schema_is_a_check_error(tmp_path: Path) -> None:
    runner = FormulaRunner(memory_store(), model=scripted())

    with pytest.raises(Exception, match=r"steps\[0\].llm.schema: not a valid JSON schema: .*'frobnicate'"):
        runner.plan(llm_formula(tmp_path, schema={"type": "frobnicate"}))


# -- the example ----------------------------------------------------------------------------------------


def load_demo_tools() -> Any:
    spec = importlib.util.spec_from_file_location("plan_week_demo_tools", EXAMPLES / "demo_tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plan_week_example_queries_asks_and_lets_the_agent_place_the_review(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'demo.db'}")
    demo = load_demo_tools()
    model = scripted(
        {
            "action": "continue",
            "tool_call": {"name": "place", "arguments": {"task": "review", "day": "fri", "slot": 1}},
        },
        summary="The review is on Friday at 09:00.",
    )
    store = open_store()
    runner = FormulaRunner(store, demo.registry, search_paths=[EXAMPLES], model=model)
    asked: list[tuple[str, str]] = []

    result = start(runner, EXAMPLES / "plan-week.formula.toml")
    while result.status == "waiting" and result.interaction is not None:
        asked.append((result.interaction.kind, result.interaction.prompt))
        answer(runner, result.interaction.id, Approve())
        result = asyncio.run(runner.resume(result.run_id))

    assert result.status == "completed", result.reason
    assert [kind for kind, _ in asked] == ["approval", "confirm"]
    assert asked[0][1].startswith(
        'Revenue by region for 2026-06 [region, revenue, orders]: [["East", 96974.22, 65]'
    )
    assert asked[1][1].startswith("Allow place ")
    assert len(as_any(result.outputs["revenue"]["rows"])) == 5
    schedule = result.outputs["schedule"]
    assert schedule["answer"] == "The review is on Friday at 09:00."
    # The placement's receipt proved the step's done_when: no round was needed to declare it done.
    assert schedule["outcome"] == {"status": "completed", "code": "proven"}
    assert [r.purpose for r in model.requests] == ["execute", "deliver"]
    assert [(r["source"], r["name"]) for r in as_any(schedule["receipts"])] == [("write_receipt", "place")]
    week, _ = ScheduleStore(store).load()
    placement = week.task("review").placement
    assert placement is not None and (placement.day, placement.slot) == (4, 1)
    # The step acts at once (mode "react": no route, no plan), told the numbers.
    assert {r.purpose for r in model.requests} <= {"execute", "deliver"}
    prompt = next(r for r in model.requests if r.purpose == "execute").messages[-1].content
    assert '["East", 96974.22, 65]' in prompt


def test_a_store_that_fails_as_the_agent_is_created_stops_the_run_and_never_fails_the_step(
    tmp_path: Path,
) -> None:
    desk = Desk()
    model = scripted(LOOKUP, DONE, summary="The week is free.")
    store = memory_store()
    failed = failing_child_creation(store)
    source = write_formula(tmp_path, "brief", AGENT_THEN_NOTE)
    with pytest.raises(StoreError, match="connection to the database was lost"):
        start(FormulaRunner(store, desk.registry, model=model), source)

    assert failed
    (root,) = store.list_runs(kind="formula").items
    assert root.status == "running"
    assert not failed_steps(store, root.id)
    result = asyncio.run(FormulaRunner(store, desk.registry, model=model).resume(root.id))
    assert result.status == "completed", result.reason
    assert desk.calls == [("lookup", {"query": "week"}), ("note", {"text": "The week is free."})]
