"""The PostgreSQL store's schema: an append-only list of migrations, the position in the list is the version.

For: creating and upgrading the tables in the connection's schema (the first of its ``search_path``), and
refusing a database written by a newer plangate. Not for: queries (``store/postgres.py``). Never edit a
migration that has shipped; append a new one (tests freeze the schema of each version).

The versions match the SQLite store's one for one (the same tables, columns and rules in each), so that a
``SCHEMA_VERSION`` means the same logical schema on both backends. JSON columns are ``json``, which checks
the text and keeps it as written (key order included), unlike ``jsonb``.
"""

from __future__ import annotations

import psycopg
from psycopg.rows import TupleRow

from plangate.errors import SchemaVersionError

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: runs and their events, snapshots, interactions, receipts and write intents.
    (
        # pos orders runs for listing and cursors; an identity never hands out a value twice.
        """CREATE TABLE runs (
            pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            kind text NOT NULL CHECK (kind IN ('formula', 'agent', 'ask')),
            name text NOT NULL,
            owner text NOT NULL,
            parent_run_id text REFERENCES runs (id),
            status text NOT NULL CHECK (status IN ('queued', 'running', 'waiting', 'completed', 'failed',
                                                   'aborted', 'exhausted', 'cancelled')),
            input json NOT NULL,
            outcome json,
            last_seq bigint NOT NULL DEFAULT 0,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            lease_owner text,
            lease_expires_at double precision
        )""",
        "CREATE INDEX runs_by_status ON runs (status, pos)",
        "CREATE INDEX runs_by_owner ON runs (owner, pos)",
        "CREATE INDEX runs_by_parent ON runs (parent_run_id, pos)",
        """CREATE TABLE events (
            run_id text NOT NULL REFERENCES runs (id),
            seq bigint NOT NULL,
            type text NOT NULL,
            payload json NOT NULL,
            at double precision NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE snapshots (
            run_id text PRIMARY KEY REFERENCES runs (id),
            version integer NOT NULL,
            seq bigint NOT NULL,
            state json NOT NULL,
            updated_at double precision NOT NULL
        )""",
        """CREATE TABLE interactions (
            pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            run_id text NOT NULL REFERENCES runs (id),
            kind text NOT NULL CHECK (kind IN ('ask_user', 'confirm', 'plan_consent', 'approval')),
            status text NOT NULL CHECK (status IN ('open', 'resolved', 'expired')),
            prompt text NOT NULL,
            tool_name text,
            tool_arguments json,
            tool_arguments_digest text,
            step_id text,
            created_at double precision NOT NULL,
            resolved_at double precision,
            resolved_by text,
            resolution json
        )""",
        "CREATE INDEX interactions_by_run ON interactions (run_id, status)",
        "CREATE INDEX interactions_by_status ON interactions (status, pos)",
        """CREATE TABLE receipts (
            pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id text NOT NULL REFERENCES runs (id),
            step_index integer NOT NULL,
            source text NOT NULL CHECK (source IN ('tool_observation', 'write_receipt', 'user_reply')),
            name text NOT NULL,
            arguments_digest text NOT NULL,
            success boolean NOT NULL,
            summary text NOT NULL,
            at double precision NOT NULL
        )""",
        "CREATE INDEX receipts_by_run ON receipts (run_id, pos)",
        """CREATE TABLE write_intents (
            key text PRIMARY KEY,
            run_id text NOT NULL REFERENCES runs (id),
            tool text NOT NULL,
            arguments_digest text NOT NULL,
            status text NOT NULL CHECK (status IN ('intent', 'done')),
            result json,
            created_at double precision NOT NULL,
            completed_at double precision
        )""",
        "CREATE INDEX write_intents_by_run ON write_intents (run_id, status)",
    ),
    # 2: small versioned documents that belong to no run (a week planner), written by compare-and-set.
    (
        """CREATE TABLE documents (
            namespace text NOT NULL,
            key text NOT NULL,
            value json NOT NULL,
            version integer NOT NULL CHECK (version >= 1),
            updated_at double precision NOT NULL,
            PRIMARY KEY (namespace, key)
        )""",
    ),
    # 3: bearer tokens, by hash (never the token), each speaking for one owner until revoked.
    (
        """CREATE TABLE tokens (
            pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            owner text NOT NULL,
            name text NOT NULL,
            token_hash text NOT NULL UNIQUE,
            created_at double precision NOT NULL,
            revoked_at double precision
        )""",
        "CREATE INDEX tokens_by_owner ON tokens (owner, pos)",
    ),
    # 4: the lease's generation, one more each time the lease changes hands, which fences commits.
    ("ALTER TABLE runs ADD COLUMN lease_generation bigint NOT NULL DEFAULT 0",),
    # 5: what a receipt's call returned (the tool's JSON data or observation, a person's answer), or NULL
    # (nothing recorded, as for every receipt written before), for done_when conditions on receipts.
    ("ALTER TABLE receipts ADD COLUMN output json",),
    # 6: copilot conversations, their turns (one per ask run, written whole when it ends) and each turn's
    # attempts (the first try and its retry).
    (
        """CREATE TABLE conversations (
            pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            owner text NOT NULL,
            title text NOT NULL,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL
        )""",
        "CREATE INDEX conversations_by_owner ON conversations (owner, updated_at)",
        """CREATE TABLE turns (
            pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            conversation_id text NOT NULL REFERENCES conversations (id),
            run_id text NOT NULL UNIQUE REFERENCES runs (id),
            owner text NOT NULL,
            question text NOT NULL,
            status text NOT NULL CHECK (status IN ('failed', 'cancelled', 'unusable', 'partial', 'done')),
            reason text NOT NULL,
            answer text NOT NULL,
            result json NOT NULL,
            formula json,
            source text NOT NULL,
            model text NOT NULL,
            created_at double precision NOT NULL,
            finished_at double precision NOT NULL
        )""",
        "CREATE INDEX turns_by_conversation ON turns (conversation_id, pos)",
        """CREATE TABLE attempts (
            turn_id text NOT NULL REFERENCES turns (id),
            n integer NOT NULL CHECK (n >= 1),
            status text NOT NULL CHECK (status IN ('failed', 'cancelled', 'unusable', 'partial', 'done')),
            reason text NOT NULL,
            review json NOT NULL,
            formula json,
            run_id text REFERENCES runs (id),
            answer text NOT NULL,
            result json NOT NULL,
            issues json NOT NULL,
            started_at double precision NOT NULL,
            finished_at double precision NOT NULL,
            PRIMARY KEY (turn_id, n)
        )""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this plangate writes."""

# Who migrates a schema takes this lock (with the schema's name), so that of several processes opening a
# new database at once exactly one runs the migrations and the others find them done.
_LOCK_KEY = "plangate.schema."


def stored_version(conn: psycopg.Connection[TupleRow]) -> int:
    """The schema version recorded in the connection's schema (0 for a new one)."""
    row = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    found = conn.execute("SELECT version FROM schema_version").fetchone()
    return 0 if found is None else int(found[0])


def migrate(conn: psycopg.Connection[TupleRow], where: str, *, upto: int = SCHEMA_VERSION) -> int:
    """Bring the schema up to version ``upto`` in one transaction; returns the version found before.

    ``conn`` is in autocommit mode; the migrations run in a transaction of their own (PostgreSQL's DDL is
    transactional: a failed upgrade leaves the previous version whole). ``upto`` is for tests that build
    an older schema.

    Raises:
        SchemaVersionError: the database was written by a newer plangate.
        psycopg.Error: the database refused a statement (the caller explains it).
    """
    # A quick look without the lock, so that opening an up-to-date store never waits for a migration.
    found = stored_version(conn)
    _refuse_newer(found, where)
    if found >= upto:
        return found
    # The lock is taken before the transaction begins, not inside it: a transaction's catalog lookups may
    # not yet see tables that another process committed while this one waited for the lock.
    conn.execute("SELECT pg_advisory_lock(hashtext(%s || current_schema()))", (_LOCK_KEY,))
    try:
        with conn.transaction():
            found = stored_version(conn)
            _refuse_newer(found, where)
            if found == 0:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
            for script in MIGRATIONS[found:upto]:
                for statement in script:
                    conn.execute(statement)
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (max(found, upto),))
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtext(%s || current_schema()))", (_LOCK_KEY,))
    return found


def _refuse_newer(found: int, where: str) -> None:
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the store at {where} has schema version {found}, written by a newer plangate; this one "
            f"reads up to version {SCHEMA_VERSION}: upgrade plangate (the store was left unchanged)"
        )
