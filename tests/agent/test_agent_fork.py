"""Forking an agent run: the fork's history is its origin's up to a round, and no write is repeated without
fresh consent in the new run (a write before the point is history; one at or after it is asked again)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from agent_helpers import Desk, SimulatedCrash, agent, call, decision, make_desk, of_type, route

from plangate.agent import Agent
from plangate.agent._fork import ForkRequest, create_fork
from plangate.errors import ConfigError, InteractionError, NotFoundError
from plangate.interactions import Answer, Approve
from plangate.models import ModelChunk, ModelRequest, ReasoningDelta, ScriptedModel, TextDelta
from plangate.store import Store, open_store


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A store on each backend (a SQLite file, then PostgreSQL)."""
    opened = open_store(store_url)
    yield opened
    opened.close()


def _origin(store: Store, desk: Desk, **options: object) -> str:
    """A finished run: round 1 looks up, round 2 places (approved), round 3 is done."""
    runner, _ = agent(
        [
            route("execute"),
            call("lookup", query="free slots"),
            call("place", task="gym", slot=9),
            decision("done", speak="Placed."),
            "The gym is in slot 9.",
        ],
        desk,
        store,
        **options,
    )
    result = runner.run("Put the gym in an evening slot")
    while result.interaction is not None:
        result = runner.resume(result.run_id, result.interaction.id, Approve())
    assert result.status == "completed"
    return result.run_id


def _prompt(model: ScriptedModel) -> str:
    """The first prompt the model was sent, as one text."""
    return "\n".join(message.content for message in model.requests[0].messages)


def _forker(store: Store, desk: Desk, responses: list[str]) -> tuple[Agent, ScriptedModel]:
    return agent(responses, desk, store)


def test_a_fork_before_an_approved_write_asks_again_and_writes_once_more_only_in_the_new_run(
    store: Store,
) -> None:
    desk = make_desk()
    origin = _origin(store, desk)
    before = [event.model_dump(exclude={"at"}) for event in store.events(origin)]
    assert desk.names() == ["lookup", "place"]
    forker, model = _forker(store, desk, [call("place", task="gym", slot=10), decision("done"), "Slot 10."])

    waiting = forker.fork(origin, at=2, instruction="take slot 10 instead")

    assert waiting.status == "waiting" and waiting.interaction is not None
    assert waiting.interaction.run_id == waiting.run_id != origin  # consent asked in the new run
    assert '"slot": 10' in waiting.interaction.prompt
    assert desk.names() == ["lookup", "place"]  # nothing written before the fresh approval
    prompt = _prompt(model)
    assert prompt.index("found free slots") < prompt.index("take slot 10 instead")  # the history, then it
    done = forker.resume(waiting.run_id, waiting.interaction.id, Approve())
    assert done.status == "completed"
    assert desk.calls[2:] == [("place", {"task": "gym", "slot": 10})]  # the fork's write, once
    assert [event.model_dump(exclude={"at"}) for event in store.events(origin)] == before  # origin untouched
    assert len(store.receipts(origin)) == 2
    fork = store.get_run(waiting.run_id)
    assert fork.input["forked_from"] == {
        "run_id": origin,
        "round": 2,
        "seq": fork.input["forked_from"]["seq"],
        "instruction": "take slot 10 instead",
    }
    names = [receipt.name for receipt in store.receipts(fork.id)]
    assert names == ["lookup", "place"]  # the carried lookup, then the fork's own write


def test_a_fork_after_the_write_does_not_write_and_carries_its_receipt(store: Store) -> None:
    desk = make_desk()
    origin = _origin(store, desk)
    forker, _ = _forker(store, desk, [decision("done", speak="Already placed."), "It is in slot 9."])

    result = forker.fork(origin, at=3)

    assert result.status == "completed"
    assert desk.names() == ["lookup", "place"]  # the origin's two calls, nothing more
    receipts = store.receipts(result.run_id)
    assert [(r.name, r.source) for r in receipts] == [
        ("lookup", "tool_observation"),
        ("place", "write_receipt"),
    ]
    assert store.pending_write_intents(result.run_id) == []


