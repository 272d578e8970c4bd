"""The data sources each owner registered with the server, kept in the store, checked by opening them.

For: ``SourceRegistry``: register a SQLite file (it must lie under one of the server's data directories, not
in a hidden folder, and not be a plangate store) or a ``postgresql://`` URL under a name, after opening it
and reading its schema; list, find and remove an owner's sources; hand a turn the one source it asks about.
The bundled shop data is there for every owner as ``shop``. One store document per owner holds its
sources. What clients see of a source never shows a path on the server or a password. Not for: querying
(``plangate.tools.data``) or turns (``_asks.py``).

Why data directories: a client that could register any file would make the server read files of its
choosing, the store itself (tokens, other owners' runs) among them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from plangate.errors import ConfigError, NotFoundError, UserError
from plangate.server._public import public_text
from plangate.store import DocumentConflict, Store
from plangate.tools.data import DataSource, DataSourceError, DataSources, QueryLimits, shop_db_path
from plangate.tools.data.postgres import URL_SCHEMES, mask_password

NAMESPACE = "data_sources"
"""The store documents' namespace (one document per owner, keyed by the owner)."""
BUILTIN = "shop"
MAX_SOURCES = 100
"""Sources one owner may register."""
CHECK_LIMITS = QueryLimits(timeout_s=15.0)
"""The limits of the schema read that checks a source when it is registered."""
_STORE_TABLES = frozenset({"runs", "events", "tokens"})
_NAME = re.compile(r"[^A-Za-z0-9_-]+")


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
    """A registered source as stored: ``target`` is the file's absolute path or the full URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Literal["sqlite", "postgresql"]
    target: str
    shown: str
    tables: int = 0
    created_at: float = 0.0
    builtin: bool = False

    def view(self) -> dict[str, JsonValue]:
        """The source as clients see it: where it is in words that name no server path and no password."""
        return {
            "name": self.name,
            "kind": self.kind,
            "location": self.shown,
            "tables": self.tables,
            "builtin": self.builtin,
            "created_at": self.created_at,
        }


_Change = Callable[[list["SourceEntry"]], list["SourceEntry"]]


class SourceRegistry:
    """The owners' data sources.

    Args:
        store: where the registrations are kept.
        data_dirs: the directories SQLite files may be registered from (relative names are looked up in
            them, in order).
        store_file: the store's own file, never registered (None for a store that is not a file).
    """

    def __init__(self, store: Store, data_dirs: Sequence[Path], store_file: Path | None = None) -> None:
        self.store = store
        self.data_dirs = [Path(directory).expanduser().resolve() for directory in data_dirs]
        self.store_file = store_file.expanduser().resolve() if store_file is not None else None
        self._builtin_tables: int | None = None

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
        document = self.store.get_document(NAMESPACE, owner)
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

    def listed(self, owner: str) -> list[SourceEntry]:
        """What ``owner`` may ask about: the bundled data, then its own sources."""
        shop = self.builtin()
        return ([shop] if shop is not None else []) + self.registered(owner)

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
        sources.register(entry.name, entry.target)
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
        if chosen == BUILTIN or any(entry.name == chosen for entry in self.registered(owner)):
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
            document = self.store.get_document(NAMESPACE, owner)
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
                self.store.put_document(
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
            if self.store_file is not None and resolved == self.store_file:
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

    def _check(self, name: str, kind: str, target: str, shown: str) -> int:
        try:
            source: DataSource = DataSources().register(name, target)
            schema = source.schema(CHECK_LIMITS)
        except (DataSourceError, ConfigError) as exc:
            raise SourceError(
                422, "source-unusable", f"cannot open {shown}: {_why(exc, target, shown)}"
            ) from None
        names = {table.name.lower() for table in schema.tables}
        if kind == "sqlite" and _STORE_TABLES <= names:
            raise SourceError(403, "source-forbidden", f"{shown} is a plangate store, not data")
        tables = [table for table in schema.tables if table.kind == "table" or table.columns]
        if not tables:
            raise SourceError(
                422, "source-unusable", f"{shown} holds no tables: there is nothing to ask about"
            )
        return len(tables)


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


__all__ = ["BUILTIN", "NAMESPACE", "SourceEntry", "SourceError", "SourceRegistry"]
