"""Opening a store from a URL, an environment variable or the default path.

For: ``open_store``, the one call interfaces use to get a ``Store``, and the URL forms it accepts. Not for:
any backend's behaviour (``store/sqlite.py``, ``store/postgres.py``).

Accepted forms: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``:memory:`` (also
``sqlite://:memory:``), a bare file path, ``postgresql://user:password@host:port/database`` (also
``postgres://`` and ``postgresql+psycopg://``; needs the ``postgres`` extra), and None for
``$PLANGATE_STORE`` or ``.plangate/plangate.db``.
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
_FORMS = (
    "sqlite:///relative/path.db, sqlite:////absolute/path.db, :memory:, a file path or "
    "postgresql://user@host/database"
)


def open_store(url: str | None = None, *, clock: Callable[[], float] | None = None) -> Store:
    """Open (creating if needed) the store that ``url`` names.

    Args:
        url: where the store is; None reads ``$PLANGATE_STORE``, then falls back to ``.plangate/plangate.db``.
        clock: where timestamps come from (seconds since the epoch); tests pass a fake one.

    Raises:
        ConfigError: the URL is not one of the accepted forms, or names a backend whose extra is not
            installed.
        StoreError: the store cannot be opened.
        SchemaVersionError: the store was written by a newer plangate.
    """
    url = _resolved(url)
    postgres = postgres_url(url)
    if postgres is not None:
        return _open_postgres(postgres, clock or time.time)
    return SQLiteStore(sqlite_target(url), clock=clock or time.time)


def postgres_url(url: str | None) -> str | None:
    """The libpq URL a ``postgresql://`` store URL stands for, or None when it names another backend."""
    url = _resolved(url)
    scheme, found, rest = url.partition("://")
    if not found or scheme.lower() not in _POSTGRES_SCHEMES:
        return None
    # SQLAlchemy's driver suffix means nothing to libpq, which reads postgresql:// and postgres://.
    return f"postgresql://{rest}"


def _open_postgres(url: str, clock: Callable[[], float]) -> Store:
    try:
        from plangate.store.postgres import PostgresStore
    except ImportError as exc:
        # The URL is not echoed: it usually carries a password.
        raise ConfigError(
            'store url: a PostgreSQL store needs the postgres extra: pip install "plangate[postgres]" '
            f"({exc.name or 'psycopg'} is not installed)"
        ) from None
    return PostgresStore(url, clock=clock)


def _resolved(url: str | None) -> str:
    if url is None:
        url = os.environ.get(STORE_ENV, "").strip() or str(DEFAULT_STORE_PATH)
    return url.strip()


def sqlite_target(url: str | None) -> str:
    """The SQLite file path (or ``:memory:``) a store URL stands for."""
    url = _resolved(url)
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
        raise ConfigError("store url: a postgresql:// URL names a PostgreSQL store, not a SQLite file")
    if scheme != "sqlite":
        raise ConfigError(f"store url: expected {_FORMS}; found the unknown scheme {scheme!r}")
    if not rest.startswith("/") or rest == "/":
        raise ConfigError(
            f"store url: expected {_FORMS}; found {url!r} (a path after 'sqlite:///' is missing)"
        )
    # As in SQLAlchemy, the third slash ends the empty host: sqlite:///a.db is relative, sqlite:////a not.
    return rest[1:]
