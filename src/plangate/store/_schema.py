"""The store's tables, each described once for both backends, and the core's append-only list of migrations.

For: ``MIGRATIONS`` (the index in the list, plus one, is the schema version; ``SCHEMA_VERSION`` is its
length) and the tables they create. Not for: running them (``store/_migrate.py``) or queries. Never edit a
migration that has shipped; append a new one (``tests/store/fixtures`` freezes the schema of each version on
both backends).

Migrations 2, 3 and 6 made the tables of documents, bearer tokens and copilot conversations, which their
repositories own now (``store/documents.py``, ``server/tokens.py``, ``copilot/_conversations.py``), each
with a list of migrations of its own that starts from what the core made here (``FromCore``). Those tables
stay described here, as the core made them: a store still gets them from these migrations, and two of the
repositories sit above the store, where the core cannot reach.
"""

from __future__ import annotations

from plangate.store.ddl import (
    BIGINT,
    BOOLEAN,
    INTEGER,
    JSON,
    POSITION,
    REAL,
    TEXT,
    AddColumn,
    AddIndex,
    Column,
    Create,
    Fill,
    Index,
    Migration,
    Table,
)

_RUN = ("runs", "id")
_RUN_KINDS = ("formula", "agent", "ask")
_RUN_STATUSES = ("queued", "running", "waiting", "completed", "failed", "aborted", "exhausted", "cancelled")
_TURN_STATUSES = ("failed", "cancelled", "unusable", "partial", "done")

RUNS = Table(
    "runs",
    (
        # pos orders runs for listing and cursors
        Column("pos", POSITION),
        Column("id", TEXT, unique=True),
        Column("kind", TEXT, choices=_RUN_KINDS),
        Column("name", TEXT),
        Column("owner", TEXT),
        Column("parent_run_id", TEXT, nullable=True, references=_RUN),
        Column("status", TEXT, choices=_RUN_STATUSES),
        Column("input", JSON),
        Column("outcome", JSON, nullable=True),
        Column("last_seq", BIGINT, default=0),
        Column("created_at", REAL),
        Column("updated_at", REAL),
        Column("lease_owner", TEXT, nullable=True),
        Column("lease_expires_at", REAL, nullable=True),
    ),
    indexes=(
        Index("runs_by_status", ("status", "pos")),
        Index("runs_by_owner", ("owner", "pos")),
        Index("runs_by_parent", ("parent_run_id", "pos")),
    ),
)
EVENTS = Table(
    "events",
    (
        Column("run_id", TEXT, references=_RUN),
        Column("seq", BIGINT),
        Column("type", TEXT),
        Column("payload", JSON),
        Column("at", REAL),
    ),
    primary_key=("run_id", "seq"),
)
SNAPSHOTS = Table(
    "snapshots",
    (
        Column("run_id", TEXT, primary_key=True, references=_RUN),
        Column("version", INTEGER),
        Column("seq", BIGINT),
        Column("state", JSON),
        Column("updated_at", REAL),
    ),
)
INTERACTIONS = Table(
    "interactions",
    (
        Column("pos", POSITION),
        Column("id", TEXT, unique=True),
        Column("run_id", TEXT, references=_RUN),
        Column("kind", TEXT, choices=("ask_user", "confirm", "plan_consent", "approval")),
        Column("status", TEXT, choices=("open", "resolved", "expired")),
        Column("prompt", TEXT),
        Column("tool_name", TEXT, nullable=True),
        Column("tool_arguments", JSON, nullable=True),
        Column("tool_arguments_digest", TEXT, nullable=True),
        Column("step_id", TEXT, nullable=True),
        Column("created_at", REAL),
        Column("resolved_at", REAL, nullable=True),
        Column("resolved_by", TEXT, nullable=True),
        Column("resolution", JSON, nullable=True),
    ),
    indexes=(
        Index("interactions_by_run", ("run_id", "status")),
        Index("interactions_by_status", ("status", "pos")),
    ),
)
RECEIPTS = Table(
    "receipts",
    (
        Column("pos", POSITION),
        Column("run_id", TEXT, references=_RUN),
        Column("step_index", INTEGER),
        Column("source", TEXT, choices=("tool_observation", "write_receipt", "user_reply")),
        Column("name", TEXT),
        Column("arguments_digest", TEXT),
        Column("success", BOOLEAN),
        Column("summary", TEXT),
        Column("at", REAL),
    ),
    indexes=(Index("receipts_by_run", ("run_id", "pos")),),
)
WRITE_INTENTS = Table(
    "write_intents",
    (
        Column("key", TEXT, primary_key=True),
        Column("run_id", TEXT, references=_RUN),
        Column("tool", TEXT),
        Column("arguments_digest", TEXT),
        Column("status", TEXT, choices=("intent", "done")),
        Column("result", JSON, nullable=True),
        Column("created_at", REAL),
        Column("completed_at", REAL, nullable=True),
    ),
    indexes=(Index("write_intents_by_run", ("run_id", "status")),),
)

# -- made here, owned by their repositories now -------------------------------------------------------------

