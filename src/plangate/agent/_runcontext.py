"""What the phases of an agent run see of the run they advance: the narrow interface ``RunContext``.

For: the one type the phase modules (``_route``, ``_plan``, ``_execute``, ``_deliver``, ``_interactions``,
``_writes``, ``_proof``, ``_compact``) take, instead of the orchestrator that calls them: ``loop.RunLoop``
implements it, and every phase imports this module, never ``loop.py``, so the agent runtime imports in one
direction only (``agent`` → ``loop`` → phases → here). Not for: behaviour; this is a type.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import JsonValue

from plangate.agent._batch import Batch
from plangate.agent._context import View
from plangate.agent._output import OutputSpec
from plangate.agent._state import AgentConfig, AgentState
from plangate.agent._tokens import Meter
from plangate.agent._transcript import Evidence
from plangate.agent.result import Outcome
from plangate.conditions import Condition
from plangate.events import Event
from plangate.models import Model
from plangate.store import Store
from plangate.tools import Toolset


class RunContext(Protocol):
    """The agent run being advanced, as its phases read it and decide through it.

    Attributes:
        store: where the run lives (read only: a phase commits through ``commit``).
        run_id: the run.
        config: the settings the run was started with.
        state: the run's state; a phase changes it, and ``commit`` stores it with the batch.
        toolset: the tools, and which of them are active.
        evidence: the run's receipts (successful ones per plan step, and each as conditions read it).
        goal: the run's ``done_when`` condition, if it has one.
        meter: counts prompt tokens for the context budget.
        output: what the answer of ``done`` must fit (a typed output), or None.
    """

    store: Store
    run_id: str
    config: AgentConfig
    state: AgentState
    toolset: Toolset
    evidence: Evidence
    goal: Condition | None
    meter: Meter
    output: OutputSpec | None

    @property
    def model(self) -> Model:
        """The run's model, metered."""
        ...

    def view(self) -> View:
        """What the prompts of this moment are built from."""
        ...

    def take_round(self, stage: str) -> bool:
        """Consume one round of the budget before a model call; False (the run ends ``exhausted``) when none
        is left."""
        ...

    def within_budget(self, stage: str) -> bool:
        """Whether another model call may be made; False (the run ends ``exhausted``) once the run's token
        or cost budget is reached."""
        ...

    def usage_summary(self) -> dict[str, JsonValue] | None:
        """The run's usage as its outcome shows it, or None before any call reported usage."""
        ...

    def end(self, outcome: Outcome) -> None:
        """Decide the run's outcome; the ``deliver`` phase announces it and commits the status."""
        ...

    def correct(self, batch: Batch, code: str, message: str, stage: str) -> None:
        """Add a correction to ``batch``; the third in a row ends the run."""
        ...

    async def commit(self, batch: Batch) -> list[Event]:
        """Write ``batch`` and the current state in one transaction, then fold its events in memory."""
        ...

    async def confirm_lease(self) -> None:
        """Before a write: renew the run's lease, refused (``RunLeased``) when this process lost it."""
        ...


__all__ = ["RunContext"]
