"""The PostgreSQL data source (optional: ``pip install "plangate[postgres]"``), queried read-only.

Least privilege, checked when the source is first opened (:meth:`PostgresSource.vet`): a role that is a
superuser (or may become one), has ``REPLICATION`` or ``BYPASSRLS``, belongs to a predefined role that
writes or reaches the server's files, or can write to the source's tables or create objects in its schemas,
is refused with the SQL that makes a read-only role — unless the operator allowed it (``allow_privileged``;
then a warning is logged once per source). So is a database that holds plangate's own tables, or that is one
of the databases the caller names as never to be queried (the server's own store), compared by the
cluster's identity and the database, never by URL text.

Second wall behind the SQL guard: every connection starts with ``default_transaction_read_only=on``, a
``statement_timeout`` and a ``search_path`` of the source's schemas only; every query runs in a ``READ
ONLY`` transaction and is rolled back. The server enforces the time limit; a watchdog cancels the query from
the client too, shortly after the deadline, should the server not (a stalled connection, rows still
arriving). A value over the value limit (``QueryLimits.max_value_bytes``) is shown as NULL and counted, so
the result says so. Connection URLs carry passwords, so they never appear in messages; :meth:`describe`
shows the URL with the password masked. Only this module imports psycopg, and only when a source is built.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from plangate.errors import ConfigError
from plangate.tools.data.results import (
    Cell,
    ColumnInfo,
    DataSourceError,
    ForeignKey,
    QueryLimits,
    QueryRefused,
    QueryResult,
    QueryTimeout,
    SchemaInfo,
    SourceForbidden,
    TableInfo,
)
from plangate.tools.sql_guard import check_read_only

logger = logging.getLogger("plangate.data")

URL_SCHEMES = ("postgresql", "postgres")
_T = TypeVar("_T")
_GRACE_S = 1.0
"""How long after the deadline the client cancels a query the server has not stopped."""

_TABLES_SQL = """
SELECT c.table_schema, c.table_name, c.column_name, c.data_type, c.is_nullable = 'YES',
       t.table_type
FROM information_schema.columns c
JOIN information_schema.tables t USING (table_schema, table_name)
WHERE c.table_schema = ANY(%s)
ORDER BY c.table_schema, c.table_name, c.ordinal_position
"""
# From the catalog, not information_schema: its constraint views show only the tables a role owns, and a
# source's role should own none.
_KEYS_SQL = """
SELECT n.nspname, c.relname,
       CASE con.contype WHEN 'p' THEN 'PRIMARY KEY' ELSE 'FOREIGN KEY' END,
       a.attname, rc.relname, ra.attname
FROM pg_catalog.pg_constraint con
JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, position)
JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
LEFT JOIN pg_catalog.pg_class rc ON rc.oid = con.confrelid
LEFT JOIN pg_catalog.pg_attribute ra
  ON ra.attrelid = con.confrelid AND ra.attnum = con.confkey[k.position]
WHERE con.contype IN ('p', 'f') AND n.nspname = ANY(%s)
ORDER BY n.nspname, c.relname, con.conname, k.position
"""
_IDENTITY_SQL = """
SELECT current_database(), pg_postmaster_start_time()::text, d.oid::bigint,
       has_function_privilege('pg_control_system()', 'EXECUTE')
FROM pg_database d WHERE d.datname = current_database()
"""
_SYSTEM_ID_SQL = "SELECT system_identifier::text FROM pg_control_system()"
_STORE_TABLES_SQL = """
SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND c.relname IN ('runs', 'events', 'interactions', 'write_intents')
GROUP BY n.nspname HAVING count(DISTINCT c.relname) = 4 LIMIT 1
"""
_SCHEMAS_SQL = """
SELECT n.nspname FROM pg_namespace n
WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
  AND has_schema_privilege(n.oid, 'USAGE')
ORDER BY n.nspname <> 'public', n.nspname
"""
_ROLE_SQL = """
SELECT current_user,
       bool_or(r.rolsuper) FILTER (WHERE pg_has_role(current_user, r.oid, 'MEMBER')),
       bool_or(r.rolreplication) FILTER (WHERE r.rolname = current_user),
       bool_or(r.rolbypassrls) FILTER (WHERE r.rolname = current_user),
       array_agg(r.rolname ORDER BY r.rolname) FILTER (
           WHERE r.rolname = ANY(%s) AND pg_has_role(current_user, r.oid, 'USAGE'))
