"""Opening a store from a URL, an environment variable or the default path.

For: ``open_store``, the one call interfaces use to get a ``Store``, and the URL forms it accepts. Not for:
any backend's behaviour (``store/sqlite.py``).

Accepted forms: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``:memory:`` (also
``sqlite://:memory:``), a bare file path, and None for ``$PLANGATE_STORE`` or ``.plangate/plangate.db``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from plangate.errors import ConfigError
from plangate.store.base import Store
from plangate.store.sqlite import MEMORY, SQLiteStore

STORE_ENV = "PLANGATE_STORE"
"""The environment variable that names the store when no URL is given."""

DEFAULT_STORE_PATH = Path(".plangate") / "plangate.db"
"""Where the store lives when neither a URL nor ``$PLANGATE_STORE`` says otherwise (relative to the cwd)."""

_POSTGRES_SCHEMES = frozenset({"postgres", "postgresql", "postgresql+psycopg"})
_MEMORY_FORMS = frozenset({MEMORY, "sqlite://:memory:", "sqlite:///:memory:", "sqlite://"})
_FORMS = "sqlite:///relative/path.db, sqlite:////absolute/path.db, :memory: or a file path"


def open_store(url: str | None = None, *, clock: Callable[[], float] | None = None) -> Store:
    """Open (creating if needed) the store that ``url`` names.

    Args:
        url: where the store is; None reads ``$PLANGATE_STORE``, then falls back to ``.plangate/plangate.db``.
        clock: where timestamps come from (seconds since the epoch); tests pass a fake one.

    Raises:
        ConfigError: the URL is not one of the accepted forms, or names a backend this version lacks.
        StoreError: the store cannot be opened.
        SchemaVersionError: the store was written by a newer plangate.
    """
    return SQLiteStore(sqlite_target(url), clock=clock or time.time)


def sqlite_target(url: str | None) -> str:
    """The SQLite file path (or ``:memory:``) a store URL stands for."""
    if url is None:
        url = os.environ.get(STORE_ENV, "").strip() or str(DEFAULT_STORE_PATH)
    url = url.strip()
    if not url:
        raise ConfigError(f"store url: expected {_FORMS}; found an empty string")
    if url in _MEMORY_FORMS:
        return MEMORY
    if "://" not in url:
        if url.lower().startswith("sqlite:"):
            raise ConfigError(f"store url: expected {_FORMS}; found {url!r} (did you mean 'sqlite:///…'?)")
        return url
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme in _POSTGRES_SCHEMES:
        # The URL is not echoed: it usually carries a password.
        raise ConfigError(
            'store url: a PostgreSQL store needs the postgres extra (pip install "plangate[postgres]") and a '
            f"plangate release that ships that backend; this one supports SQLite only ({_FORMS})"
        )
    if scheme != "sqlite":
        raise ConfigError(f"store url: expected {_FORMS}; found the unknown scheme {scheme!r}")
    if not rest.startswith("/") or rest == "/":
        raise ConfigError(
            f"store url: expected {_FORMS}; found {url!r} (a path after 'sqlite:///' is missing)"
        )
    # As in SQLAlchemy, the third slash ends the empty host: sqlite:///a.db is relative, sqlite:////a not.
    return rest[1:]
