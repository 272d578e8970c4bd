"""The runs a server process executes: one asyncio task per active run, recovered after a restart.

For: ``RunSupervisor``, which starts formula and agent runs in the background, continues them once a person
answered, cancels them, and at start-up resumes every run a stopped process left ``running``. A run has at
most one task; the task ends when the run waits on a person or ends. Not for: HTTP (``routes/``) or what a
run does (the engines: ``FormulaRunner`` and ``plangate.agent``).

Sub-runs of a formula execute inside the task of their root run, so everything here is keyed by the root.
A person's answer never stops a task: the formula runner hands it to the live scheduler of its run, or
commits it and continues only the step that waits on the answered sub-run; with no task on the run, the
run continues from the store. A cancel stops the run's task first, then ends the run and its sub-runs.
Every run is advanced under its lease (the formula runner takes it; agent runs are wrapped here), so a
run another live process advances is left to it, at start-up too.

A run is created (with its first commit) before its task starts, so the id the caller gets back is the id
its creation returned. The supervisor's own store calls run in worker threads (``off_loop``): a store
waiting on another process's write lock delays the request that waits on it, never the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from plangate._offloop import off_loop
from plangate.errors import (
    InteractionError,
    NotFoundError,
    PlangateError,
    RunError,
    RunLeased,
    StaleInteraction,
)
from plangate.events import StatusEvent
from plangate.formulas import Plan
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Resolution
from plangate.server._agents import AgentRuns
from plangate.server.schemas import AgentRunRequest
from plangate.store import TERMINAL_STATUSES, Commit, RunRecord, Store

logger = logging.getLogger("plangate.server")

_RECOVERY_PAGE = 500


class RunSupervisor:
    """Runs, continues, cancels and recovers runs on the event loop of the server.

    Args:
        store: the server's store.
        runner: executes formula runs.
        agents: executes agent runs.
    """

    def __init__(self, store: Store, runner: FormulaRunner, agents: AgentRuns) -> None:
        self.store = store
        self.runner = runner
        self.agents = agents
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._again: set[str] = set()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        # continuations asked for while a run's task ran, between that task's end and the next one's start
        self._continuing: dict[str, asyncio.Task[None]] = {}
        self._closing = False

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every run task; the runs stay ``running`` in the store and a later start recovers them."""
        self._closing = True
        tasks = [*self._tasks.values(), *self._continuing.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def active(self, run_id: str) -> bool:
        """Whether the run (or its root) has a task now (called from a route's worker thread)."""
        task = self._tasks.get(self.root_of(run_id))
        return task is not None and not task.done()

    async def wait_idle(self, run_id: str) -> None:
        """Wait until the run's task (if any) has ended, including any continuation it asked for."""
        root = await off_loop(self.root_of, run_id)
        while (task := self._tasks.get(root) or self._continuing.get(root)) is not None:
            await asyncio.wait({task})
            await asyncio.sleep(0)  # let the done callback schedule a continuation, if one was asked for

    # -- starting -----------------------------------------------------------------------------------------

    async def start_formula(self, plan: Plan, owner: str, *, always_execute: bool = False) -> str:
        """Store a new run of ``plan`` for ``owner`` and execute it in the background; returns its id.

        ``always_execute``: its write steps run without asking a person (recorded in the run's events).

        Raises:
            FormulaError: the plan does not pass check (nothing was stored).
        """
        run_id = await off_loop(self.runner.create, plan, owner=owner, always_execute=always_execute)
        self._adopt(run_id, asyncio.get_running_loop().create_task(self.runner.advance(run_id)))
        return run_id

    async def start_agent(self, request: AgentRunRequest, owner: str) -> str:
        """Store a new agent run for ``owner`` and execute it in the background; returns its id.

        Raises:
            ConfigError: an unknown tool or an unusable model (nothing was stored).
        """
        stream = await off_loop(self.agents.start, request, owner)

        async def drive() -> None:
            async with self.runner.leases.kept(stream.run_id):
                async for _ in stream:
                    pass  # the broadcaster hears every commit; the stream only drives the run

        self._adopt(stream.run_id, asyncio.get_running_loop().create_task(drive()))
        return stream.run_id

    async def start_turn(self, run_id: str, turn: Coroutine[Any, Any, Any]) -> str:
        """Execute a copilot turn in the background, as the task of its ``ask`` run ``run_id`` (the id its
        preparation chose); returns ``run_id`` once that run is stored.

        Raises:
            Exception: whatever the turn raised before its run was stored (nothing was written).
            RunError: the turn ended without storing its run.
        """
        loop = asyncio.get_running_loop()
        stored: asyncio.Future[None] = loop.create_future()

        def heard(commit: Commit) -> None:
            # The turn commits on a loop of its own, in its own thread.
            if commit.run_id == run_id:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                    loop.call_soon_threadsafe(_settle, stored)

        unsubscribe = self.store.subscribe(heard)
        try:
            unready = RunError(f"run {run_id!r}: the turn ended before its run was stored; nothing written")
            await self._launch(run_id, turn, stored, unready=unready)
        finally:
            unsubscribe()
        return run_id

    # -- continuing ---------------------------------------------------------------------------------------

    async def resume(self, run_id: str) -> None:
        """Continue the run (its root) from the store in the background, unless a task is on it already.

        Raises:
            NotFoundError: no such run.
        """
        if self._closing:
            return
        root = await off_loop(self.root_of, run_id)
        run = await off_loop(self.store.get_run, root)
        if run.status in TERMINAL_STATUSES:
            return
        if run.kind == "ask":
            # A copilot turn cut off by a stopped process is ended, not continued: its attempts so far and a
            # failed last one are stored whole, with its run's outcome.
            from plangate.copilot import Copilot

            await off_loop(Copilot(store=self.store).recover, root)
            return
        # The agent's coroutine is built first: an agent that cannot be rebuilt is refused here, in no task.
        agent = await off_loop(self.agents.resume, root) if run.kind == "agent" else None
        task = self._tasks.get(root)
        if self._closing or (task is not None and not task.done()):
            if agent is not None:
                agent.close()  # never started: no "never awaited" warning
            if not self._closing:
                self._again.add(root)  # continue once more when that task ends, so nothing is missed
            return
        coroutine = self.runner.resume(root) if agent is None else self._leased(root, agent)
        self._adopt(root, asyncio.get_running_loop().create_task(coroutine))

    async def _leased(self, run_id: str, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run an agent run's coroutine under the run's lease (the formula runner takes its own)."""
        try:
            async with self.runner.leases.kept(run_id):
                return await coroutine
        finally:
            coroutine.close()  # never started when the lease was refused: no "never awaited" warning

    async def resolve_formula(self, interaction_id: str, resolution: Resolution, owner: str) -> str:
        """Apply a person's answer to an interaction of a formula run (or of an agent step's agent).

        The run's task, if any, is not stopped: the live scheduler takes the answer between two of its
        passes, or only the step waiting on the answered sub-run continues. With no task on the run, the
        root continues in the background.

        Returns:
            The id of the formula run the interaction belongs to.

        Raises:
            NotFoundError: no such interaction for ``owner``.
            StaleInteraction: it is not open any more; nothing changed.
            InteractionError: the resolution does not fit; nothing changed.
            RunLeased: another live process advances the run; nothing changed.
        """
        interaction = await off_loop(self.store.get_interaction, interaction_id, owner=owner)
        async with self.exclusive(interaction.run_id, interaction_id=interaction_id, stop=False):
            answered = await self.runner.answer(interaction_id, resolution, by=owner, owner=owner)
        if not answered.continuing:
            await self.resume(answered.run_id)
        return answered.run_id

    async def resolve_agent(self, interaction_id: str, resolution: Resolution, owner: str) -> str:
        """Apply a person's answer to an agent run's interaction; the run continues in the background.

        Returns once the resolution is committed (or refused).

        Raises:
            NotFoundError: no such interaction for ``owner``.
            StaleInteraction: it is not open any more; nothing changed.
            InteractionError: the resolution does not fit the interaction; nothing changed.
        """
        interaction = await off_loop(self.store.get_interaction, interaction_id, owner=owner)
        run_id = interaction.run_id
        async with self.exclusive(run_id, interaction_id=interaction_id):
            resolved = asyncio.get_running_loop().create_future()

            def committed() -> None:
                if not resolved.done():
                    resolved.set_result(None)

            coroutine = await off_loop(
                self.agents.resume, run_id, interaction_id, resolution, by=owner, resolved=committed
            )
            await self._launch(run_id, self._leased(run_id, coroutine), resolved)
        return run_id

    async def cancel(self, run: RunRecord, reason: str) -> None:
        """Stop the run's task and end the run (and its unfinished sub-runs) ``cancelled``.

        Raises:
            InteractionError: the run already ended.
        """
        if run.status in TERMINAL_STATUSES:
            raise InteractionError(f"run {run.id!r} already ended ({run.status}); nothing to cancel")
        async with self.exclusive(run.id):
            current = await off_loop(self.store.get_run, run.id)
            if current.status not in TERMINAL_STATUSES:
                if current.kind == "agent":
                    await off_loop(self.agents.cancel, current.id, reason)
                else:  # its sub-runs and agents first, recursively
                    await off_loop(self.runner.cancel, current.id, reason)
        if run.parent_run_id is not None:
            await self.resume(run.id)  # the parent notices its sub-run ended

    @contextlib.asynccontextmanager
    async def exclusive(
        self, run_id: str, *, interaction_id: str | None = None, stop: bool = True
    ) -> AsyncIterator[None]:
        """Hold the run (its root) alone among callers of this method: with ``stop``, its task, if any, is
        stopped first (a cancel); without, the task goes on (an answer, which the task takes itself).

        With ``interaction_id``, a resolution that lost the race (the interaction is not open any more) is
        refused before anything else, so a late duplicate never touches the run it would not change.

        Raises:
            StaleInteraction: ``interaction_id`` is not open.
        """
        root = await off_loop(self.root_of, run_id)
        lock, users = self._locks.get(root, (asyncio.Lock(), 0))
        self._locks[root] = (lock, users + 1)
        try:
            async with lock:
                if interaction_id is not None:
                    await off_loop(_require_open, self.store, interaction_id)
                task = self._tasks.get(root)
                if stop and task is not None and not task.done():
                    self._again.discard(root)
                    task.cancel()
                    await asyncio.wait({task})
                yield
        finally:
            # A lock lives only while someone holds or waits for it, so the table does not grow with runs.
            lock, users = self._locks[root]
            if users == 1:
                del self._locks[root]
            else:
                self._locks[root] = (lock, users - 1)

    # -- recovery -----------------------------------------------------------------------------------------

    async def recover(self) -> list[str]:
        """Continue every run a stopped process left unfinished; returns the ids of the roots resumed.

        Runs ``running`` are resumed; so are formula runs ``waiting`` whose last event is not the one that
        suspended them (a person answered, and the process stopped before the run continued).
        """
        roots = await off_loop(self._unfinished_roots)
        resumed = []
        for root in roots:
            try:
                await self.resume(root)
            except Exception:
                logger.exception("could not recover run %s", root)
                continue
            resumed.append(root)
        if resumed:
            logger.info("recovered %d run(s) left unfinished by a stopped process", len(resumed))
        return resumed

    def _unfinished_roots(self) -> list[str]:
        roots: dict[str, None] = {}
        for status in ("running", "waiting"):
            cursor: str | None = None
            while True:
                page = self.store.list_runs(status=status, limit=_RECOVERY_PAGE, cursor=cursor)
                for run in page.items:
                    if status == "running" or self._answered_while_down(run):
                        self._recover_one(run, roots)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        return list(roots)

    def _recover_one(self, run: RunRecord, roots: dict[str, None]) -> None:
        """A sub-run left running continues through its root, which adopts it; one whose root ended has
        nothing left to continue it, and is cancelled (no sub-run outlives its root)."""
        root = self.root_of(run.id)
        if root == run.id:
            roots[root] = None
            return
        ended = self.store.get_run(root)
        if ended.status not in TERMINAL_STATUSES:
            roots[root] = None
            return
        reason = f"its root run {root!r} ended ({ended.status}) before it did"
        try:
            if run.kind == "agent":
                self.agents.cancel(run.id, reason)
            else:
                self.runner.cancel(run.id, reason)
        except (InteractionError, NotFoundError) as exc:
            logger.warning("could not end the orphaned sub-run %s: %s", run.id, exc)
            return
        logger.info("cancelled sub-run %s: %s", run.id, reason)

    def _answered_while_down(self, run: RunRecord) -> bool:
        if run.kind != "formula" or run.last_seq == 0:
            return False
        last = self.store.events(run.id, after=run.last_seq - 1)
        return not (last and isinstance(last[-1], StatusEvent) and last[-1].code == "waiting")

    # -- internals ----------------------------------------------------------------------------------------

    def root_of(self, run_id: str) -> str:
        """The id of the run's root (itself when it has no parent). Reads the store: call it off the loop."""
        run = self.store.get_run(run_id)
        while run.parent_run_id is not None:
            run = self.store.get_run(run.parent_run_id)
        return run.id

    async def _launch(
        self,
        root: str,
        coroutine: Coroutine[Any, Any, Any],
        ready: asyncio.Future[None],
        *,
        unready: PlangateError | None = None,
    ) -> None:
        """Run ``coroutine`` as the task of ``root`` and wait until it says it is ``ready`` (its resolution
        committed); the task is adopted then, even if the caller stops waiting (a client that disconnects):
        the run goes on either way.

        Raises:
            Exception: whatever the coroutine raised before it was ready (nothing was written).
        """
        task = asyncio.get_running_loop().create_task(coroutine)
        ready.add_done_callback(lambda done: None if done.cancelled() else self._adopt(root, task))
        await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
        if ready.done():
            return
        ready.cancel()
        task.result()  # raises what the coroutine raised
        if unready is not None:
            raise unready
        raise InteractionError(f"run {root!r} ended before the resolution was committed; nothing changed")

    def _adopt(self, root: str, task: asyncio.Task[Any]) -> None:
        self._tasks[root] = task
        task.add_done_callback(lambda done: self._finished(root, done))

    def _finished(self, root: str, task: asyncio.Task[Any]) -> None:
        if self._tasks.get(root) is task:
            del self._tasks[root]
        if not task.cancelled() and (error := task.exception()) is not None:
            if isinstance(error, RunLeased):
                logger.warning("run %s is not advanced here: %s", root, error)
            else:
                logger.error("run %s stopped on an error: %s: %s", root, type(error).__name__, error)
        if root in self._again and not self._closing:
            self._again.discard(root)
            again = asyncio.get_running_loop().create_task(self._continue(root))
            self._continuing[root] = again
            again.add_done_callback(lambda done: self._continued(root, done))

    async def _continue(self, root: str) -> None:
        try:
            await self.resume(root)
        except Exception:
            logger.exception("could not continue run %s", root)

    def _continued(self, root: str, task: asyncio.Task[None]) -> None:
        if self._continuing.get(root) is task:
            del self._continuing[root]


def _require_open(store: Store, interaction_id: str) -> None:
    interaction = store.get_interaction(interaction_id)
    if interaction.status != "open":
        raise StaleInteraction(
            f"interaction {interaction_id!r} is {interaction.status} already; expected an open one: "
            "nothing changed"
        )


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


__all__ = ["RunSupervisor"]
