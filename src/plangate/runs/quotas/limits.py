"""What each owner may do: plangate.toml's ``[limits]``, and each owner's own, kept in the store.

For: ``Limits`` (one owner's limits, whole), ``LimitSettings`` (plangate.toml's defaults and
``[limits.owners.NAME]`` overrides), ``OwnerLimits`` (the overrides an operator sets with ``plangate owner
set``, in the store, which every server and worker reads) and ``LimitsOf``, which says an owner's limits:
the store's overrides first, then the file's for that owner, then the file's defaults. Not for: holding
owners to them (``admissions.py``, ``daily.py``, the server's requests per minute).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Literal, get_args

from pydantic import JsonValue

from plangate.config import LimitsConfig
from plangate.errors import ConfigError
from plangate.runs.quotas._component import COMPONENT
from plangate.store import Store
from plangate.store.repository import Db, checks, database_of

DoubleTexting = Literal["reject", "queue", "cancel"]
"""What a message to a conversation whose turn still runs does: refused (409), run after it, or the running
turn cancelled first."""
DOUBLE_TEXTING: tuple[DoubleTexting, ...] = get_args(DoubleTexting)
KEYS = ("runs_at_once", "requests_per_minute", "daily_tokens", "daily_cost", "double_texting")
"""The limits an owner has, by name (plangate.toml's keys and ``plangate owner set``'s options)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """One owner's limits (None: no limit).

    Attributes:
        runs_at_once: runs started and not ended (waiting on a person included); more wait, ``queued``.
        requests_per_minute: ``POST /v1/runs``, ``POST /v1/ask`` and interaction answers in a minute.
        daily_tokens: tokens its runs that ended this UTC day may have used; past it, new runs are refused.
        daily_cost: the same in cost (with ``[prices]``).
        double_texting: what a second message to a conversation whose turn still runs does.
    """

    runs_at_once: int | None = None
    requests_per_minute: int | None = None
    daily_tokens: int | None = None
    daily_cost: float | None = None
    double_texting: DoubleTexting = "reject"

    def over(self, overrides: Mapping[str, JsonValue], where: str = "limits") -> Limits:
        """These limits with ``overrides`` (a key present wins, null included: no limit).

        Raises:
            ConfigError: an override no limit may have (the message starts with ``where``).
        """
        given = {key: overrides[key] for key in KEYS if key in overrides}
        return checked(replace(self, **given), where)  # type: ignore[arg-type]

    def view(self) -> dict[str, JsonValue]:
        """The limits as JSON."""
        return {item.name: getattr(self, item.name) for item in fields(self)}


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """plangate.toml's ``[limits]``: the defaults, and the overrides of the owners it names.

    Attributes:
        defaults: every owner's limits unless overridden.
        owners: overrides by owner (only the keys given).
    """

    defaults: Limits = field(default_factory=Limits)
    owners: dict[str, dict[str, JsonValue]] = field(default_factory=dict)

    def of(self, owner: str) -> Limits:
        """``owner``'s limits by the file alone."""
        return self.defaults.over(self.owners.get(owner, {}))

    @classmethod
    def of_config(cls, config: LimitsConfig) -> LimitSettings:
        """plangate.toml's ``[limits]``, checked already by the file's schema."""
        defaults = Limits(
            runs_at_once=config.runs_at_once,
            requests_per_minute=config.requests_per_minute,
            daily_tokens=config.daily_tokens,
            daily_cost=config.daily_cost,
            double_texting=config.double_texting,
        )
        owners = {
            name: entry.model_dump(mode="json", exclude_none=True) for name, entry in config.owners.items()
        }
        return cls(defaults, owners)


