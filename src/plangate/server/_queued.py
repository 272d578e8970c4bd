"""The runs a server hands to workers (``plangate serve --broker``): stored here, advanced by workers.

For: ``QueuedRuns``, the supervisor of a server whose runs are advanced by ``plangate worker`` processes:
a new run is checked and stored with its first commit, then enqueued; a person's answer is committed here
(nothing runs here: an approved write runs on the worker that advances the run) and the run is enqueued
again; a cancel ends the run and takes its lease from whichever worker holds it, so that worker's next
commit is refused. The API and the events are those of the in-process supervisor: the event streams follow
the workers' commits through the store (PostgreSQL's ``LISTEN/NOTIFY``). Not for: advancing runs (the
workers) or HTTP (``routes/``).

An answer to a formula run that a worker is advancing right now (its other branch still runs) is stored
for that worker (``FormulaRunner.store_answer``), which applies it between two of its passes; the request
returns once it did (or once the run waits and the answer commits here), without stopping the branch that
runs.
"""

from __future__ import annotations

import asyncio
import logging

from plangate._offloop import off_loop
from plangate.errors import InteractionError, RunLeased, StaleInteraction
from plangate.formulas import Plan
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Resolution
from plangate.server._agents import AgentRuns
from plangate.server.schemas import AgentRunRequest
from plangate.server.supervisor import RunSupervisor
from plangate.store import TERMINAL_STATUSES, RunRecord, Store

logger = logging.getLogger("plangate.server")

#: Seconds an answer handed to a worker waits for it to be applied before the request returns (it is
#: stored either way, and the worker applies it at its next look).
_HANDED_WAIT = 10.0


class QueuedRuns(RunSupervisor):
    """A supervisor that enqueues runs for workers instead of running them.

    Args:
        store: the shared store (PostgreSQL, for workers on other machines).
        runner: checks formulas and commits answers to formula runs.
        agents: builds the agents that store agent runs and commit answers to them.
        broker: the Redis URL of the workers' queue.
    """

    def __init__(self, store: Store, runner: FormulaRunner, agents: AgentRuns, broker: str) -> None:
        from plangate.workers import RunQueue

        super().__init__(store, runner, agents)
        self.queue = RunQueue(broker)

    async def close(self) -> None:
        self.queue.close()

    async def recover(self) -> list[str]:
        """Nothing to recover here: the workers' reaper hands on the runs nobody advances."""
        return []

    def active(self, run_id: str) -> bool:
        """Whether a worker holds the lease of the run (or of its root) now (called from a route's worker
        thread)."""
        lease = self.store.get_lease(self.root_of(run_id))
        return lease is not None and lease.expires_at > self.runner.clock()

    async def start_formula(self, plan: Plan, owner: str, *, always_execute: bool = False) -> str:
        run_id = await off_loop(self.runner.submit, plan, owner=owner, always_execute=always_execute)
        await off_loop(self.queue.enqueue, run_id)
        return run_id

    async def start_agent(self, request: AgentRunRequest, owner: str) -> str:
        run_id = await off_loop(self.agents.submit, request, owner)
        await off_loop(self.queue.enqueue, run_id)
        return run_id

    async def resume(self, run_id: str) -> None:
        """Hand the run to the workers again."""
        await off_loop(self.queue.enqueue, run_id)

    async def resolve_formula(self, interaction_id: str, resolution: Resolution, owner: str) -> str:
        interaction = await off_loop(self.store.get_interaction, interaction_id, owner=owner)
        async with self.exclusive(interaction.run_id, interaction_id=interaction_id, stop=False):
            try:
                answered = await self.runner.record_answer(interaction_id, resolution, by=owner, owner=owner)
            except RunLeased:
                if (await off_loop(self.store.get_run, interaction.run_id)).kind != "formula":
                    raise  # an agent step's agent: answered once it waits
                answered = await self._hand_to_worker(interaction_id, resolution, owner)
        await off_loop(self.queue.enqueue, answered)
        run = await off_loop(self.store.get_run, answered)
        # an agent step's agent was answered: the interaction belongs to the step's formula run
        return run.parent_run_id if run.kind == "agent" and run.parent_run_id is not None else run.id

    async def _hand_to_worker(self, interaction_id: str, resolution: Resolution, owner: str) -> str:
        """Store the answer for the worker advancing the run, and wait until it took it (or until the run
        waits, when the answer commits here); returns the run answered."""
        answered = await off_loop(self.runner.store_answer, interaction_id, resolution, by=owner, owner=owner)
        # a worker that suspended the run a moment ago: the next one takes it
        await off_loop(self.queue.enqueue, answered)
        deadline = self.runner.clock() + _HANDED_WAIT
        while self.runner.clock() < deadline:
            if (await off_loop(self.store.get_interaction, interaction_id)).status != "open":
                return answered
            try:
                return await self.runner.record_answer(interaction_id, resolution, by=owner, owner=owner)
            except RunLeased:
                await asyncio.sleep(0.2)
            except StaleInteraction:
                return answered  # the worker applied it meanwhile
        logger.info("answer to %s stored; the worker advancing run %s applies it", interaction_id, answered)
        return answered

    async def resolve_agent(self, interaction_id: str, resolution: Resolution, owner: str) -> str:
        interaction = await off_loop(self.store.get_interaction, interaction_id, owner=owner)
        run_id = interaction.run_id
        async with self.exclusive(run_id, interaction_id=interaction_id, stop=False):
            await self.agents.record(run_id, interaction_id, resolution, by=owner)
        await off_loop(self.queue.enqueue, run_id)
        return run_id

    async def cancel(self, run: RunRecord, reason: str) -> None:
        if run.status in TERMINAL_STATUSES:
            raise InteractionError(f"run {run.id!r} already ended ({run.status}); nothing to cancel")
        async with self.exclusive(run.id, stop=False):
            await off_loop(self._cancel, run.id, reason)
        if run.parent_run_id is not None:
            await off_loop(self.queue.enqueue, run.id)  # its parent notices that the sub-run ended

    def _cancel(self, run_id: str, reason: str) -> None:
        current = self.store.get_run(run_id)
        if current.status in TERMINAL_STATUSES:
            return
        self._revoke(current.id)
        if current.kind == "agent":
            self.agents.cancel(current.id, reason)
        else:
            self.runner.cancel(current.id, reason)

    def _revoke(self, run_id: str) -> None:
        """Take the run's lease from the worker that holds it: its next commit is refused (its generation
        is no longer current), and the cancel below is the last word."""
        lease = self.store.get_lease(run_id)
        if lease is not None and self.store.release_lease(run_id, lease.holder):
            logger.info("cancel: took the lease of run %s from %s", run_id, lease.holder)


__all__ = ["QueuedRuns"]