DOCUMENTS = Table(
    "documents",
    (
        Column("namespace", TEXT),
        Column("key", TEXT),
        Column("value", JSON),
        Column("version", INTEGER, at_least=1),
        Column("updated_at", REAL),
    ),
    primary_key=("namespace", "key"),
)
TOKENS = Table(
    "tokens",
    (
        Column("pos", POSITION),
        Column("id", TEXT, unique=True),
        Column("owner", TEXT),
        Column("name", TEXT),
        Column("token_hash", TEXT, unique=True),
        Column("created_at", REAL),
        Column("revoked_at", REAL, nullable=True),
    ),
    indexes=(Index("tokens_by_owner", ("owner", "pos")),),
)
CONVERSATIONS = Table(
    "conversations",
    (
        Column("pos", POSITION),
        Column("id", TEXT, unique=True),
        Column("owner", TEXT),
        Column("title", TEXT),
        Column("created_at", REAL),
        Column("updated_at", REAL),
    ),
    indexes=(Index("conversations_by_owner", ("owner", "updated_at")),),
)
TURNS = Table(
    "turns",
    (
        Column("pos", POSITION),
        Column("id", TEXT, unique=True),
        Column("conversation_id", TEXT, references=("conversations", "id")),
        Column("run_id", TEXT, unique=True, references=_RUN),
        Column("owner", TEXT),
        Column("question", TEXT),
        Column("status", TEXT, choices=_TURN_STATUSES),
        Column("reason", TEXT),
        Column("answer", TEXT),
        Column("result", JSON),
        Column("formula", JSON, nullable=True),
        Column("source", TEXT),
        Column("model", TEXT),
        Column("created_at", REAL),
        Column("finished_at", REAL),
    ),
    indexes=(Index("turns_by_conversation", ("conversation_id", "pos")),),
)
ATTEMPTS = Table(
    "attempts",
    (
        Column("turn_id", TEXT, references=("turns", "id")),
        Column("n", INTEGER, at_least=1),
        Column("status", TEXT, choices=_TURN_STATUSES),
        Column("reason", TEXT),
        Column("review", JSON),
        Column("formula", JSON, nullable=True),
        Column("run_id", TEXT, nullable=True, references=_RUN),
        Column("answer", TEXT),
        Column("result", JSON),
        Column("issues", JSON),
        Column("started_at", REAL),
        Column("finished_at", REAL),
    ),
    primary_key=("turn_id", "n"),
)

SCHEMA_VERSIONS = Table(
    "schema_versions",
    (Column("component", TEXT, primary_key=True), Column("version", INTEGER, at_least=1)),
)
"""The version of each component's own tables (``store/_migrate.py``); the core's stays in
``schema_version``, where every release looks for it."""

# Each fork or retry named its origin in its input before migration 8 made a column of it.
_ORIGINS_SQLITE = (
    "UPDATE runs SET origin_run_id = COALESCE(json_extract(input, '$.forked_from.run_id'), "
    "json_extract(input, '$.retried_from.run_id')) "
    "WHERE input LIKE '%forked_from%' OR input LIKE '%retried_from%'"
)
_ORIGINS_POSTGRESQL = (
    "UPDATE runs SET origin_run_id = COALESCE(input -> 'forked_from' ->> 'run_id', "
    "input -> 'retried_from' ->> 'run_id') "
    "WHERE input::text LIKE '%forked_from%' OR input::text LIKE '%retried_from%'"
)

MIGRATIONS: tuple[Migration, ...] = (
    # 1: runs and their events, snapshots, interactions, receipts and write intents.
    (
        Create(RUNS),
        Create(EVENTS),
        Create(SNAPSHOTS),
        Create(INTERACTIONS),
        Create(RECEIPTS),
        Create(WRITE_INTENTS),
    ),
    # 2: small versioned documents that belong to no run (a week planner), written by compare-and-set.
    (Create(DOCUMENTS),),
    # 3: bearer tokens, by hash (never the token), each speaking for one owner until revoked.
    (Create(TOKENS),),
    # 4: the lease's generation, one more each time the lease changes hands, which fences commits.
    (AddColumn("runs", Column("lease_generation", BIGINT, default=0)),),
    # 5: what a receipt's call returned (the tool's JSON data or observation, a person's answer), or NULL
    # (nothing recorded, as for every receipt written before), for done_when conditions on receipts.
    (AddColumn("receipts", Column("output", JSON, nullable=True)),),
    # 6: copilot conversations, their turns (one per ask run, written whole when it ends) and each turn's
    # attempts (the first try and its retry).
    (Create(CONVERSATIONS), Create(TURNS), Create(ATTEMPTS)),
    # 7: the versions of the components that keep migrations of their own (documents, tokens,
    # conversations), so that each goes on from the tables the core made for it.
    (Create(SCHEMA_VERSIONS),),
    # 8: the run a fork or a retry was made from (its origin: no reference, so that pruning an origin keeps
    # its forks), indexed so that a run's forks and retries are listed without reading every run; the forks
    # and retries made before get theirs from their input.
    (
        AddColumn("runs", Column("origin_run_id", TEXT, nullable=True)),
        AddIndex("runs", Index("runs_by_origin", ("origin_run_id", "pos"))),
        Fill(_ORIGINS_SQLITE, _ORIGINS_POSTGRESQL),
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The core schema version this plangate writes."""

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]
