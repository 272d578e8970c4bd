"""The data perimeter: the sources the operator offers, and those each owner registered within it.

For: ``SourceRegistry``: the sources every owner may ask about (the bundled shop data as ``shop``, and the
operator's declared ones: ``[[sources]]`` in plangate.toml, ``plangate serve --source NAME=URL``); register
an owner's SQLite file (it must lie under one of the server's data directories, not in a hidden folder, and
not be a plangate store) or — only where the operator turned ``allow_client_urls`` on — a ``postgresql://``
URL to an allowed host, after opening it and reading its schema; list, find and remove an owner's sources;
hand a turn the one source it asks about. One store document per owner holds its sources. What clients see
of a source never shows a path on the server or a password. Not for: querying or vetting a database's role
(``plangate.tools.data``) or turns (``_asks.py``).

Why a perimeter: a client that could register any file or URL would make the server read data of its
choosing — the store itself (tokens, other owners' runs), another database on the same server, an internal
host. The server's own store is never a source, whatever it is called: a file is compared by identity
(``samefile``), a PostgreSQL database by its cluster and database (``tools/data/postgres.py``), and any
database holding plangate's tables is refused too.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from plangate.errors import ConfigError, NotFoundError, UserError
from plangate.server._public import public_text
from plangate.store import DocumentConflict, Documents, Store
from plangate.tools.data import (
    DataSource,
    DataSourceError,
    DataSources,
    QueryLimits,
    SourceForbidden,
    shop_db_path,
)
from plangate.tools.data.postgres import (
    URL_SCHEMES,
    DatabaseIdentity,
    PostgresSource,
    identity_of,
    import_psycopg,
    mask_password,
)

NAMESPACE = "data_sources"
"""The store documents' namespace (one document per owner, keyed by the owner)."""
BUILTIN = "shop"
MAX_SOURCES = 100
"""Sources one owner may register."""
CHECK_LIMITS = QueryLimits(timeout_s=15.0)
"""The limits of the schema read that checks a source when it is registered."""
_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_DECLARE_HINT = (
    "an operator offers a PostgreSQL source by declaring it ([[sources]] in plangate.toml, or plangate serve "
    "--source NAME=URL); ask about it by name (GET /v1/sources lists them)"
)


@dataclass(frozen=True, slots=True)
class DeclaredSource:
    """A source the operator offers every owner.

    Attributes:
        name: what questions call it.
        target: a ``postgresql://`` URL or a SQLite file's path.
        schemas: the PostgreSQL schemas questions read (None: every schema its role may use).
        allow_privileged: query it even though its role can do more than read.
        description: what the data is, shown when sources are listed.
        semantic: its semantic layer (a table, or a file's path), when ``plangate.toml`` gives one.
    """

    name: str
    target: str = field(repr=False)
    schemas: tuple[str, ...] | None = None
    allow_privileged: bool = False
    description: str = ""
    semantic: Mapping[str, object] | Path | None = field(default=None, repr=False)

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]:
        return "postgresql" if urlsplit(self.target).scheme in URL_SCHEMES else "sqlite"

    @property
    def shown(self) -> str:
        """Where it is, in words that give no password and no server path."""
        if self.kind == "postgresql":
            return mask_password(self.target)
        return self.description or f"the operator's {self.name} data"


def parse_declared(text: str) -> DeclaredSource:
    """``NAME=URL`` (``plangate serve --source``) as a declared source.

    Raises:
        ConfigError: it is not ``NAME=URL`` with a name of letters, digits, ``_`` or ``-``.
    """
    name, sep, target = text.partition("=")
    name = name.strip()
    if not sep or not target.strip() or not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name):
        raise ConfigError(
            "--source: expected NAME=URL (a name of letters, digits, '_' or '-'), got "
            f"{mask_password(text)!r}"
        )
    return DeclaredSource(name, target.strip())


