"""What an agent run hands back: ``AgentResult``, ending with the run contract's one ``Outcome``.

For: the public, immutable answer of ``Agent.run`` / ``Agent.resume`` (where the run stands, how it ended,
what a person must answer next, the closing text). Not for: the run's durable state (``_state.py``), the
events it logged (``plangate.events``) or the shape of an outcome (``plangate.runs.outcome``, shared by every
kind of run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

from typing_extensions import TypeVar

from plangate.runs import Outcome, OutcomeStatus
from plangate.store import Interaction, RunStatus

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's ``output``: ``str`` (the closing message), or the agent's ``output_type``."""


@dataclass(frozen=True, slots=True)
class AgentResult(Generic[OutputT]):
    """Where an agent run stands after ``run`` or ``resume`` returned.

    Attributes:
        run_id: the run, for ``resume`` and the store.
        status: the run's status: ``waiting`` (``interaction`` is open), ``running`` (cut short, e.g. a
            stream that was closed early), or the terminal status of ``outcome``.
        outcome: how it ended, once it ended.
        interaction: the open question or consent request, while ``waiting``.
        answer: the closing message shown to the user, once it ended.
        output: once the run completed, its answer as the agent's ``output_type`` (validated; without one,
            the closing message); None before, for a run that did not complete, and for a typed run that
            completed without a ``done`` (proven by a ``done_when``, answered from a read).
    """

    run_id: str
    status: RunStatus
    outcome: Outcome | None = None
    interaction: Interaction | None = None
    answer: str | None = None
    output: OutputT | None = None

    @property
    def waiting(self) -> bool:
        """Whether the run waits for a person (``interaction`` says for what)."""
        return self.status == "waiting"


__all__ = ["AgentResult", "Outcome", "OutcomeStatus", "OutputT"]
