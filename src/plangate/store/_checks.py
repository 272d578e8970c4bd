"""Argument checks and id generation shared by every store backend.

For: turning a caller's bad argument into a ``ConfigError`` that names the argument, what was expected and
what was found, before anything is written; and making the random ids. Not for: SQL.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Collection, Mapping
from typing import get_args

from plangate._json import Encoder
from plangate.errors import ConfigError
from plangate.events import InteractionKind
from plangate.store.base import InteractionStatus, ReceiptSource, RunKind, RunStatus

RUN_KINDS: tuple[str, ...] = get_args(RunKind)
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
INTERACTION_KINDS: tuple[str, ...] = get_args(InteractionKind)
INTERACTION_STATUSES: tuple[str, ...] = get_args(InteractionStatus)
RECEIPT_SOURCES: tuple[str, ...] = get_args(ReceiptSource)

MAX_PAGE = 1000

# Without the circular-reference check (a self-containing value ends in RecursionError instead): it costs a
# fifth of the encoding time, on the path of every snapshot.
_ENCODER = Encoder(separators=(",", ":"), allow_nan=False)


def new_run_id() -> str:
    """A fresh random run id."""
    return "run_" + secrets.token_urlsafe(12)


def new_interaction_id() -> str:
    """A fresh interaction id: 128 random bits, so that nobody can guess one to resume a run with."""
    return "int_" + secrets.token_urlsafe(16)


def choice(value: object, allowed: Collection[str], where: str) -> str:
    """``value`` if it is one of ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"{where}: expected one of {', '.join(allowed)}; found {value!r}")
    return value


def statuses(value: str | Collection[str], where: str) -> list[str]:
    """One status or a collection of them, each checked."""
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise ConfigError(f"{where}: expected at least one status; found an empty collection")
    return [choice(item, RUN_STATUSES, where) for item in items]


def text(value: object, where: str, *, empty: bool = True) -> str:
    """``value`` if it is a string (non-empty unless ``empty``)."""
    if not isinstance(value, str) or (not empty and not value):
        wanted = "a string" if empty else "a non-empty string"
        raise ConfigError(f"{where}: expected {wanted}; found {value!r}")
    return value


def integer(value: object, where: str, *, minimum: int | None = None) -> int:
    """``value`` if it is an int (not a bool) at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ConfigError(f"{where}: expected an integer{bound}; found {value!r}")
    return value


def seconds(value: object, where: str) -> float:
    """``value`` if it is a positive, finite number of seconds."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"{where}: expected a positive number of seconds; found {value!r}")
    return float(value)


def page_limit(value: object) -> int:
    """A page size between 1 and ``MAX_PAGE``."""
    limit = integer(value, "limit", minimum=1)
    if limit > MAX_PAGE:
        raise ConfigError(f"limit: expected at most {MAX_PAGE}; found {limit}")
    return limit


def json_object(value: object, where: str) -> str:
    """``value`` (a mapping of JSON data) encoded as compact JSON text."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a JSON object (a dict); found {type(value).__name__}")
    try:
        return _ENCODER.encode(value if isinstance(value, dict) else dict(value))
    except RecursionError:
        raise ConfigError(f"{where}: expected JSON data; found a structure that contains itself") from None
    except (TypeError, ValueError) as exc:
        # json's message names the offending type ("Object of type datetime is not JSON serializable").
        raise ConfigError(
            f"{where}: expected JSON data (objects, arrays, strings, finite numbers, booleans, null); {exc}"
        ) from None


def json_value(value: object, where: str) -> str:
    """``value`` (any JSON value: an object, an array, a string, ...) encoded as compact JSON text."""
    try:
        return _ENCODER.encode(value)
    except RecursionError:
        raise ConfigError(f"{where}: expected JSON data; found a structure that contains itself") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"{where}: expected JSON data (objects, arrays, strings, finite numbers, booleans, null); {exc}"
        ) from None


def cursor_position(cursor: str) -> int:
    """The listing position a cursor from ``RunPage.next_cursor`` stands for."""
    if isinstance(cursor, str) and cursor.startswith("p") and cursor[1:].isdigit():
        return int(cursor[1:])
    raise ConfigError(f"cursor: expected a next_cursor returned by list_runs; found {cursor!r}")


def cursor_for(position: int) -> str:
    """The opaque cursor for a listing position."""
    return f"p{position}"
