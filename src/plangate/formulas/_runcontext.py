"""The narrow interfaces between the parts of a formula run: what each part may see of the others.

For: ``RunHost``, what the scheduler reads from the runner that started it (``runtime.FormulaRunner``), and
``RunContext``, what the scheduler's phases (``_gates.py``, ``_writes.py``) read and decide through: the one
run being advanced. Each part imports this module, never the module of the part that calls it, so the
runtime, the scheduler and its phases import in one direction only (runtime → scheduler → phases → here).
Not for: behaviour; these are types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Protocol

from pydantic import JsonValue

from plangate.conditions import ConditionContext, StepState
from plangate.config import ModelPrice
from plangate.events import (
    GateEvent,
    InteractionKind,
    InteractionTool,
    StatusEvent,
    StepStateEvent,
    StepStatus,
    ToolCallEvent,
    ToolResultEvent,
)
from plangate.formulas._agent_steps import AgentSteps
from plangate.formulas._budget import RunBudget
from plangate.formulas._rungraph import PlanGraph
from plangate.formulas._runstate import RunState, StepRun
from plangate.formulas.plan import CookedStep
from plangate.models import Model
from plangate.store import LeaseBook, Store, Transaction
from plangate.tools import ToolRegistry

#: A write the scheduler adds to the transaction of its next commit.
CommitOp = Callable[[Transaction], None]
#: What a scheduler records as it runs: a step's transition, a gate's reason, a note, a tool call.
RunEvent = StepStateEvent | GateEvent | StatusEvent | ToolCallEvent | ToolResultEvent


class RunHost(Protocol):
    """What a scheduler reads from the runner that advances the run (read at each use)."""

    @property
    def store(self) -> Store: ...

    @property
    def tools(self) -> ToolRegistry: ...

    @property
    def leases(self) -> LeaseBook:
        """The runner's leases: every commit checks that this process still holds the run's."""
        ...

    @property
    def concurrency(self) -> int:
        """How many steps work at once, at most."""
        ...

    @property
    def shares_loop(self) -> bool:
        """Other runs are advanced by this runner now, on the same event loop: a commit that would wait
        (for a lock, for the network) leaves the loop to them."""
        ...

    @property
    def poll_interval(self) -> float:
        """How often a gate that reads files or the environment is looked at again while work runs."""
        ...

    @property
    def checkpoint_every(self) -> int:
        """The fewest events between two snapshots."""
        ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def env(self) -> Mapping[str, str] | None: ...

    @property
    def root(self) -> Path: ...

    @property
    def model(self) -> Model | str | None: ...

    @property
    def prices(self) -> Mapping[str, ModelPrice]: ...

    @property
    def agent_steps(self) -> AgentSteps: ...

    async def sub_run(
        self,
        parent_run_id: str,
        owner: str,
        formula: str,
        vars: dict[str, JsonValue],
        run_id: str,
        *,
        always_execute: bool = False,
        budget: RunBudget | None = None,
    ) -> tuple[str, str, dict[str, JsonValue]]:
        """Start (or adopt) the sub-run ``run_id`` (a new one with what is left of ``budget``); returns its
        id, status and outputs."""
        ...

    def end_sub_runs(self, run_ids: Iterable[str], reason: str) -> None:
        """Cancel those of ``run_ids`` that exist and have not ended."""
        ...


class RunContext(Protocol):
    """One run being advanced, as a phase of its scheduler sees it.

    A phase reads the run's state and decides transitions through it; nothing it decides is written until
    the scheduler's next commit (one transaction for the pass), and no work starts before that commit.
    """

    @property
    def run_id(self) -> str: ...

    @property
    def always_execute(self) -> bool:
        """Write steps run without asking a person (the run was started with ``--yes``)."""
        ...

    @property
    def state(self) -> RunState: ...

    @property
    def graph(self) -> PlanGraph: ...

    @property
    def store(self) -> Store: ...

    @property
    def gate_reasons(self) -> dict[str, str]:
        """The last reason recorded for each held gate (a ``gate`` event is written when it changes)."""
        ...

    def now(self) -> float: ...

    def transition(
        self,
        run: StepRun,
        status: StepStatus,
        reason: str = "",
        *,
        output: dict[str, JsonValue] | None = None,
        wait: dict[str, JsonValue] | None = None,
        attempt: int | None = None,
        raw: str | None = None,
    ) -> None:
        """Move the step to ``status`` (committed with the pass); ``raw``: what an ``llm`` step's model
        returned for the attempt that ends here."""
        ...

    def emit(self, event: RunEvent) -> None:
        """Record ``event`` with the pass's commit."""
        ...

    def on_commit(self, op: CommitOp) -> None:
        """Run ``op`` inside the pass's commit, in order with the events recorded so far."""
        ...

    def launch(self, step_id: str, what: str) -> None:
        """Start the step's work (``work``, ``write``, ...) once the pass has committed."""
        ...

    def ask(
        self,
        step: CookedStep,
        run: StepRun,
        interaction_kind: InteractionKind,
        prompt: str,
        *,
        wait_kind: str,
        attempt: int | None = None,
        tool: InteractionTool | None = None,
        details: dict[str, JsonValue] | None = None,
    ) -> None:
        """Open the run's interaction for ``step`` (or queue the question behind the open one)."""
        ...

    def context(self, current: str | None, extra: Mapping[str, StepState] | None = None) -> ConditionContext:
        """What a condition evaluated for the step ``current`` reads (``extra``: more names for steps, as an
        until-loop's condition names its body's steps of the iteration just finished)."""
        ...

    def grow(self, new_steps: list[CookedStep]) -> None:
        """Add steps to the plan while the run goes on (an until-loop's next iteration)."""
        ...


__all__ = ["CommitOp", "RunContext", "RunEvent", "RunHost"]
