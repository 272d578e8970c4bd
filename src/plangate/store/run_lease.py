"""Holding a run's lease while advancing it: take it, keep it renewed, give it back.

For: ``LeaseBook``, which the formula runner, the agent runtime, the server, the CLI and the workers use so
that two processes never advance one run. Whoever advances a run holds its lease (``kept``, renewed in the
background, or ``held`` for one short commit); every commit of an advancing process is fenced by the lease's
generation (``transaction``), and a write is preceded by a renewal (``confirm``), so a process that lost its
lease (frozen past its expiry, cut off, taken over) never commits or writes again. Not for: the lease rows
themselves (the store's ``take_lease`` / ``extend_lease`` / ``release_lease``).

From async code (``kept``, its renewals, ``confirm_async``) the lease rows are written in a worker thread:
a store waiting on another process's write lock never stops the event loop.

A holder is named ``<host>:<pid>:<boot>:<token>``. A lease whose holder is a process of this machine that no
longer exists (killed, crashed) is taken over at once instead of after its expiry: ``plangate resume`` right
after a crash works, and a live holder is still never displaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

from plangate._offloop import off_loop, off_loop_undone
from plangate.errors import RunLeased, StoreError
from plangate.store.base import Lease, LeaseLost, RunKind, RunRecord, Store, Transaction

T = TypeVar("T")
X = TypeVar("X")

logger = logging.getLogger("plangate.store")

#: Told the run's id each time this process takes a run's lease over from another holder (its lease expired,
#: or its process is gone); the metrics set it when they are on (``runs.telemetry.metrics``). None: nobody.
on_takeover: Callable[[str], None] | None = None

#: Seconds a lease lasts without renewal; it is renewed every third of that while its holder works.
DEFAULT_LEASE_TTL = 30.0


def _boot_id() -> str:
    # Tells this machine's current boot apart from others that share its host name (and reuse its pids).
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()[:8] or "-"
    except OSError:
        return "-"


_HOST = socket.gethostname().replace(":", "_") or "localhost"
_BOOT = _boot_id()


def new_holder() -> str:
    """A holder name for this process: ``<host>:<pid>:<boot>:<token>``, unique per call."""
    return f"{_HOST}:{os.getpid()}:{_BOOT}:{secrets.token_hex(4)}"


def holder_is_gone(holder: str) -> bool:
    """Whether ``holder`` names a process of this machine (this boot) that no longer exists.

    Conservative: a holder of another machine, of an unreadable name, or whose pid is alive (or reused by
    another process) is not gone; its lease lapses at its expiry instead.
    """
    parts = holder.rsplit(":", 3)
    if len(parts) != 4 or parts[0] != _HOST or parts[2] != _BOOT or parts[2] == "-":
        return False
    try:
        pid = int(parts[1])
    except ValueError:
        return False
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    # A killed process that its parent has not reaped yet still answers kill(pid, 0); it runs nothing.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


class LeaseBook:
    """The leases one holder (a process, or one runner in it) holds, counted per run, fencing its commits.

    Taking a lease the book already holds only counts up, and giving it back releases it only when the count
    falls to zero: the commit that answers a question can run while the same process advances the run.
    Each lease held is kept as the store returned it (``fence``), generation included: every commit made
    through ``transaction`` is fenced by it, so once the lease was lost (expired while this process was
    frozen, released by a cancel, taken over) nothing more commits, even if the same lease is free again.

    Args:
        store: where the leases live.
        holder: the holder's name (default: a new one for this process, see ``new_holder``).
        ttl: seconds a lease lasts unless renewed.
    """

    def __init__(self, store: Store, *, holder: str | None = None, ttl: float = DEFAULT_LEASE_TTL) -> None:
        self.store = store
        self.holder = holder if holder is not None else new_holder()
        self.ttl = ttl
        self._counts: dict[str, int] = {}
        self._leases: dict[str, Lease] = {}
        self._lost: set[str] = set()
        # Holders whose lease on a run expired and was taken by this book: whatever else they hold belongs
        # to the same stopped work (a sub-run of the run taken over), and is taken over at once too.
        self._superseded: set[str] = set()
        self._renewers: dict[str, asyncio.Task[None]] = {}
        # the leases of runs this book created, with when (``time.monotonic``), until first taken
        self._created: dict[str, tuple[Lease, float]] = {}
        self._lock = threading.Lock()  # a commit answering from a worker thread counts with the loop's work

    def holds(self, run: RunRecord) -> bool:
        """Whether ``run`` (as read inside a transaction) is leased by this book's holder, as this book
        took it."""
        held = self._leases.get(run.id)
        return held is not None and run.lease_owner == self.holder

    def fence(self, run_id: str) -> Lease:
        """The lease this book holds on the run, to fence a transaction with.

        Raises:
            RunLeased: the book does not hold it, or lost it; nothing may be committed for the run here.
        """
        with self._lock:
            held = self._leases.get(run_id)
            lost = run_id in self._lost
        if held is None:
            why = "lost the run's lease" if lost else "does not hold the run's lease"
            raise RunLeased(
                f"run {run_id!r}: this process {why}; it stops advancing it, nothing more was committed",
                run_id=run_id,
                holder=None,
            )
        return held

    def transaction(self, run_id: str) -> AbstractContextManager[Transaction]:
        """A transaction on the run fenced by the lease this book holds (see ``Store.transaction``).

        Raises:
            RunLeased: the lease is not held here, or is no longer current (``LeaseLost`` underneath):
                nothing was written.
        """
        fence = self.fence(run_id)
        return _Fenced(self, fence, self.store.transaction(run_id, fence=fence))

    def commit(self, run_id: str, write: Callable[[Transaction], T]) -> T:
        """``write`` in a transaction on the run fenced by the lease this book holds, committed when it
        returns (``Store.commit``: it may be called twice, so it acts only through its transaction).

        Raises:
            RunLeased: the lease is not held here, or is no longer current: nothing was written.
        """
        fence = self.fence(run_id)
        try:
            return self.store.commit(run_id, write, fence=fence)
        except LeaseLost as exc:
            raise self._refused(run_id, fence, exc) from exc

    def try_transaction(self, run_id: str) -> AbstractContextManager[Transaction | None]:
        """``transaction`` when it can begin at once (``Store.try_transaction``); else the block gets None."""
        fence = self.fence(run_id)
        return _Fenced(self, fence, self.store.try_transaction(run_id, fence=fence))

    def _refused(self, run_id: str, fence: Lease, exc: LeaseLost) -> RunLeased:
        """What a commit refused by the store's fence (``LeaseLost``) is to this book: a run it lost."""
        self._mark_lost(run_id)
        holder = exc.current.holder if exc.current is not None else None
        return RunLeased(
            f"run {run_id!r}: this process lost the run's lease (generation {fence.generation}) to "
            f"{holder or 'nobody'}; it stops advancing it, nothing more was committed",
            run_id=run_id,
            holder=holder,
        )

    def confirm(self, run_id: str) -> None:
        """Renew the lease now, before doing what cannot be undone (a write): refused if it was lost.

        Raises:
            RunLeased: the lease is not held here any more; the caller must not act for the run.
        """
        fence = self.fence(run_id)
        try:
            renewed = self.store.extend_lease(fence, self.ttl)
        except LeaseLost as exc:
            self._mark_lost(run_id)
            raise RunLeased(
                f"run {run_id!r}: this process lost the run's lease (generation {fence.generation}); "
                "nothing more is done for it here",
                run_id=run_id,
                holder=exc.current.holder if exc.current is not None else None,
            ) from exc
        self._keep(run_id, renewed)

    async def confirm_async(self, run_id: str) -> None:
        """``confirm`` from async code: the renewal is written off the event loop."""
        await off_loop(self.confirm, run_id)

    def take(self, run_id: str) -> None:
        """Hold the run's lease (count up when already held).

        Raises:
            RunLeased: another live holder has it; nothing changed.
            NotFoundError: no such run.
        """
        with self._lock:
            count = self._counts.get(run_id, 0)
            if count == 0:
                self._leases[run_id] = self._acquire(run_id)
                self._lost.discard(run_id)
            self._counts[run_id] = count + 1

    def create_run(
        self,
        kind: RunKind,
        name: str,
        input: Mapping[str, object],
        *,
        owner: str = "local",
        parent_run_id: str | None = None,
        run_id: str | None = None,
        store: Store | None = None,
    ) -> RunRecord:
        """``store.create_run``, the new run's lease held by this book from the start: its first ``take``
        (``kept``, ``held``) asks the store nothing. For a run this process advances (or first commits) at
        once; a lease nobody takes lapses at its expiry, as a stopped holder's does. ``store``: where to
        create it, when not this book's store itself (a view of it: an agent step's).

        Raises:
            As ``Store.create_run``.
        """
        run = (store or self.store).create_run(
            kind,
            name,
            input,
            owner=owner,
            parent_run_id=parent_run_id,
            run_id=run_id,
            lease=(self.holder, self.ttl),
        )
        if run.lease_expires_at is not None:
            lease = Lease(run_id=run.id, holder=self.holder, generation=1, expires_at=run.lease_expires_at)
            now = time.monotonic()
            with self._lock:
                # one never taken (an agent stream never iterated) would never be used: it is not kept
                fresh = {key: kept for key, kept in self._created.items() if now - kept[1] < self.ttl / 3}
                self._created = {**fresh, run.id: (lease, now)}
        return run

    def give_back(self, run_id: str) -> None:
        """Count down; the lease is released when nothing in this book holds it any more."""
        with self._lock:
            count = self._counts.get(run_id, 0) - 1
            if count > 0:
                self._counts[run_id] = count
                return
            self._counts.pop(run_id, None)
            held = self._leases.pop(run_id, None)
            renewer = self._renewers.pop(run_id, None)
            if renewer is not None:
                _cancel(renewer)
            if held is None:
                return
            try:
                self.store.release_lease(run_id, self.holder)
            except StoreError as exc:  # a closed store: the lease lapses at its expiry
                logger.warning("could not release the lease of run %s: %s", run_id, exc)

    @contextlib.contextmanager
    def held(self, run_id: str) -> Iterator[None]:
        """Hold the lease for a short, synchronous piece of work (one commit)."""
        self.take(run_id)
        try:
            yield
        finally:
            self.give_back(run_id)

    @contextlib.asynccontextmanager
    async def kept(self, run_id: str) -> AsyncIterator[None]:
        """Hold the lease while advancing the run, renewing it every third of its ttl."""
        await off_loop_undone(lambda _: self.give_back(run_id), self.take, run_id)
        if run_id not in self._renewers:
            self._renewers[run_id] = asyncio.get_running_loop().create_task(self._renew(run_id))
        try:
            yield
        finally:
            await off_loop(self.give_back, run_id)

    def _keep(self, run_id: str, lease: Lease) -> None:
        with self._lock:
            if run_id in self._leases:
                self._leases[run_id] = lease

    def _mark_lost(self, run_id: str) -> None:
        with self._lock:
            if self._leases.pop(run_id, None) is not None:
                self._lost.add(run_id)

    def _acquire(self, run_id: str) -> Lease:
        # under the book's lock (``take``)
        created = self._created.pop(run_id, None)
        if created is not None and time.monotonic() - created[1] < self.ttl / 3:
            # nobody held it before, and nobody can have taken it since: it is as live as a renewed one
            return created[0]
        store = self.store  # a run created long before (a stream begun late): take it as any holder would
        before = store.get_lease(run_id)
        lease = store.take_lease(run_id, self.holder, self.ttl)
        if lease is not None:
            if before is not None and before.holder != self.holder:
                self._took_over(run_id, before.holder)  # its lease expired: its work stopped, or must
            return lease
        current = store.get_lease(run_id)
        if current is not None and (current.holder in self._superseded or holder_is_gone(current.holder)):
            # Its process is gone, or it lost the run above this one to this book: release in its name,
            # then take it as anyone could (a rival doing the same at the same moment loses at take_lease,
            # which is a compare-and-set; the released holder's commits are refused by their generation).
            store.release_lease(run_id, current.holder)
            logger.info("took over the lease of run %s from %s, which stopped", run_id, current.holder)
            lease = store.take_lease(run_id, self.holder, self.ttl)
            if lease is not None:
                self._took_over(run_id, current.holder)
                return lease
        raise RunLeased(_leased_message(store.get_run(run_id)), run_id=run_id, holder=_holder(store, run_id))

    def _took_over(self, run_id: str, holder: str) -> None:
        self._superseded.add(holder)
        if on_takeover is not None:
            on_takeover(run_id)

    async def _renew(self, run_id: str) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            with self._lock:
                held = self._leases.get(run_id)
            if held is None:
                return
            try:
                self._keep(run_id, await off_loop(self.store.extend_lease, held, self.ttl))
            except LeaseLost as exc:
                # Never taken again: someone may have advanced the run meanwhile, so what this process
                # holds in memory is stale. Its next commit is refused; the holder now continues the run.
                self._mark_lost(run_id)
                holder = exc.current.holder if exc.current is not None else "nobody"
                logger.warning("lost the lease of run %s (now %s); stopping", run_id, holder)
                return
            except StoreError as exc:
                logger.warning("could not renew the lease of run %s: %s", run_id, exc)
                # A store that is down for a moment (a restarted server) is tried again at the next beat;
                # the lease lapses at its expiry if it stays down, and the fence then refuses every commit.
                continue


