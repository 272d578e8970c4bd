"""What an agent run hands back: ``AgentResult`` and the terminal ``Outcome``.

For: the public, immutable answer of ``Agent.run`` / ``Agent.resume`` (where the run stands, how it ended,
what a person must answer next, the closing text). Not for: the run's durable state (``_state.py``) or
the events it logged (``plangate.events``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from plangate.store import Interaction, RunStatus

OutcomeStatus = Literal["completed", "aborted", "exhausted", "cancelled"]
"""How an agent run ended."""


class Outcome(BaseModel):
    """How an agent run ended.

    Attributes:
        status: ``completed``, ``aborted``, ``exhausted`` (no round left) or ``cancelled``.
        stage: the phase it ended in (``route``, ``plan``, ``execute``).
        code: a stable machine-readable reason (``done``, ``replied``, ``corrections_exhausted``,
            ``stalled``, ``max_rounds``, ``model_error``, or the model's own abort code).
        user_message: what the person is told.
        internal_reason: for the logs only.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: OutcomeStatus
    stage: str
    code: str
    user_message: str
    internal_reason: str = ""


@dataclass(frozen=True, slots=True)
class AgentResult:
    """Where an agent run stands after ``run`` or ``resume`` returned.

    Attributes:
        run_id: the run, for ``resume`` and the store.
        status: the run's status: ``waiting`` (``interaction`` is open), ``running`` (cut short, e.g. a
            stream that was closed early), or the terminal status of ``outcome``.
        outcome: how it ended, once it ended.
        interaction: the open question or consent request, while ``waiting``.
        answer: the closing message shown to the user, once it ended.
    """

    run_id: str
    status: RunStatus
    outcome: Outcome | None = None
    interaction: Interaction | None = None
    answer: str | None = None

    @property
    def waiting(self) -> bool:
        """Whether the run waits for a person (``interaction`` says for what)."""
        return self.status == "waiting"


__all__ = ["AgentResult", "Outcome", "OutcomeStatus"]