def test_carried_receipts_count_for_done_when(store: Store) -> None:
    desk = make_desk()
    goal = "receipts.count(tool == 'place' and success) >= 2"
    runner, _ = agent(
        [route("execute"), call("place", task="gym", slot=9), call("place", task="run", slot=3)],
        desk,
        store,
        done_when=goal,
    )
    result = runner.run("Place the gym and a run")
    while result.interaction is not None:
        result = runner.resume(result.run_id, result.interaction.id, Approve())
    assert result.status == "completed"
    forker, _ = agent([call("place", task="swim", slot=4), "Both placed."], desk, store)

    asked = forker.fork(result.run_id, at=2, instruction="a swim instead of the run")
    assert asked.interaction is not None
    done = forker.resume(asked.run_id, asked.interaction.id, Approve())

    # the carried gym placement and the fork's swim prove the goal: no model call says so
    assert done.status == "completed"
    assert [name for name, _ in desk.calls] == ["place", "place", "place"]
    assert of_type(store.events(done.run_id), "status")[-1].code == "proven"


def test_edited_arguments_replay_the_round_without_a_model_call_and_ask_for_consent(store: Store) -> None:
    desk = make_desk()
    origin = _origin(store, desk)
    forker, model = _forker(store, desk, [decision("done"), "Slot 11."])

    asked = forker.fork(origin, at=2, arguments={"task": "gym", "slot": 11})

    assert asked.interaction is not None and '"slot": 11' in asked.interaction.prompt
    assert model.requests == []  # the edited round made no model call
    done = forker.resume(asked.run_id, asked.interaction.id, Approve())
    assert done.status == "completed"
    assert desk.calls[-1] == ("place", {"task": "gym", "slot": 11})


def test_a_fork_of_a_run_that_wrote_without_asking_asks_unless_told(store: Store) -> None:
    desk = make_desk()
    origin = _origin(store, desk, always_execute=True)
    assert desk.names() == ["lookup", "place"]
    forker, _ = _forker(store, desk, [call("place", task="gym", slot=9)])

    asked = forker.fork(origin, at=2)

    assert asked.status == "waiting" and asked.interaction is not None
    assert store.get_run(asked.run_id).input["agent"]["always_execute"] is False
    assert desk.names() == ["lookup", "place"]
    yes, _ = _forker(store, desk, [call("place", task="gym", slot=9), decision("done"), "Done."])
    assert yes.fork(origin, at=2, always_execute=True).status == "completed"
    assert desk.names() == ["lookup", "place", "place"]


def test_at_event_forks_at_the_round_that_holds_the_event(store: Store) -> None:
    desk = make_desk()
    origin = _origin(store, desk)
    events = store.events(origin)
    rounds = {event.round: event.seq for event in of_type(events, "round")}
    write_call = next(e for e in of_type(events, "tool_call") if e.tool == "place")
    fork_id = create_fork(store, origin, ForkRequest(at_event=write_call.seq), owner="local", model_name=None)
    assert store.get_run(fork_id).input["forked_from"]["round"] == 2
    assert store.get_run(fork_id).input["forked_from"]["seq"] == rounds[2]
    first = create_fork(store, origin, ForkRequest(at_event=1), owner="local", model_name=None)
    assert store.get_run(first).input["forked_from"]["round"] == 1


def test_bad_fork_points_are_clear_errors_that_store_nothing(store: Store) -> None:
    desk = make_desk()
    origin = _origin(store, desk)
    count = len(store.list_runs(limit=100).items)
    with pytest.raises(InteractionError, match="has no round 7; its rounds are 1 to 3"):
        create_fork(store, origin, ForkRequest(at_round=7), owner="local", model_name=None)
    with pytest.raises(ConfigError, match="one of them"):
        create_fork(store, origin, ForkRequest(at_round=1, at_event=3), owner="local", model_name=None)
    last = store.get_run(origin).last_seq  # before, an event past the last one forked at the last round
    with pytest.raises(InteractionError, match=f"has no event {last + 1}; its events are 1 to {last}"):
        create_fork(store, origin, ForkRequest(at_event=last + 1), owner="local", model_name=None)
    with pytest.raises(InteractionError, match="called no tool"):
        create_fork(
            store, origin, ForkRequest(at_round=3, arguments={"x": 1}), owner="local", model_name=None
        )
    with pytest.raises(NotFoundError):
        create_fork(store, origin, ForkRequest(at_round=1), owner="mallory", model_name=None)
    assert len(store.list_runs(limit=100).items) == count