FROM pg_roles r
"""
_WRITABLE_SQL = """
SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
UNION ALL
SELECT 'schema ' || n.nspname FROM pg_namespace n
WHERE n.nspname = ANY(%s) AND has_schema_privilege(n.oid, 'CREATE')
UNION ALL
SELECT 'database ' || current_database() WHERE has_database_privilege(current_database(), 'CREATE')
LIMIT 5
"""
_WRITING_ROLES = (
    "pg_write_all_data", "pg_write_server_files", "pg_read_server_files", "pg_execute_server_program",
)
"""Predefined roles that write every table or reach the server's files and programs."""
_warned: set[str] = set()
_warned_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class DatabaseIdentity:
    """Which database of which running PostgreSQL cluster a connection reached, whatever its URL said.

    Attributes:
        database: ``current_database()``.
        oid: the database's oid in its cluster.
        started_at: when the cluster's server started (``pg_postmaster_start_time()``), readable by any role.
        system_identifier: the cluster's identifier (``pg_control_system()``), when the role may read it.
    """

    database: str
    oid: int
    started_at: str
    system_identifier: str | None = None

    def same_as(self, other: DatabaseIdentity) -> bool:
        """Whether both name one database: the same database of the same cluster."""
        if (self.database, self.oid) != (other.database, other.oid):
            return False
        if self.system_identifier is not None and other.system_identifier is not None:
            return self.system_identifier == other.system_identifier
        return self.started_at == other.started_at


def read_identity(cursor: Any) -> DatabaseIdentity:
    """The identity of the database ``cursor``'s connection is on (two statements, no privilege needed)."""
    cursor.execute(_IDENTITY_SQL)
    database, started_at, oid, may_read_system = cursor.fetchone()
    system_identifier = None
    if may_read_system:
        cursor.execute(_SYSTEM_ID_SQL)
        system_identifier = str(cursor.fetchone()[0])
    return DatabaseIdentity(str(database), int(oid), str(started_at), system_identifier)


def identity_of(url: str) -> DatabaseIdentity:
    """The identity of the database at ``url`` (the server's own store, say).

    Raises:
        ConfigError: psycopg is not installed.
        DataSourceError: the database cannot be reached.
    """
    psycopg = import_psycopg()
    try:
        with psycopg.connect(url, connect_timeout=10, autocommit=True) as connection:
            with connection.cursor() as cursor:
                return read_identity(cursor)
    except psycopg.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataSourceError(f"cannot read the database at {mask_password(url)}: {first}") from None


def read_only_role_sql(database: str, schemas: Sequence[str], role: str = "plangate_reader") -> str:
    """The statements that make a role which may only read ``schemas`` of ``database``."""
    lines = [
        f"CREATE ROLE {role} LOGIN PASSWORD '…';",
        f"GRANT CONNECT ON DATABASE {_quote(database)} TO {role};",
    ]
    for schema in schemas or ("public",):
        lines += [
            f"GRANT USAGE ON SCHEMA {_quote(schema)} TO {role};",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {_quote(schema)} TO {role};",
        ]
    return " ".join(lines)


def import_psycopg() -> ModuleType:
    """Import psycopg, or explain which extra installs it.

    Raises:
        ConfigError: psycopg is not installed.
    """
    try:
        return importlib.import_module("psycopg")
    except ImportError:
        raise ConfigError(
            'PostgreSQL data sources need psycopg: pip install "plangate[postgres]"'
        ) from None


