"""The usage of a formula's ``llm`` steps: kept with each step's end, in the run's outcome with its cost, and
counted once however many runners advance the run (each call's count commits with the step it ended)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runtime_helpers import answer, memory_store, write_formula

from plangate.config import ModelPrice
from plangate.events import StepStateEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Approve
from plangate.models import ScriptedModel

FORMULA = """
[[steps]]
id = "draft"
llm = { prompt = "Draft a note." }

[[steps]]
id = "ok"
needs = ["draft"]
human = { prompt = "Send {{steps.draft.output.text}}?" }

[[steps]]
id = "check"
needs = ["ok"]
retries = 1
llm = { prompt = "Is it fine?", schema = { type = "object", required = ["fine"] } }
"""

PRICES = {"scripted": ModelPrice(input=1.0, output=2.0)}


def _tokens(text: str) -> int:
    return -(-len(text) // 4)  # the scripted model's rough count


def test_llm_steps_usage_is_in_the_outcome_once_across_runners_with_its_cost(tmp_path: Path) -> None:
    store = memory_store()
    path = write_formula(tmp_path, "brief", FORMULA)
    first = FormulaRunner(store, model=ScriptedModel(["Hello team."]), prices=PRICES)
    waiting = asyncio.run(first.start(path))
    assert waiting.status == "waiting" and waiting.interaction is not None

    # Another runner (another process: nothing in memory) takes the answer and ends the run; its model
    # answers the check badly once, then well: the retried step counts both calls.
    second_model = ScriptedModel(["not json", '{"fine": true}'])
    second = FormulaRunner(store, model=second_model, prices=PRICES)
    answer(second, waiting.interaction.id, Approve())
    ended = asyncio.run(second.resume(waiting.run_id))
    assert ended.status == "completed", ended.reason

    outcome = store.get_run(ended.run_id).outcome
    assert outcome is not None
    usage = outcome["usage"]
    assert isinstance(usage, dict)
    outputs = _tokens("Hello team.") + _tokens("not json") + _tokens('{"fine": true}')
    assert (usage["calls"], usage["output_tokens"]) == (3, outputs)
    inputs = usage["input_tokens"]
    assert isinstance(inputs, int) and inputs > 0
    assert usage["cost"] == round((inputs * 1.0 + outputs * 2.0) / 1_000_000, 8)
    # each call's count is on the step_state event that ended its attempt, once
    counted = [e for e in store.events(ended.run_id) if isinstance(e, StepStateEvent) and e.usage is not None]
    ends = [(e.step_id, e.status) for e in counted]
    assert ends == [("draft", "complete"), ("check", "ready"), ("check", "complete")]


def test_a_step_event_without_usage_keeps_its_wire_form(tmp_path: Path) -> None:
    store = memory_store()
    path = write_formula(tmp_path, "brief", FORMULA.split('[[steps]]\nid = "ok"')[0])
    ended = asyncio.run(FormulaRunner(store, model=ScriptedModel(["Hi."])).start(path))
    assert ended.status == "completed"
    steps = [e for e in store.events(ended.run_id) if isinstance(e, StepStateEvent)]
    assert [(e.status, e.usage is not None) for e in steps] == [("running", False), ("complete", True)]
    assert "usage" not in steps[0].model_dump(mode="json")