def test_a_fork_stored_but_not_copied_yet_is_copied_once_when_advanced(store: Store) -> None:
    desk = make_desk()
    origin = _origin(store, desk)
    fork_id = create_fork(store, origin, ForkRequest(at_round=3), owner="local", model_name="scripted")
    assert store.events(fork_id) == []  # as a process killed right after creating it leaves it
    forker, _ = _forker(store, desk, [decision("done"), "Done."])
    assert forker.resume(fork_id).status == "completed"
    assert [event.code for event in of_type(store.events(fork_id), "status")].count("forked") == 1
    assert len(store.receipts(fork_id)) == 2


def test_a_fork_of_a_fork_keeps_the_answers_of_the_whole_chain(store: Store) -> None:
    desk = make_desk()
    runner, _ = agent(
        [
            route("execute"),
            decision("ask_user", speak="Which slot?"),
            call("lookup", query="slot"),
            decision("done"),
            "Done.",
        ],
        desk,
        store,
    )
    asked = runner.run("Find me a slot")
    assert asked.interaction is not None
    origin = runner.resume(asked.run_id, asked.interaction.id, Answer(text="slot forty-two")).run_id
    first, _ = _forker(store, desk, [decision("done"), "Done."])
    middle = first.fork(origin, at=3).run_id
    second, model = _forker(store, desk, [decision("done"), "Done."])

    assert second.fork(middle, at=3).status == "completed"
    assert "slot forty-two" in _prompt(model)


class _Reasoning:
    """A model whose every answer comes after some reasoning (a ``thinking`` event opens each round's
    commit, before its ``round`` event)."""

    name = "reasoning"
    wire = "json"

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        yield ReasoningDelta("let me think")
        yield TextDelta(self.answers.pop(0))


def test_a_fork_point_starts_where_the_rounds_commit_starts(store: Store) -> None:
    desk = make_desk()
    model = _Reasoning(
        [call("lookup", query="slots"), call("lookup", query="more"), decision("done"), "Done."]
    )
    runner = Agent(model=model, tools=desk.registry, store=store, mode="react")
    origin = runner.run("Look twice").run_id
    assert [r.name for r in store.receipts(origin)] == ["lookup", "lookup"]
    forker, _ = _forker(store, desk, [decision("done"), "Done."])

    fork = forker.fork(origin, at=2)

    events = store.events(fork.run_id)
    forked = next(i for i, e in enumerate(events) if getattr(e, "code", "") == "forked")
    assert events[forked - 1].type == "tool_result"  # round 2's reasoning stays out of the history
    assert [r.summary for r in store.receipts(fork.run_id)] == ["found slots"]  # round 2's receipt too


def test_a_write_whose_outcome_was_unknown_stays_unknown_in_a_fork(store: Store) -> None:
    """Round 1 places; the process dies mid-call; a person says they cannot tell; round 2 is done. A fork
    after it carries the write as unknown (its receipt proves nothing) and never runs it; the origin's
    answer is history, not a consent the fork could use."""
    runner, _ = agent(
        [call("place", task="gym", slot=3)], make_desk(crash_on_write=True), store, mode="react"
    )
    waiting = runner.run("place the gym")
    assert waiting.interaction is not None
    with pytest.raises(SimulatedCrash):
        runner.resume(waiting.run_id, waiting.interaction.id, Approve())
    desk = make_desk()
    resumer, _ = agent([decision("done"), "Not sure it is placed."], desk, store)
    asked = resumer.resume(waiting.run_id)
    assert asked.interaction is not None and "may or may not have happened" in asked.interaction.prompt
    origin = resumer.resume(waiting.run_id, asked.interaction.id, Answer(text="I cannot tell."))
    assert origin.status == "completed"

    goal = "receipts.count(tool == 'place' and success) >= 1"
    forker, _ = agent([decision("done"), "Done."], desk, store, done_when=goal)
    fork = forker.fork(origin.run_id, at=2)

    assert desk.calls == []  # never run again, and never asked about as a fresh call
    carried = [(r.name, r.source, r.success) for r in store.receipts(fork.run_id)]
    assert ("place", "write_receipt", False) in carried  # unknown: it proves nothing
    assert of_type(store.events(fork.run_id), "status")[-1].code != "proven"
    assert store.pending_write_intents(fork.run_id) == []
    assert [i.kind for i in store.list_interactions(run_id=fork.run_id)] == []