def mask_password(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresSource:
    """A PostgreSQL database reached by URL, vetted when first opened, queried in read-only transactions.

    Args:
        name: the name the tools use for this source.
        url: a ``postgresql://`` URL.
        schemas: the schemas questions may read (the ``search_path``); None: every schema the role may use
            (``public`` first), read when the source is first opened.
        allow_privileged: query it even though its role can do more than read (the operator's explicit
            choice; a warning is logged once per source).
        never: databases this source must not be (the server's own store): opening it refuses them.

    Raises:
        ConfigError: psycopg is not installed or the URL is not a PostgreSQL URL.
    """

    dialect: Literal["postgres"] = "postgres"

    def __init__(
        self,
        name: str,
        url: str,
        *,
        schemas: Sequence[str] | None = None,
        allow_privileged: bool = False,
        never: Collection[DatabaseIdentity] = (),
    ) -> None:
        if urlsplit(url).scheme not in URL_SCHEMES:
            raise ConfigError(
                f"data source {name!r}: expected a postgresql:// URL, got {mask_password(url)!r}"
            )
        self._psycopg = import_psycopg()
        self.name = name
        self._url = url
        self._schemas: tuple[str, ...] | None = tuple(schemas) if schemas else None
        self._allow_privileged = allow_privileged
        self._never = tuple(never)
        self._vetted = False
        self._vet_lock = threading.Lock()

    def describe(self) -> str:
        """Where the data lives, with the password masked."""
        return mask_password(self._url)

    @property
    def schemas(self) -> tuple[str, ...]:
        """The schemas questions read (empty until the source was first opened, unless they were given)."""
        return self._schemas or ()

    def query(self, sql: str, limits: QueryLimits) -> QueryResult:
        """Run one read-only query within ``limits``.

        Raises:
            QueryRefused: the SQL guard refused the query.
            QueryTimeout: the query ran past ``limits.timeout_s``.
            SourceForbidden: the source may not be queried (its role, or it is plangate's own data).
            DataSourceError: the server rejected the query or could not be reached.
        """
        self.vet(limits)
        verdict = check_read_only(sql, self.dialect, schemas=self.schemas)
        if not verdict.allowed:
            raise QueryRefused(verdict.reason)
        return self.run_unguarded(sql, limits)

    def run_unguarded(self, sql: str, limits: QueryLimits) -> QueryResult:
        """Run ``sql`` on a read-only connection of the vetted source without the SQL guard.

        Only for tests that prove the second wall holds on its own; tools always go through :meth:`query`.
        """
        self.vet(limits)

        def fetch(cursor: Any) -> QueryResult:
            cursor.execute(sql)
            columns = [str(column.name) for column in cursor.description or ()]
            cells = _Cells(limits.max_value_bytes)
            rows: list[tuple[Cell, ...]] = [cells.of(row) for row in cursor.fetchmany(limits.max_rows + 1)]
            return QueryResult(
                columns,
                rows[: limits.max_rows],
                more_rows=len(rows) > limits.max_rows,
                clipped_values=cells.clipped,
            )

        return self._read(limits, fetch)

    def schema(self, limits: QueryLimits) -> SchemaInfo:
        """The source's tables and views, with columns, keys and exact row counts of tables.

        Raises:
            SourceForbidden: the source may not be queried.
            DataSourceError: the server could not be reached.
        """
        self.vet(limits)
        return SchemaInfo(self.name, self.dialect, self._read(limits, self._tables))

    def vet(self, limits: QueryLimits) -> None:
        """Check, once, that this source may be queried: not plangate's own data, a role that only reads.

        Raises:
            SourceForbidden: it is the server's own store or holds plangate's tables, or its role can do
                more than read and the operator did not allow that.
            DataSourceError: the server could not be reached.
        """
        with self._vet_lock:
            if not self._vetted:
                self._read(limits, self._vet, vetting=True)
                self._vetted = True

    def _vet(self, cursor: Any) -> None:
        identity = read_identity(cursor)
        if any(identity.same_as(other) for other in self._never):
            raise SourceForbidden(
                "store", f"data source {self.name!r} is the server's own store, not data"
            )
        cursor.execute(_STORE_TABLES_SQL)
        found = cursor.fetchone()
        if found is not None:
            raise SourceForbidden(
                "store",
                f"data source {self.name!r}: the database holds a plangate store (schema {found[0]!r}), "
                "not data",
            )
        if self._schemas is None:
            cursor.execute(_SCHEMAS_SQL)
            self._schemas = tuple(str(row[0]) for row in cursor.fetchall())
        rights = _rights(cursor, self._schemas)
        if not rights:
            return
        if not self._allow_privileged:
            raise SourceForbidden(
                "privileged",
                f"data source {self.name!r}: the role {rights[0]} {'; '.join(rights[1:])}, so a question "
                f"could change or leak what it should not. Connect as a role that may only read, e.g. "
                f"{read_only_role_sql(identity.database, self._schemas)} (or, if you accept the risk, set "
                "allow_privileged = true for this source)",
            )
        key = f"{self.name}@{self.describe()}"
        with _warned_lock:
            if key not in _warned:
                _warned.add(key)
                logger.warning(
                    "data source %r (%s): the role %s %s; queried anyway, as allow_privileged says",
                    self.name, self.describe(), rights[0], "; ".join(rights[1:]),
                )

    def _tables(self, cursor: Any) -> list[TableInfo]:
        return _read_tables(cursor, list(self.schemas))

    def _options(self, limits: QueryLimits) -> str:
        """The connection's own settings, after any the URL gave (so that these win)."""
        conninfo = self._psycopg.conninfo.conninfo_to_dict(self._url)
        given = str(conninfo.get("options") or "")
        timeout_ms = max(1, int(limits.timeout_s * 1000))
        settings = [f"-c default_transaction_read_only=on -c statement_timeout={timeout_ms}"]
        if self._schemas:
            settings.append("-c search_path=" + _options_value(",".join(_quote(s) for s in self._schemas)))
        return " ".join([given, *settings]).strip()

    def _read(self, limits: QueryLimits, fetch: Callable[[Any], _T], *, vetting: bool = False) -> _T:
        psycopg = self._psycopg
        timeout_ms = max(1, int(limits.timeout_s * 1000))
        try:
            with psycopg.connect(
                self._url, connect_timeout=10, autocommit=False, options=self._options(limits)
            ) as connection:
                connection.read_only = True
                watchdog = threading.Timer(limits.timeout_s + _GRACE_S, connection.cancel_safe)
                watchdog.daemon = True
                watchdog.start()
                try:
                    with connection.cursor() as cursor:
                        # The vetting reads the catalogs by their full names, whatever the path is.
                        path = "pg_catalog" if vetting else ",".join(_quote(s) for s in self.schemas)
                        cursor.execute(
                            "SELECT set_config('statement_timeout', %s, true), "
                            "set_config('search_path', %s, true)",
                            (str(timeout_ms), path or "pg_catalog"),
                        )
                        return fetch(cursor)
                finally:
                    watchdog.cancel()
                    connection.rollback()
        except psycopg.errors.QueryCanceled:
            raise QueryTimeout(limits.timeout_s) from None
        except psycopg.Error as exc:
            # psycopg messages can quote the connection string; keep the first line, the URL masked.
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            message = first.replace(self._url, self.describe())
            raise DataSourceError(f"data source {self.name!r}: {message}") from None


def _rights(cursor: Any, schemas: Sequence[str]) -> list[str]:
    """What the connection's role may do beyond reading: its name, then each right found (none: [])."""
    cursor.execute(_ROLE_SQL, (list(_WRITING_ROLES),))
    role, superuser, replication, bypassrls, writing_roles = cursor.fetchone()
    if superuser:  # every other right comes with it
        return [repr(str(role)), "is a superuser (or may become one)"]
    found = []
    if replication:
        found.append("has REPLICATION")
    if bypassrls:
        found.append("has BYPASSRLS")
    if writing_roles:
        found.append("is a member of " + ", ".join(writing_roles))
    cursor.execute(_WRITABLE_SQL, (list(schemas), list(schemas)))
    writable = [str(row[0]) for row in cursor.fetchall()]
    if writable:
        found.append("can write to or create in " + ", ".join(writable))
    return [repr(str(role)), *found] if found else []


def _options_value(text: str) -> str:
    """``text`` as one value of libpq's ``options`` (spaces and backslashes escaped)."""
    return text.replace("\\", "\\\\").replace(" ", "\\ ")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _read_tables(cursor: Any, schemas: list[str]) -> list[TableInfo]:
    cursor.execute(_TABLES_SQL, (schemas,))
    tables: dict[tuple[str, str], TableInfo] = {}
    for schema, table, column, kind, nullable, table_type in cursor.fetchall():
        if (schema, table) not in tables:
            label = table if schema == "public" else f"{schema}.{table}"
            tables[(schema, table)] = TableInfo(label, "view" if table_type == "VIEW" else "table", [])
        tables[(schema, table)].columns.append(ColumnInfo(column, kind, bool(nullable)))
    cursor.execute(_KEYS_SQL, (schemas,))
    primary: set[tuple[str, str, str]] = set()
    for schema, table, constraint, column, ref_table, ref_column in cursor.fetchall():
        if (schema, table) not in tables:
            continue
        if constraint == "PRIMARY KEY":
            primary.add((schema, table, column))
        else:
            tables[(schema, table)].foreign_keys.append(ForeignKey(column, ref_table, ref_column))
    result = []
    for (schema, table), info in tables.items():
        columns = [
            ColumnInfo(c.name, c.type, c.nullable, (schema, table, c.name) in primary) for c in info.columns
        ]
        count = None
        if info.kind == "table":
            cursor.execute(f"SELECT count(*) FROM {_quote(schema)}.{_quote(table)}")
            count = int(cursor.fetchone()[0])
        result.append(TableInfo(info.name, info.kind, columns, info.foreign_keys, count))
    return result


class _Cells:
    """Rows as cells; a text or binary value over ``limit`` bytes becomes NULL, counted in ``clipped``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.clipped = 0

    def of(self, row: tuple[Any, ...]) -> tuple[Cell, ...]:
        return tuple(self._cell(value) for value in row)

    def _cell(self, value: Any) -> Cell:
        cell: Cell = value if value is None or isinstance(value, int | float | str | bytes) else str(value)
        # Characters, not bytes, for text: a UTF-8 character is at least one byte, so this never clips early.
        if isinstance(cell, str | bytes) and len(cell) > self.limit:
            self.clipped += 1
            return None
        return cell


__all__ = [
    "URL_SCHEMES",
    "DatabaseIdentity",
    "PostgresSource",
    "identity_of",
    "import_psycopg",
    "mask_password",
    "read_identity",
    "read_only_role_sql",
]
