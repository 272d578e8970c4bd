"""The lease rules every backend shares: when a lease is current, and what a refused holder is told.

For: turning a run row's lease columns into a ``Lease``, and deciding whether a transaction fenced by a lease
may go ahead (``LeaseLost`` when not). Not for: the SQL that takes, extends or releases a lease (each backend
runs it in one statement under its own lock, so that two holders never both win).

A lease is current for a fence when the row still names the fence's holder and generation and has not
expired by the store's clock. The generation alone already tells takeovers apart; the expiry check also
stops a holder that was paused past its lease from committing before anybody took the lease over, since a
reaper may be about to hand the run to another worker.
"""

from __future__ import annotations

from plangate.errors import ConfigError
from plangate.store import _checks as check
from plangate.store._rows import Row
from plangate.store.base import Lease, LeaseLost

LEASE_COLUMNS = "lease_owner, lease_generation, lease_expires_at"


def lease_of(run_id: str, row: Row) -> Lease | None:
    """The lease a run row records, or None when nobody holds it (never taken, or released)."""
    holder = row["lease_owner"]
    if holder is None:
        return None
    return Lease(
        run_id=run_id,
        holder=holder,
        generation=row["lease_generation"],
        expires_at=row["lease_expires_at"],
    )


def checked_fence(fence: object, run_id: str | None, where: str = "transaction: fence") -> Lease:
    """``fence`` if it is a lease (of ``run_id``, unless that is None)."""
    if not isinstance(fence, Lease):
        raise ConfigError(
            f"{where}: expected a Lease (from store.take_lease) or None; found {type(fence).__name__}"
        )
    if run_id is not None and fence.run_id != run_id:
        raise ConfigError(f"{where}: the lease is of run {fence.run_id!r}, not of run {run_id!r}")
    return fence


def checked_holder(holder: object, where: str) -> str:
    """``holder`` if it is a non-empty string (``where`` names the argument: ``take_lease: holder``)."""
    return check.text(holder, where, empty=False)


def require_current_row(fence: Lease, run_id: str, row: Row, now: float, what: str) -> None:
    """``require_current`` against the lease columns of ``row`` (a ``Lease`` is built only to explain a
    refusal: this runs on every fenced commit).

    Raises:
        LeaseLost: as ``require_current``.
    """
    if (
        row["lease_owner"] == fence.holder
        and row["lease_generation"] == fence.generation
        and row["lease_expires_at"] is not None
        and row["lease_expires_at"] > now
    ):
        return
    require_current(fence, lease_of(run_id, row), now, what)


def require_current(fence: Lease, current: Lease | None, now: float, what: str) -> None:
    """Return if ``fence`` is the live lease ``current``; else raise ``LeaseLost`` saying why not.

    Raises:
        LeaseLost: another holder or generation holds it, nobody does, or it expired.
    """
    if (
        current is not None
        and current.holder == fence.holder
        and current.generation == fence.generation
        and current.expires_at > now
    ):
        return
    raise LeaseLost(
        f"{what} on run {fence.run_id!r} was refused: the lease of {fence.holder!r} (generation "
        f"{fence.generation}) is no longer current: {_why(fence, current, now)}; nothing was written: stop "
        "advancing this run (its current holder continues it from the store)",
        lease=fence,
        current=current,
    )


def _why(fence: Lease, current: Lease | None, now: float) -> str:
    if current is None:
        return "nobody holds it now (it was released)"
    if current.generation != fence.generation or current.holder != fence.holder:
        state = "live" if current.expires_at > now else "expired"
        return f"{current.holder!r} took it over (generation {current.generation}, {state})"
    return f"it expired {now - current.expires_at:.3g} s ago"
