"""Reading and writing versioned documents, shared by both backends' stores and their transactions.

For: the compare-and-set rule of ``put_document``, in one place, run inside the caller's transaction. Each
statement is itself the compare-and-set (an insert that does nothing on a taken key, an update of the
expected version only), so it holds under SQLite's file lock and under PostgreSQL's row locks alike. Not
for: opening transactions or argument checks of other records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from plangate.errors import ConfigError
from plangate.store import _checks as check
from plangate.store import _rows as rows
from plangate.store._sql import Db
from plangate.store.base import Document, DocumentConflict

_SELECT = f"SELECT {rows.DOCUMENT_COLUMNS} FROM documents WHERE namespace = ? AND key = ?"


def checked_name(namespace: object, key: object, what: str) -> tuple[str, str]:
    """``(namespace, key)`` if both are non-empty strings."""
    return (
        check.text(namespace, f"{what}: namespace", empty=False),
        check.text(key, f"{what}: key", empty=False),
    )


def checked_version(expected_version: object, what: str) -> int | None:
    """``expected_version`` if it is None or an integer >= 1."""
    if expected_version is None:
        return None
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 1:
        raise ConfigError(
            f"{what}: expected_version: expected None (create a new document) or an integer >= 1; "
            f"found {expected_version!r}"
        )
    return expected_version


def read(db: Db, namespace: str, key: str) -> Document | None:
    """The stored document, or None."""
    row = db.one(_SELECT, (namespace, key))
    return None if row is None else rows.document(row)


def write(
    db: Db,
    clock: Callable[[], float],
    namespace: str,
    key: str,
    value: Mapping[str, object],
    expected_version: int | None,
) -> Document:
    """Write a document compare-and-set; the caller commits.

    Raises:
        ConfigError: a bad argument (nothing was written).
        DocumentConflict: the stored version is not ``expected_version`` (nothing was written).
    """
    what = "put_document"
    namespace, key = checked_name(namespace, key, what)
    expected = checked_version(expected_version, what)
    value_json = check.json_object(value, f"{what}: value")
    now = clock()
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
    stored = read(db, namespace, key)
    if changed != 1 or stored is None:
        raise conflict(namespace, key, expected, stored)
    return stored


def conflict(namespace: str, key: str, expected: int | None, current: Document | None) -> DocumentConflict:
    """The error of a compare-and-set write that found ``current`` where it expected version ``expected``."""
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
