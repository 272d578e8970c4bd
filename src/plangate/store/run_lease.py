"""Holding a run's lease while advancing it: take it, keep it renewed, give it back.

For: ``LeaseBook``, which the formula runner, the server and the CLI use so that two processes never advance
one run. Whoever advances a run holds its lease (``kept``, renewed in the background, or ``held`` for one
short commit); every commit of an advancing process checks that it still holds it (``holds``), so a process
that lost its lease (frozen past its expiry, then taken over) never commits again. Not for: the lease
columns themselves (the store's ``acquire_lease`` / ``renew_lease`` / ``release_lease``).

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
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from plangate.errors import RunLeased, StoreError
from plangate.store.base import RunRecord, Store

logger = logging.getLogger("plangate.store")

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
    """The leases one holder (a process, or one runner in it) holds, counted per run.

    Taking a lease the book already holds only counts up, and giving it back releases it only when the count
    falls to zero: the commit that answers a question can run while the same process advances the run.

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
        self._renewers: dict[str, asyncio.Task[None]] = {}
        self._lock = threading.Lock()  # a commit answering from a worker thread counts with the loop's work

    def holds(self, run: RunRecord) -> bool:
        """Whether ``run`` (as read inside a transaction) is leased by this book's holder."""
        return run.lease_owner == self.holder

    def take(self, run_id: str) -> None:
        """Hold the run's lease (count up when already held).

        Raises:
            RunLeased: another live holder has it; nothing changed.
            NotFoundError: no such run.
        """
        with self._lock:
            count = self._counts.get(run_id, 0)
            if count == 0:
                self._acquire(run_id)
            self._counts[run_id] = count + 1

    def give_back(self, run_id: str) -> None:
        """Count down; the lease is released when nothing in this book holds it any more."""
        with self._lock:
            count = self._counts.get(run_id, 0) - 1
            if count > 0:
                self._counts[run_id] = count
                return
            self._counts.pop(run_id, None)
            renewer = self._renewers.pop(run_id, None)
            if renewer is not None:
                renewer.cancel()
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
        self.take(run_id)
        if run_id not in self._renewers:
            self._renewers[run_id] = asyncio.get_running_loop().create_task(self._renew(run_id))
        try:
            yield
        finally:
            self.give_back(run_id)

    def _acquire(self, run_id: str) -> None:
        store = self.store
        if store.acquire_lease(run_id, self.holder, self.ttl):
            return
        run = store.get_run(run_id)
        if run.lease_owner is not None and holder_is_gone(run.lease_owner):
            # Its process is gone: release in its name, then take it as anyone could (a rival doing the
            # same at the same moment loses at acquire_lease, which is a compare-and-set).
            store.release_lease(run_id, run.lease_owner)
            logger.info("took over the lease of run %s from %s, which stopped", run_id, run.lease_owner)
            if store.acquire_lease(run_id, self.holder, self.ttl):
                return
            run = store.get_run(run_id)
        raise RunLeased(_leased_message(run), run_id=run_id, holder=run.lease_owner)

    async def _renew(self, run_id: str) -> None:
        store, holder = self.store, self.holder
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                # renew_lease refuses a lease that expired even if nobody took it (a long pause): then it
                # is taken again, which fails only if another holder has it now.
                if store.renew_lease(run_id, holder, self.ttl) or store.acquire_lease(
                    run_id, holder, self.ttl
                ):
                    continue
            except StoreError as exc:
                logger.warning("could not renew the lease of run %s: %s", run_id, exc)
                return
            logger.warning("lost the lease of run %s to %s", run_id, store.get_run(run_id).lease_owner)
            return


def _leased_message(run: RunRecord) -> str:
    left = ""
    if run.lease_expires_at is not None:
        left = f", its lease runs {max(0.0, run.lease_expires_at - time.time()):.0f} s more unless renewed"
    return (
        f"run {run.id!r} is being advanced by another process ({run.lease_owner}{left}); nothing changed: "
        "try again once it has stopped, or go through the process that runs it"
    )


__all__ = ["DEFAULT_LEASE_TTL", "LeaseBook", "holder_is_gone", "new_holder"]
