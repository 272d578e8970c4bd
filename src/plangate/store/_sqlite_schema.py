"""The SQLite store's schema: an append-only list of migrations, the position in the list being the version.

For: creating and upgrading a store file, and refusing one written by a newer plangate. Not for: queries
(``store/sqlite.py``). Never edit a migration that has shipped; append a new one (tests freeze the schema).
"""

from __future__ import annotations

import sqlite3

from plangate.errors import SchemaVersionError

# Each migration is a tuple of statements (not a script): ``executescript`` would commit on its own and break
# the all-or-nothing upgrade below.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: runs and their events, snapshots, interactions, receipts and write intents.
    (
        # pos orders runs for listing and cursors; AUTOINCREMENT so that a cursor never meets a reused value.
        """CREATE TABLE runs (
            pos INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL CHECK (kind IN ('formula', 'agent', 'ask')),
            name TEXT NOT NULL,
            owner TEXT NOT NULL,
            parent_run_id TEXT REFERENCES runs (id),
            status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'waiting', 'completed', 'failed',
                                                   'aborted', 'exhausted', 'cancelled')),
            input TEXT NOT NULL,
            outcome TEXT,
            last_seq INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            lease_owner TEXT,
            lease_expires_at REAL
        )""",
        "CREATE INDEX runs_by_status ON runs (status, pos)",
        "CREATE INDEX runs_by_owner ON runs (owner, pos)",
        "CREATE INDEX runs_by_parent ON runs (parent_run_id, pos)",
        """CREATE TABLE events (
            run_id TEXT NOT NULL REFERENCES runs (id),
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            payload TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        """CREATE TABLE snapshots (
            run_id TEXT PRIMARY KEY REFERENCES runs (id),
            version INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            updated_at REAL NOT NULL
        )""",
        """CREATE TABLE interactions (
            pos INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            run_id TEXT NOT NULL REFERENCES runs (id),
            kind TEXT NOT NULL CHECK (kind IN ('ask_user', 'confirm', 'plan_consent', 'approval')),
            status TEXT NOT NULL CHECK (status IN ('open', 'resolved', 'expired')),
            prompt TEXT NOT NULL,
            tool_name TEXT,
            tool_arguments TEXT,
            tool_arguments_digest TEXT,
            step_id TEXT,
            created_at REAL NOT NULL,
            resolved_at REAL,
            resolved_by TEXT,
            resolution TEXT
        )""",
        "CREATE INDEX interactions_by_run ON interactions (run_id, status)",
        "CREATE INDEX interactions_by_status ON interactions (status, pos)",
        """CREATE TABLE receipts (
            pos INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL REFERENCES runs (id),
            step_index INTEGER NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('tool_observation', 'write_receipt', 'user_reply')),
            name TEXT NOT NULL,
            arguments_digest TEXT NOT NULL,
            success INTEGER NOT NULL,
            summary TEXT NOT NULL,
            at REAL NOT NULL
        )""",
        "CREATE INDEX receipts_by_run ON receipts (run_id, pos)",
        """CREATE TABLE write_intents (
            key TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs (id),
            tool TEXT NOT NULL,
            arguments_digest TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('intent', 'done')),
            result TEXT,
            created_at REAL NOT NULL,
            completed_at REAL
        )""",
        "CREATE INDEX write_intents_by_run ON write_intents (run_id, status)",
    ),
    # 2: small versioned documents that belong to no run (a week planner), written by compare-and-set.
    (
        """CREATE TABLE documents (
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            version INTEGER NOT NULL CHECK (version >= 1),
            updated_at REAL NOT NULL,
            PRIMARY KEY (namespace, key)
        ) WITHOUT ROWID""",
    ),
    # 3: bearer tokens, by hash (never the token), each speaking for one owner until revoked.
    (
        """CREATE TABLE tokens (
            pos INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL,
            name TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at REAL NOT NULL,
            revoked_at REAL
        )""",
        "CREATE INDEX tokens_by_owner ON tokens (owner, pos)",
    ),
    # 4: the lease's generation, one more each time the lease changes hands, which fences commits.
    ("ALTER TABLE runs ADD COLUMN lease_generation INTEGER NOT NULL DEFAULT 0",),
    # 5: what a receipt's call returned (the tool's JSON data or observation, a person's answer), as JSON text
    # (NULL: nothing recorded, as for every receipt written before), for done_when conditions on receipts.
    ("ALTER TABLE receipts ADD COLUMN output TEXT",),
    # 6: copilot conversations, their turns (one per ask run, written whole when it ends) and each turn's
    # attempts (the first try and its retry).
    (
        """CREATE TABLE conversations (
            pos INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL,
            title TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        "CREATE INDEX conversations_by_owner ON conversations (owner, updated_at)",
        """CREATE TABLE turns (
            pos INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            conversation_id TEXT NOT NULL REFERENCES conversations (id),
            run_id TEXT NOT NULL UNIQUE REFERENCES runs (id),
            owner TEXT NOT NULL,
            question TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('failed', 'cancelled', 'unusable', 'partial', 'done')),
            reason TEXT NOT NULL,
            answer TEXT NOT NULL,
            result TEXT NOT NULL,
            formula TEXT,
            source TEXT NOT NULL,
            model TEXT NOT NULL,
            created_at REAL NOT NULL,
            finished_at REAL NOT NULL
        )""",
        "CREATE INDEX turns_by_conversation ON turns (conversation_id, pos)",
        """CREATE TABLE attempts (
            turn_id TEXT NOT NULL REFERENCES turns (id),
            n INTEGER NOT NULL CHECK (n >= 1),
            status TEXT NOT NULL CHECK (status IN ('failed', 'cancelled', 'unusable', 'partial', 'done')),
            reason TEXT NOT NULL,
            review TEXT NOT NULL,
            formula TEXT,
            run_id TEXT REFERENCES runs (id),
            answer TEXT NOT NULL,
            result TEXT NOT NULL,
            issues TEXT NOT NULL,
            started_at REAL NOT NULL,
            finished_at REAL NOT NULL,
            PRIMARY KEY (turn_id, n)
        ) WITHOUT ROWID""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this plangate writes."""


def stored_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the database (0 for a new one)."""
    table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if table is None:
        return 0
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: sqlite3.Connection, where: str) -> int:
    """Bring the database up to ``SCHEMA_VERSION`` in one transaction; returns the version found before.

    Several processes may open a new file at once: the write lock is taken first, so only one of them runs
    the migrations and the others find them done.

    Raises:
        SchemaVersionError: the database was written by a newer plangate.
    """
    # A quick look without the write lock, so that opening an up-to-date store never waits for writers.
    if stored_version(conn) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = stored_version(conn)
        _refuse_newer(found, where)
        if found == 0:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        for script in MIGRATIONS[found:]:
            for statement in script:
                conn.execute(statement)
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found


def _refuse_newer(found: int, where: str) -> None:
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the store at {where} has schema version {found}, written by a newer plangate; this one "
            f"reads up to version {SCHEMA_VERSION}: upgrade plangate (the store was left unchanged)"
        )
