"""A formula run with a token budget, advanced by two processes with different prices, for the test that
counts its usage once and costs it with the prices it kept.

Usage (STORE: a store URL): ``python budget_worker.py STORE start FORMULA MAX_TOKENS`` starts the formula at
path FORMULA with that budget and prices of 1 and 2 per million tokens; its first ``llm`` step runs, then it
waits on a person, and the script prints ``RUN_ID INTERACTION_ID``. ``python budget_worker.py STORE approve
RUN_ID INTERACTION_ID`` approves it in a fresh process that passes no budget of its own and prices a hundred
times dearer, resumes the run, and prints its end and the model calls this process made as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys

from plangate.config import ModelPrice
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import open_store


def main() -> None:
    store = open_store(sys.argv[1])
    if sys.argv[2] == "start":
        cheap = {"scripted": ModelPrice(input=1.0, output=2.0)}
        runner = FormulaRunner(store, model=ScriptedModel(["Hi."]), prices=cheap)
        result = asyncio.run(runner.start(sys.argv[3], max_tokens=int(sys.argv[4])))
        assert result.interaction is not None, result.reason
        print(result.run_id, result.interaction.id, flush=True)
        return
    run_id, interaction_id = sys.argv[3], sys.argv[4]
    model = ScriptedModel(["Hi there.", "And more."])
    dear = {"scripted": ModelPrice(input=100.0, output=200.0)}
    runner = FormulaRunner(store, model=model, prices=dear)

    async def approve_and_resume() -> str:
        await runner.answer(interaction_id, Approve())
        return (await runner.resume(run_id)).status

    status = asyncio.run(approve_and_resume())
    outcome = store.get_run(run_id).outcome
    print(json.dumps({"status": status, "outcome": outcome, "calls": len(model.requests)}), flush=True)


if __name__ == "__main__":
    main()