class SourceError(UserError):
    """A source cannot be registered; ``status`` and ``code`` say how the API answers.

    Attributes:
        status: 403 (a file the server does not serve), 404, 409 (the name is taken) or 422 (it cannot be
            opened, or is no database).
        code: the problem's name (``source-forbidden``, ``source-exists``, ``source-unusable``).
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        super().__init__(message)


class SourceEntry(BaseModel):
    """A registered source as stored: ``target`` is the file's absolute path or the full URL (``declared``:
    one of the operator's, never stored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Literal["sqlite", "postgresql"]
    target: str
    shown: str
    tables: int = 0
    created_at: float = 0.0
    builtin: bool = False
    declared: bool = False
    description: str = ""

    def view(self) -> dict[str, JsonValue]:
        """The source as clients see it: where it is in words that name no server path and no password."""
        return {
            "name": self.name,
            "kind": self.kind,
            "location": self.shown,
            "tables": self.tables,
            "builtin": self.builtin,
            "declared": self.declared,
            "description": self.description,
            "created_at": self.created_at,
        }


_Change = Callable[[list["SourceEntry"]], list["SourceEntry"]]


class SourceRegistry:
    """The owners' data sources.

    Args:
        store: where the registrations are kept.
        data_dirs: the directories SQLite files may be registered from (relative names are looked up in
            them, in order).
        store_file: the store's own file, never a source (None for a store that is not a file).
        store_url: the store's PostgreSQL URL, whose database is never a source (None for a file store).
        declared: the sources the operator offers every owner.
        allow_client_urls: let owners register ``postgresql://`` URLs of their own.
        allowed_hosts: the hosts such a URL may name (see :func:`host_refused`).
    """

    def __init__(
        self,
        store: Store,
        data_dirs: Sequence[Path],
        store_file: Path | None = None,
        *,
        store_url: str | None = None,
        declared: Sequence[DeclaredSource] = (),
        allow_client_urls: bool = False,
        allowed_hosts: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.data_dirs = [Path(directory).expanduser().resolve() for directory in data_dirs]
        self.store_file = store_file.expanduser().resolve() if store_file is not None else None
        self.declared = {entry.name: entry for entry in declared}
        if BUILTIN in self.declared:
            raise ConfigError(f"a declared data source may not be called {BUILTIN!r} (the bundled data)")
        self.allow_client_urls = allow_client_urls
        self.allowed_hosts = list(allowed_hosts)
        self._store_url = store_url
        self._store_identity: DatabaseIdentity | None = None
        self._identity_lock = threading.Lock()
        self._builtin_tables: int | None = None
        self._declared_tables: dict[str, int] = {}

    # -- reading ---------------------------------------------------------------------------------------------

    def builtin(self) -> SourceEntry | None:
        """The bundled shop data, when it is installed."""
        try:
            path = shop_db_path()
        except ConfigError:
            return None
        if self._builtin_tables is None:
            try:
                self._builtin_tables = self._check(BUILTIN, "sqlite", str(path), "the bundled shop data")
            except SourceError:
                return None
        return SourceEntry(
            name=BUILTIN,
            kind="sqlite",
            target=str(path),
            shown="the bundled shop data",
            tables=self._builtin_tables,
            builtin=True,
        )

    def registered(self, owner: str) -> list[SourceEntry]:
        """The sources ``owner`` registered, oldest first."""
        document = Documents(self.store).get(NAMESPACE, owner)
        if document is None:
            return []
        items = document.value.get("sources")
        entries: list[SourceEntry] = []
        for item in items if isinstance(items, list) else []:
            try:
                entries.append(SourceEntry.model_validate(item))
            except ValidationError:
                continue  # a record this version cannot read is skipped, not fatal to the others
        return entries

    def offered(self) -> list[SourceEntry]:
        """The operator's declared sources, as every owner sees them."""
        return [
            SourceEntry(
                name=entry.name,
                kind=entry.kind,
                target=entry.target,
                shown=entry.shown,
                tables=self._declared_tables.get(entry.name, 0),
                declared=True,
                description=entry.description,
            )
            for entry in self.declared.values()
        ]

    def listed(self, owner: str) -> list[SourceEntry]:
        """What ``owner`` may ask about: the bundled data, the operator's sources, then its own."""
        shop = self.builtin()
        return ([shop] if shop is not None else []) + self.offered() + self.registered(owner)

    def vet_declared(self) -> dict[str, str]:
        """Open each declared source once and read its schema: what each one holds, or why it is unusable.

        Returns:
            name → ``"N tables"`` or the reason it cannot be asked about (logged by the caller).
        """
        found: dict[str, str] = {}
        for entry in self.declared.values():
            try:
                tables = self._check(entry.name, entry.kind, entry.target, entry.shown)
            except SourceError as exc:
                found[entry.name] = str(exc)
                continue
            self._declared_tables[entry.name] = tables
            found[entry.name] = f"{tables} tables"
        return found

    def get(self, owner: str, name: str) -> SourceEntry:
        """The source ``name`` of ``owner`` (or the bundled one).

        Raises:
            NotFoundError: no such source for this owner; the message lists the ones there are.
        """
        entries = self.listed(owner)
        for entry in entries:
            if entry.name == name:
                return entry
        known = ", ".join(entry.name for entry in entries) or "none"
        raise NotFoundError(f"no data source {name!r} (this owner's sources: {known})")

    def sources_for(self, owner: str, name: str) -> DataSources:
        """A registry holding the one source a turn asks about, under its name.

        Raises:
            NotFoundError: no such source for this owner.
        """
        entry = self.get(owner, name)
        sources = DataSources()
        sources.add(self._open(entry.name, entry.kind, entry.target))
        declared = self.declared.get(entry.name) if entry.declared else None
        if declared is not None and declared.semantic is not None:
            sources.set_semantic(entry.name, declared.semantic)
        return sources

    # -- writing ---------------------------------------------------------------------------------------------

    def register(self, owner: str, data: str, name: str | None = None) -> SourceEntry:
        """Open ``data`` (a file under a data directory, or a ``postgresql://`` URL), read its schema, and
        keep it as ``owner``'s source ``name`` (default: the file's stem, the database's name).

        Raises:
            SourceError: it is not allowed, cannot be opened, holds no tables, or the name is taken; the
                message says which, with no server path and no password in it.
        """
        kind, target, shown = self._locate(data)
        chosen = name or _default_name(target, kind)
        taken = chosen == BUILTIN or chosen in self.declared
        if taken or any(entry.name == chosen for entry in self.registered(owner)):
            raise SourceError(
                409,
                "source-exists",
                f"a data source named {chosen!r} exists already: give this one another name",
            )
        tables = self._check(chosen, kind, target, shown)
        entry = SourceEntry(
            name=chosen, kind=kind, target=target, shown=shown, tables=tables, created_at=time.time()
        )
        self._update(owner, lambda entries: [*entries, entry], chosen)
        return entry

    def remove(self, owner: str, name: str) -> None:
        """Forget ``owner``'s source ``name`` (turns about it stay as they were stored).

        Raises:
            NotFoundError: no such source registered by this owner (the bundled one cannot be removed).
        """
        if not any(entry.name == name for entry in self.registered(owner)):
            raise NotFoundError(f"no data source {name!r} registered by this owner")
        self._update(owner, lambda entries: [e for e in entries if e.name != name], None)

    def _update(self, owner: str, change: _Change, adding: str | None) -> None:
        for _ in range(10):
            document = Documents(self.store).get(NAMESPACE, owner)
            entries = self.registered(owner)
            if adding is not None:
                if any(entry.name == adding for entry in entries):
                    raise SourceError(409, "source-exists", f"a data source named {adding!r} exists already")
                if len(entries) >= MAX_SOURCES:
                    raise SourceError(
                        422, "too-many-sources", f"an owner may register {MAX_SOURCES} data sources at most"
                    )
            value: dict[str, object] = {"sources": [e.model_dump(mode="json") for e in change(entries)]}
            try:
                Documents(self.store).put(
                    NAMESPACE, owner, value, expected_version=document.version if document else None
                )
                return
            except DocumentConflict:
                continue  # another request changed this owner's sources meanwhile: read them again
        raise SourceError(409, "conflict", "the owner's data sources kept changing; try again")

    # -- checks ----------------------------------------------------------------------------------------------

    def _locate(self, data: str) -> tuple[Literal["sqlite", "postgresql"], str, str]:
        text = data.strip()
        scheme = urlsplit(text).scheme
        if scheme in URL_SCHEMES:
            if not self.allow_client_urls:
                raise SourceError(
                    403,
                    "source-forbidden",
                    "data: this server does not let clients register postgresql:// URLs; " + _DECLARE_HINT,
                )
            refused = host_refused(text, self.allowed_hosts)
            if refused is not None:
                raise SourceError(
                    403,
                    "source-forbidden",
                    f"data: the host {refused!r} is not one the operator allows (allowed_hosts in "
                    f"plangate.toml's [data]); {_DECLARE_HINT}",
                )
            return "postgresql", text, mask_password(text)
        if scheme == "sqlite":
            text = text.removeprefix("sqlite://")
        elif scheme and len(scheme) > 1:
            raise SourceError(
                422,
                "source-unusable",
                f"data: expected a SQLite file or a postgresql:// URL; found a {scheme}: URL",
            )
        path, shown = self._file(text)
        return "sqlite", str(path), shown

    def _file(self, text: str) -> tuple[Path, str]:
        given = Path(text).expanduser()
        candidates = [given] if given.is_absolute() else [directory / given for directory in self.data_dirs]
        inside = False
        for candidate in candidates:
            resolved = candidate.resolve()
            home = next((d for d in self.data_dirs if resolved.is_relative_to(d)), None)
            if home is None:
                continue
            inside = True
            relative = resolved.relative_to(home)
            if any(part.startswith(".") for part in relative.parts):
                raise SourceError(
                    403,
                    "source-forbidden",
                    f"data: {text!r} is in a hidden folder, which the server does not serve",
                )
            if self._is_store_file(resolved):
                raise SourceError(
                    403, "source-forbidden", f"data: {text!r} is the server's own store, not data"
                )
            if resolved.is_file():
                return resolved, str(relative)
        if not inside:
            raise SourceError(
                403,
                "source-forbidden",
                f"data: {public_text(text)!r} is outside the server's data directories; only files under "
                "them can be registered (plangate serve --data-dir)",
            )
        raise SourceError(
            422, "source-unusable", f"data: no file {public_text(text)!r} in the server's data directories"
        )

    def _is_store_file(self, path: Path) -> bool:
        if self.store_file is None:
            return False
        try:
            return path == self.store_file or os.path.samefile(path, self.store_file)
        except OSError:
            return False

    def _never(self) -> tuple[DatabaseIdentity, ...]:
        """The store's own database, read once (the server's store is on PostgreSQL)."""
        if self._store_url is None:
            return ()
        with self._identity_lock:
            if self._store_identity is None:
                self._store_identity = identity_of(self._store_url)
            return (self._store_identity,)

    def _open(self, name: str, kind: str, target: str) -> DataSource:
        if kind != "postgresql":
            return DataSources().register(name, target)
        declared = self.declared.get(name)
        if declared is None or declared.target != target:  # an owner's own URL: no operator's exceptions
            return PostgresSource(name, target, never=self._never())
        return PostgresSource(
            name,
            target,
            schemas=declared.schemas,
            allow_privileged=declared.allow_privileged,
            never=self._never(),
        )

    def _check(self, name: str, kind: str, target: str, shown: str) -> int:
        if kind == "sqlite" and self._is_store_file(Path(target).expanduser().resolve()):
            raise SourceError(403, "source-forbidden", f"{shown} is the server's own store, not data")
        try:
            source = self._open(name, kind, target)
            schema = source.schema(CHECK_LIMITS)
        except SourceForbidden as exc:
            store = exc.kind == "store" and kind == "sqlite"  # the file holds a plangate store's tables
            why = f"{shown} is a plangate store, not data" if store else _why(exc, target, shown)
            raise SourceError(403, "source-forbidden", why) from None
        except (DataSourceError, ConfigError) as exc:
            raise SourceError(
                422, "source-unusable", f"cannot open {shown}: {_why(exc, target, shown)}"
            ) from None
        tables = [table for table in schema.tables if table.kind == "table" or table.columns]
        if not tables:
            raise SourceError(
                422, "source-unusable", f"{shown} holds no tables: there is nothing to ask about"
            )
        return len(tables)


def host_refused(url: str, allowed: Sequence[str]) -> str | None:
    """The first host ``url`` names that no entry of ``allowed`` admits; None when every one is admitted.

    An entry is a host name or a glob of one (``db.internal``, ``*.analytics.internal``), ``host:port``, an
    address, or a network (``10.0.0.0/8``). Names are not resolved: list the names clients will use. A URL
    with no host (a local socket) names ``localhost``; libpq's ``hostaddr`` is checked like a host.
    """
    try:
        params = import_psycopg().conninfo.conninfo_to_dict(url)
    except Exception:  # psycopg's ProgrammingError on a malformed URL: refuse it, naming no part of it
        return "(a URL that does not parse)"
    hosts = [h for h in str(params.get("host") or "").split(",") if h.strip()] or ["localhost"]
    ports = [p for p in str(params.get("port") or "").split(",") if p.strip()]
    addresses = [a for a in str(params.get("hostaddr") or "").split(",") if a.strip()]
    for index, host in enumerate([*hosts, *addresses]):
        port = ports[index] if index < len(ports) else (ports[0] if len(ports) == 1 else "5432")
        if not any(_admits(entry.strip(), host.strip(), port) for entry in allowed):
            return host.strip()
    return None


def _admits(entry: str, host: str, port: str) -> bool:
    lowered = host.lower()
    if "/" in entry and not entry.startswith("/"):
        try:
            return ipaddress.ip_address(lowered) in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    name, _, wanted_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
    if wanted_port and wanted_port != port:
        return False
    return fnmatch.fnmatchcase(lowered, name.lower())


def _has_port(entry: str) -> bool:
    head, sep, tail = entry.rpartition(":")
    return bool(sep) and tail.isdigit() and ":" not in head  # an IPv6 address has colons of its own


def _why(exc: Exception, target: str, shown: str) -> str:
    """The reason a source did not open, with its path or URL (password and all) replaced by ``shown``."""
    text = str(exc).replace(target, shown).replace(mask_password(target), shown)
    password = urlsplit(target).password if urlsplit(target).scheme in URL_SCHEMES else None
    if password:
        text = text.replace(password, "***")
    # "data source 'x': cannot open '…': file is not a database" → the part after the last quote's colon
    text = re.sub(r"^data source '[^']*': ", "", text)
    text = re.sub(rf"^cannot open '{re.escape(shown)}': ", "", text)
    return public_text(text)


def _default_name(target: str, kind: str) -> str:
    if kind == "postgresql":
        parts = urlsplit(target)
        stem = parts.path.strip("/") or parts.hostname or "postgres"
    else:
        stem = Path(target).stem
    return _NAME.sub("_", stem).strip("_")[:64] or "data"


__all__ = [
    "BUILTIN",
    "NAMESPACE",
    "DeclaredSource",
    "SourceEntry",
    "SourceError",
    "SourceRegistry",
    "host_refused",
    "parse_declared",
]