def checked(limits: Limits, where: str) -> Limits:
    """``limits`` if each value is one a limit may have.

    Raises:
        ConfigError: one is not (the message names it).
    """
    for key in ("runs_at_once", "requests_per_minute", "daily_tokens"):
        value = getattr(limits, key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(
                f"{where}: {key}: expected a whole number of at least 1, or none; found {value!r}"
            )
    cost = limits.daily_cost
    if cost is not None and (not isinstance(cost, int | float) or isinstance(cost, bool) or not cost > 0):
        raise ConfigError(f"{where}: daily_cost: expected a cost above 0, or none; found {cost!r}")
    if limits.double_texting not in DOUBLE_TEXTING:
        raise ConfigError(
            f"{where}: double_texting: expected one of {', '.join(DOUBLE_TEXTING)}; "
            f"found {limits.double_texting!r}"
        )
    return limits


class OwnerLimits:
    """The limits an operator set for owners in the store (``plangate owner set``), which win over the
    file's.

    Raises:
        ConfigError: ``store`` offers no database.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def get(self, owner: str) -> dict[str, JsonValue]:
        """The overrides set for ``owner`` (empty: none)."""
        with self._database.reading("owner_limits") as db:
            row = db.one("SELECT limits FROM owner_limits WHERE owner = ?", (owner,))
        if row is None:
            return {}
        value = json.loads(row["limits"]) if isinstance(row["limits"], str) else row["limits"]
        return dict(value) if isinstance(value, dict) else {}

    def listed(self) -> dict[str, dict[str, JsonValue]]:
        """Every owner's overrides, by owner."""
        with self._database.reading("owner_limits") as db:
            rows = db.all("SELECT owner, limits FROM owner_limits ORDER BY owner")
        return {row["owner"]: json.loads(row["limits"]) for row in rows}

    def set(self, owner: str, changes: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        """Set some of ``owner``'s limits (a null value: no limit); returns its overrides now.

        Raises:
            ConfigError: an unknown key or a value no limit may have.
        """
        checks.text(owner, "owner", empty=False)
        unknown = [key for key in changes if key not in KEYS]
        if unknown:
            raise ConfigError(
                f"owner {owner!r}: unknown limit {unknown[0]!r}; expected one of {', '.join(KEYS)}"
            )
        with self._database.writing("set_owner_limits") as db:
            row = db.one("SELECT limits FROM owner_limits WHERE owner = ?", (owner,))
            current: dict[str, JsonValue] = {} if row is None else json.loads(row["limits"])
            current.update(changes)
            Limits().over(current, f"owner {owner!r}")  # raises on a value no limit may have
            self._write(db, owner, current)
        return current

    def reset(self, owner: str, keys: tuple[str, ...] = ()) -> dict[str, JsonValue]:
        """Forget ``owner``'s overrides of ``keys`` (every one when empty): the file's apply again; returns
        what is left."""
        with self._database.writing("reset_owner_limits") as db:
            row = db.one("SELECT limits FROM owner_limits WHERE owner = ?", (owner,))
            current: dict[str, JsonValue] = {} if row is None else json.loads(row["limits"])
            left = {key: value for key, value in current.items() if keys and key not in keys}
            if left:
                self._write(db, owner, left)
            else:
                db.run("DELETE FROM owner_limits WHERE owner = ?", (owner,))
        return left

    def _write(self, db: Db, owner: str, limits: dict[str, JsonValue]) -> None:
        db.run(
            "INSERT INTO owner_limits (owner, limits, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (owner) DO UPDATE SET limits = excluded.limits, updated_at = excluded.updated_at",
            (owner, json.dumps(limits, sort_keys=True), self._database.now()),
        )


class LimitsOf:
    """Each owner's limits: the store's overrides, then the file's; the store's are read again after
    ``ttl`` seconds (a change made with ``plangate owner set`` holds everywhere within that).

    Args:
        store: where the overrides are (None, or one without a database: the file's only).
        settings: plangate.toml's ``[limits]``.
        ttl: seconds an owner's overrides are kept in memory.
    """

    def __init__(
        self, store: Store | None, settings: LimitSettings | None = None, *, ttl: float = 2.0
    ) -> None:
        self.settings = settings or LimitSettings()
        self.ttl = ttl
        self._owners: OwnerLimits | None = None
        if store is not None:
            try:
                self._owners = OwnerLimits(store)
            except ConfigError:
                self._owners = None  # a store double: the file's limits only
        self._cache: dict[str, tuple[float, Limits]] = {}
        self._lock = threading.Lock()

    def __call__(self, owner: str) -> Limits:
        """``owner``'s limits."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(owner)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        found = self.settings.of(owner)
        if self._owners is not None:
            overrides = self._owners.get(owner)
            if overrides:
                found = found.over(overrides)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[owner] = (now, found)
        return found


__all__ = [
    "DOUBLE_TEXTING",
    "KEYS",
    "DoubleTexting",
    "LimitSettings",
    "Limits",
    "LimitsOf",
    "OwnerLimits",
    "checked",
]
