"""A formula run's commits: what a scheduler pass decided, in one transaction fenced by the run's lease.

For: ``Commits``, which gathers what the next commit writes (the pass's events, and commit callables in their
place: an interaction opened), writes it with the run's status and, when due, its snapshot, and makes the
transaction without keeping the event loop waiting when other runs use it: on the loop when the store begins
it at once (a SQLite file nobody else writes), else in a worker thread when other runs of the runner share the
loop (their work goes on while this commit waits for a lock or for PostgreSQL's round trips), else on the
loop, which has nothing else to do. The scheduler awaits the commit: nothing of its run moves meanwhile, and
no work starts before the transition that allows it is committed. Not for: deciding what a pass commits
(``_scheduler.py``).

A snapshot (the size of the plan) is written when the plan grew, when the run waits or ends, and after at
least four events per step of the plan (and ``checkpoint_every``): its cost per event stays flat however
large the plan, and a resume folds no more events than that.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from pydantic import JsonValue

from plangate._offloop import off_loop
from plangate.errors import Signal
from plangate.events import BaseEvent, Event
from plangate.formulas._runcontext import CommitOp, RunHost
from plangate.formulas._runstate import SNAPSHOT_VERSION, RunState
from plangate.runs import telemetry
from plangate.store import TERMINAL_STATUSES, RunStatus, Transaction

#: A snapshot is written after at least this many events per step of the plan (and ``checkpoint_every``).
EVENTS_PER_STEP_PER_SNAPSHOT = 4

_Write = Callable[[Transaction], Sequence[Event]]


class RunEnded(Signal):
    """Someone ended the run (cancelled it) while its scheduler advanced it: stop, commit nothing."""

    def __init__(self, status: RunStatus) -> None:
        self.status = status
        super().__init__(status)


def began(tx: Transaction) -> RunStatus:
    """The run's status as ``tx`` began (a transaction fenced by the run's lease: refused when another
    holder took it); ``RunEnded`` when somebody ended the run meanwhile."""
    status = tx.status  # not ``tx.run``: that parses the whole row, on every pass
    if status in TERMINAL_STATUSES:
        raise RunEnded(status)
    return status


class Commits:
    """One run's commits, one a scheduler pass.

    Attributes:
        ops: what the next commit writes, in order: events, and callables that write with the transaction.
        plan_changed: the plan grew since the last snapshot (the next commit writes one).
    """

    def __init__(self, host: RunHost, run_id: str, state: RunState, trace: telemetry.RunTrace | None) -> None:
        self.host = host
        self.run_id = run_id
        self.state = state
        self.trace = trace  # None: tracing is off
        self.ops: list[Event | CommitOp] = []
        self.plan_changed = False
        self._since_snapshot = 0  # events and callables committed since the last snapshot

    def begin(self, events: Sequence[Event]) -> None:
        """A new run's first transition, ``events`` (it started): committed with the first pass's
        transitions, with the run's ``running`` status and its first snapshot."""
        self.ops[:0] = events
        self.plan_changed = True

    async def flush(
        self,
        *,
        status: RunStatus | None = "running",
        outcome: dict[str, JsonValue] | None = None,
        checkpoint: bool = False,
    ) -> None:
        """Commit ``ops`` with the run's ``status`` (and ``outcome``); ``checkpoint``: with a snapshot."""
        if not self.ops and not checkpoint and not self.plan_changed:
            return
        snapshot = self._snapshot_due(checkpoint)
        write = functools.partial(self._write, self.ops, status, outcome, snapshot)
        with self.host.leases.try_transaction(self.run_id) as tx:
            events = None if tx is None else write(tx)
        if events is None:
            if self.host.shares_loop:
                events = await off_loop(self._in_transaction, write)
            else:
                events = self._in_transaction(write)
        self._committed(events, snapshot)

    def flush_now(self) -> None:
        """``flush`` on the event loop, whatever it waits for (what the scheduler decided, before an answer
        is applied on top)."""
        if self.ops or self.plan_changed:
            snapshot = self._snapshot_due(False)
            write = functools.partial(self._write, self.ops, "running", None, snapshot)
            self._committed(self._in_transaction(write), snapshot)

    def _snapshot_due(self, checkpoint: bool) -> bool:
        every = max(self.host.checkpoint_every, EVENTS_PER_STEP_PER_SNAPSHOT * len(self.state.steps))
        due = checkpoint or self.plan_changed or self.state.unsaved_prices
        return due or self._since_snapshot + len(self.ops) >= every

    def _in_transaction(self, write: _Write) -> Sequence[Event]:
        # ``write`` acts only through its transaction: the store may run it twice (``Store.commit``)
        return self.host.leases.commit(self.run_id, write)

    def _write(
        self,
        ops: list[Event | CommitOp],
        status: RunStatus | None,
        outcome: dict[str, JsonValue] | None,
        snapshot: bool,
        tx: Transaction,
    ) -> Sequence[Event]:
        """Write ``ops``, the run's status and, when due, its snapshot with ``tx``; the events as stored."""
        before = began(tx)
        events: list[Event] = []  # a run of events goes in at once
        for op in ops:
            if isinstance(op, BaseEvent):
                events.append(op)
                continue
            tx.extend(events)
            events.clear()
            op(tx)
        tx.extend(events)
        if status is not None and (before != status or outcome is not None):
            tx.set_status(status, outcome=outcome)
        if snapshot:
            self.state.seq = tx.events[-1].seq if tx.events else tx.run.last_seq
            tx.set_snapshot(self.state.to_snapshot(), version=SNAPSHOT_VERSION)
        return tx.events

    def _committed(self, events: Sequence[Event], snapshot: bool) -> None:
        """After the commit of ``ops``: telemetry hears of it, and the next pass starts a new list."""
        if self.trace is not None or telemetry.metrics.current() is not None:
            telemetry.committed(self.trace, "formula", events, self.host.store)
        self._since_snapshot = 0 if snapshot else self._since_snapshot + len(self.ops)
        if snapshot:
            self.plan_changed = False
        self.ops = []


__all__ = ["EVENTS_PER_STEP_PER_SNAPSHOT", "Commits", "RunEnded", "began"]
