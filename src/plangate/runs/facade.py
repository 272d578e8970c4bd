"""``Runs``: the one facade the server, the command line and the workers drive runs of every kind through.

For: what happens to a run once an engine created it — advance it (here, or on the workers' queue), apply a
person's answer wherever the run is, cancel it with its sub-runs, say whether it needs advancing, find the
tools it needs, fork or retry it, say where it came from and what was made from it (its lineage), replay
it offline, and recover every run a stopped process left unfinished — asking the engine registered for
the run's kind, never comparing kinds itself. "In this process" and "on a queue" are not subclasses: runs of
a kind workers advance (``RunEngine.remote``) go to the queue when one is given; every other piece of work
is a task here (``executor.Local``). Not for: creating runs (each engine's ``create``) or HTTP and the
terminal (``plangate.server``, ``plangate.cli``).

Sub-runs are advanced through their root, so tasks, locks and messages are keyed by the root. A person's
answer never stops a task: the engine hands it to the live advancer, commits it at rest, or leaves it for
the process that holds the run; only when nothing continues the run with it is the root advanced. A cancel
stops the root's work first (its task here, or the lease of the worker that holds it), then ends the run.
Store calls made from the event loop run in worker threads (``off_loop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from plangate._offloop import off_loop
from plangate.errors import (
    ConfigError,
    InteractionError,
    NotFoundError,
    PlangateError,
    RunError,
    StaleInteraction,
)
from plangate.interactions import Resolution
from plangate.runs.contract import (
    Answered,
    ChangeAwareEngine,
    Engines,
    ForkingEngine,
    Origin,
    Replayed,
    ReplayingEngine,
    RunEngine,
)
from plangate.runs.executor import Local, Queue
from plangate.runs.quotas import Admissions
from plangate.runs.tools import ToolsDiffer
from plangate.runs.tools import check as check_tools
from plangate.store import TERMINAL_STATUSES, Commit, RunRecord, RunStatus, Store
from plangate.store.run_lease import holder_is_gone

logger = logging.getLogger("plangate.runs")

_PAGE = 500


@dataclass
class Recovery:
    """What a start-up recovery did, for its one log line."""

    resumed: dict[str, list[str]] = field(default_factory=dict)  # kind -> root ids
    refused: dict[str, str] = field(default_factory=dict)  # root id -> why its tools do not do here
    elsewhere: list[str] = field(default_factory=list)  # roots another live process advances
    ended: list[str] = field(default_factory=list)  # sub-runs whose root had ended: cancelled

    def line(self) -> str:
        """``recovered 3 runs (2 formula, 1 agent); left 1 waiting: run_x (its tool 'place' …)``."""
        count = sum(len(ids) for ids in self.resumed.values())
        kinds = ", ".join(f"{len(ids)} {kind}" for kind, ids in self.resumed.items())
        what = f"recovered {count} run(s) left unfinished by a stopped process"
        parts = [what + (f" ({kinds})" if kinds else "")]
        if self.refused:
            listed = "; ".join(f"{run_id} ({why})" for run_id, why in self.refused.items())
            parts.append(f"left {len(self.refused)} waiting for their own tools: {listed}")
        if self.elsewhere:
            held = ", ".join(self.elsewhere)
            parts.append(f"left {len(self.elsewhere)} to the live process holding its lease: {held}")
        if self.ended:
            parts.append(f"cancelled {len(self.ended)} sub-run(s) whose root had ended")
        return "; ".join(parts)


@dataclass(frozen=True)
class Lineage:
    """Where a run came from and what was made from it, both ways.

    Attributes:
        origin: the run it was forked or retried from, and where (None: it was neither).
        derived: its forks and retries of the same owner, newest first, each with where it starts.
        more: it has more than ``derived`` holds (listed with ``store.list_runs(origin_run_id=…)``).
    """

    origin: Origin | None
    derived: list[tuple[RunRecord, Origin]]
    more: bool

    def as_json(
        self, shown: Callable[[RunRecord], dict[str, JsonValue]] | None = None
    ) -> dict[str, JsonValue]:
        """Its JSON form: ``origin``, ``forks`` and ``retries`` (each a run as ``shown`` shows it, by default
        its id and status, with where it starts: ``at``) and ``derived_more``."""
        derived: dict[str, list[JsonValue]] = {"fork": [], "retry": []}
        for child, origin in self.derived:
            fields = {"run_id": child.id, "status": child.status} if shown is None else shown(child)
            derived[origin.relation].append({**fields, "at": origin.at})
        return {
            "origin": self.origin.as_json() if self.origin is not None else None,
            "forks": derived["fork"],
            "retries": derived["retry"],
            "derived_more": self.more,
        }


class Runs:
    """Runs of every kind, advanced here or by workers.

    Args:
        store: where runs live.
        engines: the engine of each kind this process drives.
        queue: the workers' queue; None: every run is advanced in this process.
    """

    def __init__(self, store: Store, engines: Engines, queue: Queue | None = None) -> None:
        self.store = store
        self.engines = engines
        self.queue = queue
        self.local = Local()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every task here; the runs stay as the store has them, and a later start recovers them."""
        await self.local.close()
        if self.queue is not None:
            self.queue.close()

    def active(self, run_id: str) -> bool:
        """Whether something advances the run (or its root) now: a task here, or the live holder of its
        lease (called from a route's worker thread)."""
        root = self.store.root_of(run_id)
        if self.local.active(root):
            return True
        if self.queue is None:
            return False
        lease = self.store.get_lease(root)
        return lease is not None and lease.expires_at > time.time()

    async def wait_idle(self, run_id: str) -> None:
        """Wait until the run's task here (if any) has ended, continuations included."""
        await self.local.wait_idle(await off_loop(self.store.root_of, run_id))

    def engine(self, run: RunRecord) -> RunEngine:
        """The engine of ``run``'s kind."""
        return self.engines.of(run)

    # -- advancing -------------------------------------------------------------------------------------------

    async def advance(self, run_id: str) -> None:
        """Advance the run (its root) in the background, from the store: a task here, or a message for the
        workers; a root that has a task here already is continued once more when it ends.

        Raises:
            NotFoundError: no such run.
        """
        if self.local.closing:
            return
        root = await off_loop(self.store.get_run, await off_loop(self.store.root_of, run_id))
        if root.status in TERMINAL_STATUSES:
            return
        if root.status == "queued" and not await off_loop(self._may_start, root.id):
            return  # it waits for a slot of its owner's (quotas/admissions.py starts it)
        engine = self.engines.of(root)
        if self.queue is not None and engine.remote:
            await off_loop(self.queue.enqueue, root.id)
            return
        self.local.advance(root.id, lambda: self._advance_here(root.id, engine))

    async def start(self, run_id: str, *, owner: str, runs_at_once: int | None = None) -> bool:
        """Start a new run: now, or, when its owner has ``runs_at_once`` runs going already, once one of
        them ends (it waits ``queued``, in order); whether it started now."""
        if runs_at_once is not None and not await off_loop(self._enter, run_id, owner, runs_at_once):
            return False
        await self.advance(run_id)
        return True

    def _enter(self, run_id: str, owner: str, runs_at_once: int) -> bool:
        admissions = self._admissions()
        return True if admissions is None else admissions.enter(run_id, owner, runs_at_once)

    def _may_start(self, run_id: str) -> bool:
        admissions = self._admissions()
        return True if admissions is None else admissions.may_start(run_id)

    def _admissions(self) -> Admissions | None:
        """The owners' slots of the store; None for a store double, which has none."""
        try:
            return Admissions(self.store)
        except ConfigError:
            return None

    async def _advance_here(self, root: str, engine: RunEngine) -> None:
        run = await off_loop(self.store.get_run, root)
        if run.status not in TERMINAL_STATUSES:
            await engine.advance(root)

    async def run_here(self, run_id: str, coroutine: Coroutine[Any, Any, Any]) -> str:
        """Run work that stores a new run ``run_id`` (a copilot turn) as that run's task here, and return
        once the run is stored.

        Raises:
            Exception: whatever the work raised before its run was stored (nothing was written).
            RunError: the work ended without storing its run.
        """
        loop = asyncio.get_running_loop()
        stored: asyncio.Future[None] = loop.create_future()

        def heard(commit: Commit) -> None:
            # The work may commit on a loop of its own, in its own thread.
            if commit.run_id == run_id:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                    loop.call_soon_threadsafe(_settle, stored)

        unsubscribe = self.store.subscribe(heard)
        try:
            unready = RunError(f"run {run_id!r}: its work ended before the run was stored; nothing written")
            await self.local.launch(run_id, coroutine, stored, unready)
        finally:
            unsubscribe()
        return run_id

    async def fork(
        self,
        run_id: str,
        request: Mapping[str, JsonValue],
        owner: str | None = None,
        *,
        runs_at_once: int | None = None,
    ) -> str:
        """Fork a run of ``owner`` (any owner's when None) at the point ``request`` names, with its changes,
        and start the fork in the background (``start``: past ``runs_at_once``, it waits); returns the fork's
        id. The origin is only read.

        Raises:
            NotFoundError: no such run of ``owner``.
            InteractionError: runs of its kind cannot be forked, or the point is not in the run.
            ConfigError: a request value is invalid (nothing was stored).
        """
        run = await off_loop(self.store.get_run, run_id, owner=owner)
        engine = self.engines.of(run)
        if not isinstance(engine, ForkingEngine):
            raise InteractionError(f"run {run_id!r} is a {run.kind} run, which cannot be forked")
        fork_id = await off_loop(engine.fork, run, request)
        await self.start(fork_id, owner=run.owner, runs_at_once=runs_at_once)
        return fork_id

    def lineage(self, run: RunRecord, *, owner: str | None = None, limit: int = 100) -> Lineage:
        """Where ``run`` came from (its engine reads it) and its forks and retries (read through the store's
        index of origins: never every run), only ``owner``'s when given (called from a route's worker
        thread)."""
        engine = self.engines.of(run) if run.kind in self.engines else None
        origin = engine.origin(run) if isinstance(engine, ForkingEngine) else None
        page = self.store.list_runs(origin_run_id=run.id, owner=owner, limit=limit)
        derived: list[tuple[RunRecord, Origin]] = []
        for child in page.items:
            maker = self.engines.of(child) if child.kind in self.engines else None
            found = maker.origin(child) if isinstance(maker, ForkingEngine) else None
            if found is not None and found.run_id == run.id:
                derived.append((child, found))
        return Lineage(origin, derived, page.next_cursor is not None)

    async def replay(self, run_id: str, owner: str | None = None) -> Replayed:
        """Replay the finished run offline with its engine (a store of its own, the record's model outputs,
        tool results and answers; no write called) and compare it with its record.

        Raises:
            NotFoundError: no such run of ``owner``.
            InteractionError: runs of its kind cannot be replayed, or it has not ended.
            ConfigError: this process lacks one of its tools.
        """
        run = await off_loop(self.store.get_run, run_id, owner=owner)
        engine = self.engines.of(run)
        if not isinstance(engine, ReplayingEngine):
            raise InteractionError(f"run {run_id!r} is a {run.kind} run, which cannot be replayed")
        return await engine.replay(run)

    def changed(self, run_id: str) -> str | None:
        """Why the run's source (a formula's file) differs now from what it was started from, as its engine
        says; None when it does not, or the engine cannot tell."""
        run = self.store.get_run(run_id)
        engine = self.engines.of(run)
        return engine.changed(run) if isinstance(engine, ChangeAwareEngine) else None

    # -- people ----------------------------------------------------------------------------------------------

    async def answer(
        self, interaction_id: str, resolution: Resolution, owner: str | None = None, *, by: str | None = None
    ) -> str:
        """Apply a person's answer to an open interaction (of ``owner``'s run, when given), wherever its run
        is; the run goes on in the background. ``by`` says who answered (default: the owner). Returns the
        id of the run that asked (an agent step's agent: its formula run).

        Raises:
            NotFoundError: no such interaction for ``owner``.
            StaleInteraction: it is not open any more; nothing changed.
            InteractionError: the resolution does not fit; nothing changed.
            RunLeased: another live process advances the run and cannot take the answer now.
        """
        interaction = await off_loop(self.store.get_interaction, interaction_id, owner=owner)
        async with self.exclusive(interaction.run_id, interaction_id=interaction_id, stop=False):
            root = await off_loop(self.store.get_run, await off_loop(self.store.root_of, interaction.run_id))
            engine = self.engines.of(root)
            answered: Answered = await engine.answer(interaction, resolution, by if by is not None else owner)
        if not answered.continuing:
            await self.advance(answered.run_id)
        return answered.run_id

    async def cancel(self, run: RunRecord, reason: str) -> None:
        """Stop the run's work and end it (and its unfinished sub-runs) ``cancelled``.

        Raises:
            InteractionError: the run already ended.
        """
        if run.status in TERMINAL_STATUSES:
            raise InteractionError(f"run {run.id!r} already ended ({run.status}); nothing to cancel")
        async with self.exclusive(run.id):
            current = await off_loop(self.store.get_run, run.id)
            if current.status not in TERMINAL_STATUSES:
                await off_loop(self.engines.of(current).cancel, current.id, reason)
        if run.parent_run_id is not None:
            await self.advance(run.id)  # its parent notices that the sub-run ended

    @contextlib.asynccontextmanager
    async def exclusive(
        self, run_id: str, *, interaction_id: str | None = None, stop: bool = True
    ) -> AsyncIterator[None]:
        """Hold the run (its root) alone among callers of this method in this process: with ``stop``, its
        work is stopped first (its task here; elsewhere, the lease of the worker or server that holds it,
        whose next commit is then refused); without, that work goes on (an answer, which it takes itself).

        With ``interaction_id``, a resolution that lost the race (the interaction is not open any more) is
        refused before anything else, so a late duplicate never touches the run it would not change.

        Raises:
            StaleInteraction: ``interaction_id`` is not open.
        """
        root = await off_loop(self.store.root_of, run_id)
        lock, users = self._locks.get(root, (asyncio.Lock(), 0))
        self._locks[root] = (lock, users + 1)
        try:
            async with lock:
                if interaction_id is not None:
                    await off_loop(_require_open, self.store, interaction_id)
                if stop:
                    await self.local.stop(root)
                    # whoever holds the lease now is another process (a worker, another server)
                    await off_loop(self._revoke, run_id)
                yield
        finally:
            # A lock lives only while someone holds or waits for it, so the table does not grow with runs.
            lock, users = self._locks[root]
            if users == 1:
                del self._locks[root]
            else:
                self._locks[root] = (lock, users - 1)

    def _revoke(self, run_id: str) -> None:
        """Take the run's lease from the process that holds it: its next commit is refused (its generation
        is no longer current), and the cancel that follows is the last word."""
        lease = self.store.get_lease(run_id)
        if lease is not None and self.store.release_lease(run_id, lease.holder):
            logger.info("cancel: took the lease of run %s from %s", run_id, lease.holder)

    # -- what runs need --------------------------------------------------------------------------------------

    def due(self, run: RunRecord) -> bool:
        """Whether the run (a root) needs advancing now, as its engine says."""
        return run.kind in self.engines and self.engines.of(run).due(run)

    def tool_names(self, run_id: str) -> list[str]:
        """The tools the run's tree needs (its root, and every run below it), each once."""
        root = self.store.get_run(self.store.root_of(run_id))
        names: dict[str, None] = {}
        pending, seen = [root], 0
        while pending and seen < 10_000:
            run = pending.pop()
            seen += 1
            if run.kind in self.engines:
                names.update(dict.fromkeys(self.engines.of(run).tool_names(run)))
            pending.extend(self.store.list_runs(parent_run_id=run.id, limit=1000).items)
        return list(names)

    # -- recovery --------------------------------------------------------------------------------------------

    async def recover(self) -> list[str]:
        """Continue every run a stopped process left unfinished; returns the ids of the roots advanced.

        A run is left unfinished when it is ``queued`` or ``running`` (and no live process holds it), or
        ``waiting`` with something new for it (its engine says: a formula answered while nobody ran it, one
        left waiting for its own tools). Runs of a
        kind workers advance are left to the workers' reaper when this process hands runs to a queue.
        What it did is logged in one line.
        """
        recovery = await off_loop(self._unfinished)
        for root in [run_id for ids in recovery.resumed.values() for run_id in ids]:
            try:
                await self.advance(root)
            except PlangateError:
                logger.exception("could not recover run %s", root)
        if recovery.resumed or recovery.refused or recovery.ended or recovery.elsewhere:
            logger.info("%s", recovery.line())
        return [run_id for ids in recovery.resumed.values() for run_id in ids]

    def _unfinished(self) -> Recovery:
        recovery = Recovery()
        roots: dict[str, RunRecord] = {}
        statuses: tuple[RunStatus, ...] = ("queued", "running", "waiting")
        for status in statuses:
            for run in self._listed(status):
                if run.kind not in self.engines or not (status != "waiting" or self.due(run)):
                    continue
                root = self._root_to_continue(run, recovery)
                if root is not None:
                    roots[root.id] = root
        for root in roots.values():
            engine = self.engines.of(root)
            if self.queue is not None and engine.remote:
                continue  # the workers' reaper hands it on
            lease = self.store.get_lease(root.id)
            if lease is not None and lease.expires_at > time.time() and not holder_is_gone(lease.holder):
                recovery.elsewhere.append(root.id)
                continue
            try:
                check_tools(root.id, root.input, self.tool_names(root.id), engine.tools)
            except ToolsDiffer as refused:
                recovery.refused[root.id] = refused.reason  # its engine leaves it waiting, saying so
            recovery.resumed.setdefault(root.kind, []).append(root.id)
        return recovery

    def _listed(self, status: RunStatus) -> list[RunRecord]:
        found: list[RunRecord] = []
        cursor: str | None = None
        while True:
            page = self.store.list_runs(status=status, limit=_PAGE, cursor=cursor)
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    def _root_to_continue(self, run: RunRecord, recovery: Recovery) -> RunRecord | None:
        """A sub-run left unfinished continues through its root, which adopts it; one whose root ended has
        nothing left to continue it, and is cancelled (no sub-run outlives its root)."""
        root = self.store.get_run(self.store.root_of(run.id))
        if root.id == run.id or root.status not in TERMINAL_STATUSES:
            return root
        reason = f"its root run {root.id!r} ended ({root.status}) before it did"
        try:
            self.engines.of(run).cancel(run.id, reason)
        except (InteractionError, NotFoundError) as exc:
            logger.warning("could not end the orphaned sub-run %s: %s", run.id, exc)
            return None
        recovery.ended.append(run.id)
        return None


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


__all__ = ["Lineage", "Recovery", "Runs"]
