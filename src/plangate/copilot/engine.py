"""Copilot turns as a run engine: ``ask`` runs through the run contract (``plangate.runs``).

For: ``AskEngine``. A turn runs start to end in the process that started it (the server's job, a command's
call), holding its ``ask`` run's lease: it is never handed to workers (``remote`` is false: a turn reads the
data sources of the process that took the question — the operator's declared sources, its data directories
— which a worker elsewhere does not have). So "advancing" an ``ask`` run means ending one whose process
stopped before it finished (``Copilot.recover``: the attempts it had are kept, its last one failed with the
reason), under its lease: a turn another live process still runs is left to it. Not for: running a turn
(``turn.py``).
"""

from __future__ import annotations

import asyncio

from pydantic import JsonValue

from plangate.copilot.turn import Copilot
from plangate.errors import InteractionError
from plangate.interactions import Resolution
from plangate.runs.contract import Answered
from plangate.store import TERMINAL_STATUSES, Interaction, LeaseBook, RunRecord, RunStatus, Store
from plangate.tools import ToolRegistry
from plangate.vocab import RunKind


class AskEngine:
    """``ask`` runs of this process.

    Args:
        store: where runs live.
        leases: the lease book turns are held under (the one this process's turns use).
    """

    kind: RunKind = "ask"
    remote = False

    def __init__(self, store: Store, leases: LeaseBook | None = None) -> None:
        self.store = store
        self.leases = leases if leases is not None else LeaseBook(store)
        self.tools = ToolRegistry()

    async def advance(self, run_id: str) -> RunStatus:
        """End a turn whose process stopped before it finished (nothing else advances a turn).

        Raises:
            RunLeased: a live process runs the turn; nothing changed.
        """
        await asyncio.to_thread(self._copilot().recover, run_id)
        return self.store.get_run(run_id).status

    async def answer(self, interaction: Interaction, resolution: Resolution, by: str | None) -> Answered:
        """A turn asks nobody anything through an interaction (its questions are answers).

        Raises:
            InteractionError: always.
        """
        raise InteractionError(f"run {interaction.run_id!r} is a copilot turn: it takes no answers")

    def cancel(self, run_id: str, reason: str) -> None:
        """End a turn that no task of this process runs, ``cancelled`` (its attempts so far kept)."""
        run = self.store.get_run(run_id)
        if run.status in TERMINAL_STATUSES:
            raise InteractionError(f"run {run_id!r} already ended ({run.status}); nothing to cancel")
        self._copilot().recover(run_id, cancelled=reason)

    def due(self, run: RunRecord) -> bool:
        """A turn not ended whose process is not running it is due: to be ended."""
        return run.status not in TERMINAL_STATUSES

    def tool_names(self, run: RunRecord) -> list[str]:
        """A turn's tools are the data tools of its own source: none to look for elsewhere."""
        return []

    def describe(self, run: RunRecord) -> dict[str, JsonValue]:
        """A turn is shown by ``/v1/turns``: nothing more here."""
        return {}

    def _copilot(self) -> Copilot:
        return Copilot(store=self.store, leases=self.leases)


__all__ = ["AskEngine"]
