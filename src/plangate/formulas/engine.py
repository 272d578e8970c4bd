"""The formula executor as a run engine: formula runs created, advanced, answered and cancelled through the
run contract (``plangate.runs``).

For: ``FormulaEngine``, what a server, a worker or the command line holds to drive formula runs with its own
tools, formulas and model, over one ``FormulaRunner``. A new run is checked and stored with its first
commit (``create``); a sub-run or an agent step's agent is advanced through its root, which adopts it; an
answer goes to ``FormulaRunner.answer``, the one way a formula run is answered. Not for: what a run does
(``runtime.py``, ``_scheduler.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from plangate.config import BudgetConfig
from plangate.errors import ConfigError, NotFoundError, PlangateError
from plangate.events import StatusEvent
from plangate.formulas._answers import STORED_ANSWERS
from plangate.formulas.plan import Plan
from plangate.formulas.retry import FormulaChanged, formula_changed, retry_of, retry_run
from plangate.formulas.runtime import FormulaRunner, FormulaSource
from plangate.interactions import Resolution
from plangate.runs.contract import Answered, Origin, Replayed
from plangate.store import TERMINAL_STATUSES, Documents, Interaction, RunRecord, RunStatus
from plangate.vocab import RunKind


class FormulaEngine:
    """Formula runs, over one runner (its store, tools, formulas, model and lease book).

    Args:
        runner: the runner that advances them.
        budget: the budget of new runs that name none (``[budget]``).
    """

    kind: RunKind = "formula"
    remote = True

    def __init__(self, runner: FormulaRunner, budget: BudgetConfig | None = None) -> None:
        self.runner = runner
        self.store = runner.store
        self.tools = runner.tools
        self.budget = budget if budget is not None else BudgetConfig()

    def create(
        self,
        formula: FormulaSource | Plan,
        owner: str,
        *,
        vars: Mapping[str, object] | None = None,
        always_execute: bool = False,
        run_id: str | None = None,
        schedule: Mapping[str, object] | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
    ) -> str:
        """Check and store a new run with its first commit (``queued``); whoever advances it next starts
        its steps. ``run_id`` and ``schedule``: a schedule's slot that names the run and starts it.
        ``max_tokens`` / ``max_cost``: its budget (``[budget]``'s when None).

        Raises:
            FormulaError: the formula does not pass check; nothing was stored.
            ConfigError: a budget that is not valid, or ``max_cost`` with a model that has no price.
        """
        return self.runner.submit(
            formula,
            vars,
            owner=owner,
            always_execute=always_execute,
            run_id=run_id,
            schedule=schedule,
            **self.budget.for_run(max_tokens, max_cost),
        )

    def fork(self, run: RunRecord, request: Mapping[str, JsonValue]) -> str:
        """Store a retry of the formula run from a step (``from_step``; ``formula_changed``: ``use-new`` or
        ``use-recorded`` when its formula changed since): ``queued``, its first commit made when it is first
        advanced.

        Raises:
            ConfigError: the request is not ``from_step`` (a step id) and an optional ``formula_changed``.
            InteractionError: no such step; the formula changed and the request does not say what to use.
        """
        step, changed = request.get("from_step"), request.get("formula_changed")
        unknown = sorted(set(request) - {"from_step", "formula_changed"})
        if unknown:
            raise ConfigError(f"retry: a formula run is retried from a step; unknown field {unknown[0]!r}")
        if not isinstance(step, str) or not step:
            raise ConfigError("retry: from_step: expected the id of one of the run's steps")
        if changed not in (None, "use-new", "use-recorded"):
            raise ConfigError(f"retry: formula_changed: expected use-new or use-recorded; found {changed!r}")
        choice: FormulaChanged | None = "use-new" if changed == "use-new" else None
        if changed == "use-recorded":
            choice = "use-recorded"
        return retry_run(self.runner, run.id, step, formula_changed=choice)

    def origin(self, run: RunRecord) -> Origin | None:
        """The run the formula run retries, and from which step; None for a run that is no retry."""
        record = retry_of(run.input)
        if record is None:
            return None
        return Origin(str(record.get("run_id")), "retry", f"from step {record.get('step')}")

    async def replay(self, run: RunRecord) -> Replayed:
        """Replay the finished formula run offline with this runner's tools and formulas
        (``plangate.formulas.replay``).

        Raises:
            InteractionError: it is a sub-run, or it has not ended.
            ConfigError: this process lacks one of its tools.
        """
        from plangate.formulas.replay import replay_run  # the agent runtime, for its agent steps' agents

        return await replay_run(self.runner, run)

    def changed(self, run: RunRecord) -> str | None:
        """Whether the run's formula, cooked again now with its vars, differs from the plan it recorded (its
        digest); None when it does not, or when the run recorded no digest or the formula cannot be found."""
        return formula_changed(self.runner, run)

    async def advance(self, run_id: str) -> RunStatus:
        """Continue the run from its last committed transition to its next wait or its end."""
        return (await self.runner.resume(run_id)).status

    async def answer(self, interaction: Interaction, resolution: Resolution, by: str | None) -> Answered:
        """Apply the answer wherever the run is (see ``FormulaRunner.answer``)."""
        answered = await self.runner.answer(interaction.id, resolution, by=by)
        return Answered(answered.run_id, answered.continuing)

    def cancel(self, run_id: str, reason: str) -> None:
        """Cancel the run, with its sub-runs and its steps' agents."""
        self.runner.cancel(run_id, reason)

    def due(self, run: RunRecord) -> bool:
        """Not ended; and if waiting on a person, answered since it suspended (its last event is not the
        one that suspended it), with an answer left in the store for it, or left waiting by a process that
        lacked its tools."""
        if run.status in TERMINAL_STATUSES:
            return False
        if run.status != "waiting":
            return True
        if run.last_seq == 0:
            return False
        last = self.store.events(run.id, after=run.last_seq - 1)
        if not (last and isinstance(last[-1], StatusEvent) and last[-1].code == "waiting"):
            return True  # answered (or left waiting by a process without its tools) since it suspended
        opened = self.store.list_interactions(status="open", run_id=run.id)
        documents = Documents(self.store)
        return any(documents.get(STORED_ANSWERS, item.id) is not None for item in opened)

    def describe(self, run: RunRecord) -> dict[str, JsonValue]:
        """Each step's state, reason, attempt and output, in the plan's order, with what it waits on (none
        for a run with no state yet: a retry waiting in its owner's queue, copied from its origin when it
        starts)."""
        try:
            state = self.runner.load(run.id)
        except NotFoundError:  # no snapshot yet
            return {"steps": []}
        steps: list[JsonValue] = []
        for step_id, step in state.steps.items():
            planned = state.plan.index.get(step_id)
            item: dict[str, JsonValue] = {
                "id": step_id,
                "title": planned.title if planned is not None else step_id,
                "needs": list(planned.needs) if planned is not None else [],
                "parent": planned.parent if planned is not None else None,
                "executor": planned.executor.type if planned is not None else None,
                "status": step.status,
                "reason": step.reason,
                "attempt": step.attempt,
                "output": step.output,
            }
            if step.wait:
                item["wait"] = step.wait
            steps.append(item)
        return {"steps": steps}

    def tool_names(self, run: RunRecord) -> list[str]:
        """The tools the run's steps may call."""
        try:
            return self.runner.load(run.id).plan.tool_names()
        except (NotFoundError, PlangateError):
            return []  # no state yet (a sub-run its parent just named), or one this version cannot read


__all__ = ["FormulaEngine"]
