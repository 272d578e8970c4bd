"""Questions and actions told apart by rule: a question is answered by a read, N changes by N writes."""

from __future__ import annotations

import pytest
from agent_helpers import call, decision, of_type

from plangate.agent import Agent
from plangate.agent._intent import QUESTION_GOAL, Part, infer_goal, request_parts
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore
from plangate.tools import ToolRegistry, tool
from plangate.tools.schedule import schedule_tools


class SmallScripted(ScriptedModel):
    """A scripted model that asks for compact prompts, as the small local default does."""

    compact_prompts = True


def _week(log: list[str]) -> ToolRegistry:
    @tool
    def query_available_slots(day: str) -> str:
        """Free time on a day."""
        log.append(f"query {day}")
        return f"Free on {day}: 08:00-10:00, 14:00-16:00"

    @tool(effect="write")
    def unplace(task: str) -> str:
        """Take a task off the calendar."""
        log.append(f"unplace {task}")
        return f"unplaced {task}"

    @tool(effect="write")
    def place(task: str, day: str, slot: str) -> str:
        """Put a task on the calendar."""
        log.append(f"place {task} {day} {slot}")
        return f"placed {task} {day} {slot}"

    return ToolRegistry([query_available_slots, unplace, place])


def test_a_question_is_answered_by_its_first_successful_read_without_done() -> None:
    log: list[str] = []
    model = SmallScripted([call("query_available_slots", day="thursday")])
    store = SQLiteStore(":memory:")
    agent = Agent(model=model, tools=_week(log), store=store, max_rounds=6)

    result = agent.run("Which slots are open on Thursday?")

    assert result.status == "completed" and result.outcome is not None
    assert result.outcome.code == "answered"
    assert "Free on thursday: 08:00-10:00, 14:00-16:00" in (result.answer or "")
    assert [r.purpose for r in model.requests] == ["execute"]  # no route, no done, no summary call
    assert log == ["query thursday"]


def test_a_two_step_request_completes_when_both_writes_succeeded() -> None:
    log: list[str] = []
    model = SmallScripted([call("unplace", task="t2"), call("place", task="t7", day="tue", slot="08:00")])
    agent = Agent(model=model, tools=_week(log), store=SQLiteStore(":memory:"))
    result = agent.run("Unplace t2 and then place t7 on Tuesday at 08:00.")
    for _ in range(2):
        assert result.interaction is not None and result.interaction.kind == "confirm"
        result = agent.resume(result.run_id, result.interaction.id, Approve())
    assert result.status == "completed" and result.outcome is not None
    assert result.outcome.code == "proven"
    assert log == ["unplace t2", "place t7 tue 08:00"]
    assert len(model.requests) == 2


def test_a_large_model_declares_done_itself_unless_asked() -> None:
    model = ScriptedModel(
        [call("query_available_slots", day="fri"), decision("done", speak="Friday is open.")]
    )
    store = SQLiteStore(":memory:")
    result = Agent(model=model, tools=_week([]), store=store, mode="react").run("What is free on Friday?")
    assert result.outcome is not None and result.outcome.code == "done"
    inferred = ScriptedModel([call("query_available_slots", day="fri"), "Friday: 08:00-10:00."])
    agent = Agent(model=inferred, tools=_week([]), store=SQLiteStore(":memory:"), infer_goal=True)
    answered = agent.run("What is free on Friday?")
    assert answered.outcome is not None and answered.outcome.code == "answered"
    assert answered.answer == "Friday: 08:00-10:00."  # the closing summary, written from the observation
    assert [r.purpose for r in inferred.requests] == ["execute", "deliver"]
    assert of_type(agent.store.events(answered.run_id), "status")[-1].code == "answered"


_SCHEDULE = schedule_tools(SQLiteStore(":memory:"))
READS = [(item.name, item.description) for item in _SCHEDULE if item.effect == "read"]
WRITES = [(item.name, item.description) for item in _SCHEDULE if item.effect == "write"]


@pytest.mark.parametrize(
    ("prompt", "kind", "done_when"),
    [
        ("Which slots are open on Thursday?", "question", QUESTION_GOAL),
        ("Count the tasks that still need a slot.", "question", QUESTION_GOAL),
        ("Give me an overview of this week.", "question", QUESTION_GOAL),
        ("Shift t8 to Tuesday 13:00.", "action", "receipts.any(success and source == 'write_receipt')"),
        (
            "Can you put t4 on Thursday at 12:00?",
            "action",
            "receipts.any(success and source == 'write_receipt')",
        ),
        (
            "Take t8 off the calendar and put t9 on Friday at 08:00.",
            "action",
            "receipts.count(success and source == 'write_receipt') >= 2",
        ),
        ("Swap t8 and t5.", "action", "receipts.any(success and source == 'write_receipt')"),
        (
            "Place t9 on Saturday 10:00 and t4 on Saturday 11:00.",
            "action",
            "receipts.count(success and source == 'write_receipt') >= 2",
        ),
        ("Move t8 to Friday and tell me the overview.", None, None),
        ("hello there", None, None),
    ],
)
def test_the_rule_tells_questions_from_actions(prompt: str, kind: str | None, done_when: str | None) -> None:
    goal = infer_goal(prompt, reads=READS, writes=WRITES)
    assert (None if goal is None else (goal.kind, goal.done_when)) == (
        None if kind is None else (kind, done_when)
    )