def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` from any thread (a lease given back by a worker thread stops its renewer)."""
    loop = task.get_loop()
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if here is loop:
        task.cancel()
        return
    with contextlib.suppress(RuntimeError):  # its loop closed: the renewer is gone with it
        loop.call_soon_threadsafe(task.cancel)


def _holder(store: Store, run_id: str) -> str | None:
    current = store.get_lease(run_id)
    return current.holder if current is not None else None


def _leased_message(run: RunRecord) -> str:
    left = ""
    if run.lease_expires_at is not None:
        left = f", its lease runs {max(0.0, run.lease_expires_at - time.time()):.0f} s more unless renewed"
    return (
        f"run {run.id!r} is being advanced by another process ({run.lease_owner}{left}); nothing changed: "
        "try again once it has stopped, or go through the process that runs it"
    )


class _Fenced(Generic[X]):
    """A store's transaction fenced by a lease of ``book``'s: a ``LeaseLost`` from it (or from the block) is
    the book's ``RunLeased``. A class rather than a generator's block: it is on the path of every commit."""

    __slots__ = ("_book", "_fence", "_inner")

    def __init__(self, book: LeaseBook, fence: Lease, inner: AbstractContextManager[X]) -> None:
        self._book = book
        self._fence = fence
        self._inner = inner

    def __enter__(self) -> X:
        try:
            return self._inner.__enter__()
        except LeaseLost as exc:
            raise self._book._refused(self._fence.run_id, self._fence, exc) from exc

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        try:
            suppressed = self._inner.__exit__(kind, exc, tb)
        except LeaseLost as lost:
            raise self._book._refused(self._fence.run_id, self._fence, lost) from lost
        if isinstance(exc, LeaseLost) and not suppressed:  # the block's own, passed on as it was
            raise self._book._refused(self._fence.run_id, self._fence, exc) from exc
        return suppressed


__all__ = ["DEFAULT_LEASE_TTL", "LeaseBook", "holder_is_gone", "new_holder"]
