"""The prompts of a model that asks for compact ones (the local default): short rules, tool signatures, a
worked example built from the run's tools, arguments to copy from, and a closing message with no model call.
Models that do not ask get the full prompts, unchanged."""

from __future__ import annotations

from agent_helpers import agent, call, decision, make_desk
from test_agent_context import _assert_each_prompt_extends_the_last

from plangate.agent._transcript import Act
from plangate.agent.result import Outcome
from plangate.agent.small import EVIDENCE_CHARS, evidence_text
from plangate.agent.small._prompt import signature, small_catalogue, small_rules, worked_example
from plangate.interactions import Approve, Reject
from plangate.models import ModelRequest, ScriptedModel, wants_compact_prompts
from plangate.tools import Toolset

GOAL = "receipts.any(tool == 'place' and success)"


def _small(responses: list[str]) -> ScriptedModel:
    model = ScriptedModel(responses)
    model.compact_prompts = True  # type: ignore[attr-defined]
    return model


def _entries() -> list[dict[str, object]]:
    return [dict(entry) for entry in Toolset(make_desk().registry).catalogue()]


def test_only_a_model_that_says_so_wants_compact_prompts() -> None:
    assert wants_compact_prompts(_small([]))
    assert not wants_compact_prompts(ScriptedModel([]))

    class Truthy:
        compact_prompts = "yes"

    assert not wants_compact_prompts(Truthy())


def test_a_signature_says_the_parameters_whether_it_writes_and_what_it_does() -> None:
    place = next(entry for entry in _entries() if entry["name"] == "place")
    assert signature(place) == "- place(task, slot) write: Place a task in a slot."  # type: ignore[arg-type]


def test_the_worked_example_calls_the_goals_tool_else_the_first_write_else_the_first_tool() -> None:
    entries = _entries()
    assert '"name":"place","arguments":{"task":"TASK","slot":"SLOT"}' in worked_example(entries)  # type: ignore[arg-type]
    assert '"name":"echo"' in worked_example(entries, ["echo"])  # type: ignore[arg-type]
    reads = [entry for entry in entries if entry["effect"] != "write"]
    assert '"name":"lookup"' in worked_example(reads)  # type: ignore[arg-type]
    assert worked_example([]) == "" and small_catalogue([]) == ""


def test_the_rules_say_done_only_where_the_runtime_does_not_check_a_goal() -> None:
    assert '"action":"done"' in small_rules(goal=False, tools=True)
    with_goal = small_rules(goal=True, tools=True)
    assert '"action":"done"' not in with_goal and "ends the run itself" in with_goal
    assert "tool_call" not in small_rules(goal=False, tools=False)


def _executes(model: ScriptedModel) -> list[ModelRequest]:
    return [request for request in model.requests if request.purpose == "execute"]


def test_a_small_models_run_gets_the_compact_prompt_and_ends_on_its_proof_with_no_summary_call() -> None:
    model = _small([call("lookup", query="week"), call("place", task="gym", slot=4)])
    runner, _ = agent(model, mode="react", done_when=GOAL)

    result = runner.run("Book the gym at slot 4")
    assert result.interaction is not None
    result = runner.resume(result.run_id, result.interaction.id, Approve())

    assert result.status == "completed"
    system = _executes(model)[0].messages[0].content
    assert system.startswith("You do the user's request with tools.")
    assert "- place(task, slot) write: Place a task in a slot." in system
    assert 'Round 1: {"action":"continue","tool_call":{"name":"place"' in system  # the goal's tool
    assert '"properties"' not in system  # signatures, not JSON schemas
    assert len(model.requests) == 2  # no deliver call: the answer is the proof and its evidence
    assert result.answer.endswith("place: placed gym at 4")
    _assert_each_prompt_extends_the_last(_executes(model))


def test_a_large_models_run_keeps_the_full_prompt_and_its_summary() -> None:
    runner, model = agent([call("place", task="gym", slot=4), "Booked."], mode="react", done_when=GOAL)

    result = runner.run("Book the gym at slot 4")
    assert result.interaction is not None
    result = runner.resume(result.run_id, result.interaction.id, Approve())

    assert result.status == "completed" and result.answer == "Booked."
    system = _executes(model)[0].messages[0].content
    assert '"name":"place"' in system and "You do the user's request with tools." not in system
    assert list(_executes(model)[0].argument_sources) == ["Book the gym at slot 4"]


def test_arguments_come_from_the_request_and_successful_observations_not_from_refusals() -> None:
    script = [call("lookup", query="week"), call("place", task="gym", slot=99), decision("done", speak="ok")]
    model = _small(script)
    runner, _ = agent(model, mode="react", max_rounds=3)

    result = runner.run("Book the gym")
    assert result.interaction is not None
    runner.resume(result.run_id, result.interaction.id, Reject(reason="not slot 99, nor slot 7"))

    first, second, third = _executes(model)
    assert list(first.argument_sources) == ["Book the gym"]
    assert list(second.argument_sources) == ["Book the gym", "found week"]
    assert list(third.argument_sources) == ["Book the gym", "found week"]


def test_a_read_tool_that_just_succeeded_is_not_offered_again_to_a_small_model() -> None:
    script = [call("lookup", query="week"), decision("done", speak="Mon is free.")]
    small = _small(list(script))
    agent(small, mode="react", infer_goal=False)[0].run("What is free?")  # the model must say done
    runner, large = agent(list(script), mode="react")
    runner.run("What is free?")

    assert "lookup" not in (_executes(small)[1].tool_names or ())
    assert set(_executes(small)[1].tool_names or ()) == {"echo", "place"}
    assert "lookup" in (_executes(large)[1].tool_names or ())


def test_the_closing_message_quotes_the_last_successful_observation_cut_to_its_bound() -> None:
    outcome = Outcome(status="completed", stage="execute", code="done", user_message="Proven by receipt r2.")
    failed = Act(1, None, "", "place", {}, observation="refused: slot taken", success=False)
    long = Act(1, None, "", "lookup", {}, observation="x" * (EVIDENCE_CHARS + 50), success=True)
    text = evidence_text(outcome, [long, failed])
    assert text.startswith("Proven by receipt r2.\n\nlookup: x")
    assert text.endswith(" …") and len(text) < EVIDENCE_CHARS + 60
    assert evidence_text(outcome, [failed]) == "Proven by receipt r2."