def test_no_goal_without_the_tools_to_prove_it() -> None:
    assert infer_goal("What is free on Friday?", reads=[], writes=WRITES) is None
    assert infer_goal("Move t8 to Friday.", reads=READS, writes=[]) is None


def test_the_rule_names_the_tools_that_fit_each_clause() -> None:
    def tools(prompt: str) -> tuple[str, ...]:
        goal = infer_goal(prompt, reads=READS, writes=WRITES)
        assert goal is not None
        return goal.tools

    assert tools("Shift t8 to Tuesday 13:00.") == ("move",)
    assert tools("Which slots are open on Thursday?") == ("query_available_slots",)
    assert tools("Give me an overview of this week.") == ("get_overview",)
    assert tools("Swap t8 and t5.") == ("swap",)
    assert tools("Take t8 off the calendar and put t9 on Friday at 08:00.") == ("unplace", "place")


def test_a_small_models_worked_example_shows_the_fitting_tool() -> None:
    model = SmallScripted([call("query_available_slots", day="thu")])
    Agent(model=model, tools=_week([]), store=SQLiteStore(":memory:")).run(
        "Which slots are open on Thursday?"
    )
    system = model.requests[0].messages[0].content
    assert 'Round 1: {"action":"continue","tool_call":{"name":"query_available_slots"' in system


def test_a_request_of_several_changes_reads_as_its_parts_in_order() -> None:
    assert request_parts("Unplace t5, then put t3 on Monday at 14:00.", writes=WRITES) == (
        Part("Unplace t5", "unplace"),
        Part("put t3 on Monday at 14:00.", "place"),
    )
    # a clause with no verb of its own makes another change of the same kind
    same = request_parts("Move t2 to Friday 09:00 and t6 to Sunday 15:00", writes=WRITES)
    assert [part.tool for part in same] == ["move", "move"]
    assert request_parts("Which slots are open on Thursday?", writes=WRITES) == ()
    assert request_parts("Move t2 to Friday and tell me what is free?", writes=WRITES) == ()
    assert request_parts("Unplace t5 and place t3 on Monday", writes=[]) == ()


def test_a_small_model_is_shown_the_part_to_do_now_with_its_tool_and_its_words() -> None:
    log: list[str] = []
    script = [call("unplace", task="t5"), call("place", task="t3", day="mon", slot="14:00")]
    model = SmallScripted(script)
    agent = Agent(model=model, tools=_week(log), store=SQLiteStore(":memory:"))
    result = agent.run("Unplace t5, then put t3 on Monday at 14:00.")
    for _ in range(2):
        assert result.interaction is not None
        result = agent.resume(result.run_id, result.interaction.id, Approve())
    assert result.status == "completed" and log == ["unplace t5", "place t3 mon 14:00"]

    first, second = [request for request in model.requests if request.purpose == "execute"]
    assert first.tool_names == ["unplace"] and list(first.argument_sources) == ["Unplace t5"]
    assert second.tool_names == ["place"]
    assert list(second.argument_sources) == ["put t3 on Monday at 14:00."]
    state = second.messages[-1].content
    assert "1. Unplace t5: done\n2. put t3 on Monday at 14:00: do it now, with place" in state


def test_a_large_model_sees_no_parts_and_every_tool() -> None:
    script = [call("unplace", task="t5")]
    model = ScriptedModel(script)
    Agent(model=model, tools=_week([]), store=SQLiteStore(":memory:"), mode="react").run(
        "Unplace t5, then put t3 on Monday at 14:00."
    )
    assert model.requests[0].tool_names == ["query_available_slots", "unplace", "place"]
    assert "request_parts" not in model.requests[0].messages[-1].content


def test_a_small_model_asked_for_one_change_is_offered_the_reads_and_the_write_that_fits() -> None:
    # "Drop" over a week whose writes include a batch tool: a small model offered every write picked the
    # batch tool with nothing in it; offered the write that fits, it takes the task off.
    log: list[str] = []
    model = SmallScripted([call("unplace", task="t2")])
    agent = Agent(model=model, tools=_week(log), store=SQLiteStore(":memory:"))
    result = agent.run("Drop t2 from the calendar.")
    assert result.interaction is not None
    result = agent.resume(result.run_id, result.interaction.id, Approve())
    assert result.status == "completed" and log == ["unplace t2"]
    first = next(request for request in model.requests if request.purpose == "execute")
    assert first.tool_names == ["query_available_slots", "unplace"]
    assert "request_parts" not in first.messages[-1].content  # one change: no parts to list
