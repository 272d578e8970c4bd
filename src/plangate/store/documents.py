"""Small versioned JSON documents that belong to no run, kept under ``(namespace, key)``: their repository.

For: ``Documents`` (read a document, write one by compare-and-set, on its own or with a run's other changes
in that run's transaction), its records (``Document``, ``DocumentConflict``) and the migrations of its table
(``COMPONENT``). Its users are generic: a week planner (``tools/schedule``), the server's data sources, the
answers a formula run's advancing process picks up. Not for: what a document holds (its user decides).

Each write is itself the compare-and-set (an insert that does nothing on a taken key, an update of the
expected version only), so it holds under SQLite's file lock and under PostgreSQL's row locks alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from plangate.errors import ConfigError, StoreError
from plangate.events import JsonObject
from plangate.store.base import Record, Store, Transaction
from plangate.store.ddl import FromCore
from plangate.store.repository import (
    Component,
    Db,
    RowMapper,
    checks,
    connection_of,
    database_of,
    register,
)

COMPONENT = register(
    Component(
        "documents",
        (
            # 1: the table core migration 2 made (store/_schema.py: DOCUMENTS)
            (FromCore(2, ("documents",)),),
        ),
    )
)


class Document(Record):
    """A small JSON object kept under ``(namespace, key)``, written by compare-and-set.

    Documents hold state that belongs to no single run (a week planner, a user's settings). Each write
    increments ``version``; a writer names the version it read, so that two writers never overwrite each
    other's changes unnoticed.

    Attributes:
        namespace: the kind of document (``schedule``), so that toolkits never collide on keys.
        key: the document's name inside its namespace.
        value: the JSON object stored.
        version: 1 after the first write, one more after each later write.
        updated_at: when the current version was written.
    """

    namespace: str
    key: str
    value: JsonObject
    version: int
    updated_at: float


class DocumentConflict(StoreError):
    """A compare-and-set write of a document found another version than the one it expected; nothing changed.

    Read the document again, reapply the change to what is stored now, and write with the new version.

    Attributes:
        namespace: the document's namespace.
        key: the document's key.
        expected_version: the version the writer expected (None: expected no document).
        current: the document as stored now, or None when there is none.
    """

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        key: str,
        expected_version: int | None,
        current: Document | None,
    ) -> None:
        self.namespace = namespace
        self.key = key
        self.expected_version = expected_version
        self.current = current
        super().__init__(message)


_DOCUMENTS = RowMapper(
    Document, lambda row: f"document {row['key']!r} in namespace {row['namespace']!r}", objects=("value",)
)
_SELECT = f"SELECT {_DOCUMENTS.select} FROM documents WHERE namespace = ? AND key = ?"


class Documents:
    """The documents of a store.

    Args:
        store: a store opened by plangate; its documents table is brought up to date the first time.

    Raises:
        ConfigError: ``store`` offers no database.
        SchemaVersionError: a newer plangate wrote the documents table.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def get(self, namespace: str, key: str, *, tx: Transaction | None = None) -> Document | None:
        """The document stored under ``(namespace, key)``, or None if none was written; with ``tx``, as that
        run's transaction sees it (its own writes included)."""
        namespace, key = _checked_name(namespace, key, "get_document")
        if tx is not None:
            return _read(connection_of(tx, "get_document"), namespace, key)
        with self._database.reading("get_document") as db:
            return _read(db, namespace, key)

    def put(
        self,
        namespace: str,
        key: str,
        value: Mapping[str, object],
        *,
        expected_version: int | None,
        tx: Transaction | None = None,
    ) -> Document:
        """Write ``value`` (a JSON object) under ``(namespace, key)`` if the stored version is as expected.

        The check and the write are one step, so of two writers that read the same version exactly one
        succeeds. With ``tx``, the write commits with that run's other changes (it leaves the run's
        ``updated_at`` alone: a document belongs to no run), and a conflict left to propagate out of the
        ``with`` block rolls them all back.

        Args:
            namespace: the kind of document; a non-empty string.
            key: the document's name; a non-empty string.
            value: the new content, replacing the old one whole.
            expected_version: the version read before the change; None to create a document that must not
                exist yet.
            tx: a run's transaction to write in, or None for a transaction of its own.

        Returns:
            The document as stored, with its new version.

        Raises:
            DocumentConflict: the stored version is not ``expected_version``; nothing changed.
            ConfigError: a bad argument.
        """
        if tx is not None:
            return _write(
                connection_of(tx, "put_document"),
                self._database.now(),
                namespace,
                key,
                value,
                expected_version,
            )
        with self._database.writing("put_document") as db:
            return _write(db, self._database.now(), namespace, key, value, expected_version)


def _checked_name(namespace: object, key: object, what: str) -> tuple[str, str]:
    return (
        checks.text(namespace, f"{what}: namespace", empty=False),
        checks.text(key, f"{what}: key", empty=False),
    )


def _checked_version(expected_version: object, what: str) -> int | None:
    if expected_version is None:
        return None
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 1:
        raise ConfigError(
            f"{what}: expected_version: expected None (create a new document) or an integer >= 1; "
            f"found {expected_version!r}"
        )
    return expected_version


def _read(db: Db, namespace: str, key: str) -> Document | None:
    row = db.one(_SELECT, (namespace, key))
    return None if row is None else _DOCUMENTS.read(row)


def _write(
    db: Db, now: float, namespace: str, key: str, value: Mapping[str, object], expected_version: int | None
) -> Document:
    what = "put_document"
    namespace, key = _checked_name(namespace, key, what)
    expected = _checked_version(expected_version, what)
    value_json = checks.json_object(value, f"{what}: value")
    if expected is None:
        # An insert that does nothing on a taken key rather than a read first: the statement itself is the
        # compare-and-set.
        changed = db.run(
            "INSERT INTO documents (namespace, key, value, version, updated_at) VALUES (?, ?, ?, 1, ?) "
            "ON CONFLICT (namespace, key) DO NOTHING",
            (namespace, key, value_json, now),
        )
    else:
        changed = db.run(
            "UPDATE documents SET value = ?, version = version + 1, updated_at = ? "
            "WHERE namespace = ? AND key = ? AND version = ?",
            (value_json, now, namespace, key, expected),
        )
    stored = _read(db, namespace, key)
    if changed != 1 or stored is None:
        raise _conflict(namespace, key, expected, stored)
    return stored


def _conflict(namespace: str, key: str, expected: int | None, current: Document | None) -> DocumentConflict:
    wanted = "no document yet" if expected is None else f"version {expected}"
    found = "none" if current is None else f"version {current.version}"
    return DocumentConflict(
        f"put_document: document {key!r} in namespace {namespace!r} changed since it was read: expected "
        f"{wanted}, found {found}; nothing was written: read it again and reapply the change",
        namespace=namespace,
        key=key,
        expected_version=expected,
        current=current,
    )


__all__ = ["COMPONENT", "Document", "DocumentConflict", "Documents"]
