"""The read-only SQL guard: decide from a real parse (sqlglot) whether one query may run on a data source.

The decision is made on tokens and the syntax tree, never on regular expressions over the text: exactly
one statement, a SELECT / WITH … SELECT / VALUES / EXPLAIN at the top, no writing or session-changing node
anywhere in the tree, only functions of the dialect's allow-list (``sql_allow.py``: aggregates, math,
string, date/time, conditional, JSON reading, window functions), and no system catalog or statistics view.
It is the first wall only; the data sources also open connections that cannot write
(``tools/data/sqlite.py``, ``tools/data/postgres.py``), so a gap here still cannot change data.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.dialects.dialect import Dialect as SqlglotDialect
from sqlglot.errors import ParseError, TokenError

from plangate.errors import Signal
from plangate.tools.sql_allow import CATEGORIES, Dialect, allowed_function, system_relation

MAX_SQL_CHARS = 100_000
"""Longer queries are refused before parsing; no analytical question needs more."""

# Node types that write, change the schema or the session, or run arbitrary commands. Looked up by name so
# that a sqlglot release that renames or drops one of them does not break the import.
_FORBIDDEN_NODE_NAMES = (
    "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "AlterColumn", "RenameTable",
    "TruncateTable", "Command", "Pragma", "Attach", "Detach", "Transaction", "Commit", "Rollback", "Set",
    "SetItem", "Into", "Copy", "Use", "Analyze", "Lock", "LoadData", "Grant", "Revoke", "Comment", "Kill",
    "Refresh", "Cache", "Uncache", "Declare", "Execute", "Returning", "Describe", "Show", "Semicolon",
)
_FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = tuple(
    node for name in _FORBIDDEN_NODE_NAMES if isinstance(node := getattr(exp, name, None), type)
)

_EXPLAIN_OPTIONS: dict[str, tuple[tuple[str, ...], ...]] = {
    "sqlite": (("QUERY", "PLAN"),),
    # EXPLAIN ANALYZE runs the statement; that is safe only because what follows is checked like any query.
    "postgres": (("ANALYZE", "VERBOSE"), ("ANALYZE",), ("VERBOSE",)),
}
_TOP_LEVEL: tuple[type[exp.Expression], ...] = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery)
_STATEMENTS = (*_FORBIDDEN_NODES, *_TOP_LEVEL, exp.DDL, exp.DML)
_KEYWORDS = {"truncatetable": "TRUNCATE", "setitem": "SET", "loaddata": "LOAD DATA", "altercolumn": "ALTER"}
_IDENTIFIER_EXTRA = frozenset("_$")
_SAFE_CONTROLS = frozenset("\t\n\r\f\v")


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """Whether a query may run, and why.

    Attributes:
        allowed: true when the query is a single read-only statement.
        reason: what was found; for a refusal, what was expected and where.
    """

    allowed: bool
    reason: str


class _Token(Protocol):
    """The parts of a sqlglot token the guard reads (the class moved between sqlglot releases)."""

    @property
    def token_type(self) -> TokenType: ...

    @property
    def text(self) -> str: ...

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


class _Refused(Signal):
    """Internal: stops the check with a reason."""


def check_read_only(
    sql: str, dialect: Dialect = "sqlite", *, schemas: Collection[str] | None = None
) -> GuardVerdict:
    """Decide whether ``sql`` is one read-only query in ``dialect``.

    Args:
        sql: the query as the model wrote it.
        dialect: ``sqlite`` or ``postgres``.
        schemas: the schemas a table may be qualified with (a source's own); None: any that is not a system
            one.

    Returns:
        An allowed verdict, or a refusal whose reason says what was expected and what was found. Every
        failure to check (unparseable input, an unexpected parser error) is a refusal: the guard fails closed.
    """
    if not isinstance(sql, str):
        return GuardVerdict(False, f"expected the query as a string, got {type(sql).__name__}")
    try:
        reason = _check(sql, dialect, _lowered(schemas), allow_explain=True)
    except _Refused as refusal:
        return GuardVerdict(False, str(refusal))
    except RecursionError:
        return GuardVerdict(False, "the query is nested too deeply to check")
    except Exception as exc:  # a parser bug must refuse the query, never let it through
        return GuardVerdict(False, f"the query could not be checked ({type(exc).__name__}: {exc})")
    return GuardVerdict(True, reason)


def _lowered(schemas: Collection[str] | None) -> frozenset[str] | None:
    return None if schemas is None else frozenset(schema.lower() for schema in schemas)


def _check(sql: str, dialect: Dialect, schemas: frozenset[str] | None, *, allow_explain: bool) -> str:
    if not sql.strip():
        raise _Refused("expected one SELECT statement, got an empty query")
    if len(sql) > MAX_SQL_CHARS:
        raise _Refused(f"expected at most {MAX_SQL_CHARS:,} characters, got {len(sql):,}")
    _check_characters(sql)
    tokens = _tokenize(sql, dialect)
    if not tokens:
        raise _Refused("expected one SELECT statement, got only comments")
    _check_identifier_tokens(tokens, sql)
    if tokens[0].text.upper() == "EXPLAIN":
        if not allow_explain:
            raise _Refused("expected a statement after EXPLAIN, found another EXPLAIN")
        rest = _after_explain(sql, tokens[0], dialect)
        try:
            _check(rest, dialect, schemas, allow_explain=False)
        except _Refused as refusal:
            raise _Refused(f"after EXPLAIN: {refusal}") from None
        return "EXPLAIN of a single read-only query"
    statement = _parse_one(sql, dialect)
    _check_top_level(statement, tokens[0].text)
    _check_tree(statement, dialect, schemas)
    return "a single read-only query"


def _check_characters(sql: str) -> None:
    # Control and invisible format characters (NUL, zero-width spaces, bidi overrides) make the text a person
    # reviews differ from what an engine reads; nothing legitimate needs them.
    line, column = 1, 0
    for char in sql:
        column += 1
        category = unicodedata.category(char)
        if (category == "Cc" and char not in _SAFE_CONTROLS) or category == "Cf":
            raise _Refused(
                f"unexpected invisible or control character U+{ord(char):04X} at line {line}, column {column}"
            )
        if char == "\n":
            line, column = line + 1, 0


def _tokenize(sql: str, dialect: Dialect) -> Sequence[_Token]:
    try:
        return SqlglotDialect.get_or_raise(dialect).tokenize(sql)
    except TokenError as exc:
        raise _Refused(f"the query does not parse: {exc}") from None


def _check_identifier_tokens(tokens: Sequence[_Token], sql: str) -> None:
    # sqlglot reads unknown characters (a full-width '；', say) as part of a bare word; an engine would not.
    for token in tokens:
        if token.token_type != TokenType.VAR:
            continue
        for char in token.text:
            if not (char.isalnum() or char in _IDENTIFIER_EXTRA):
                line = sql.count("\n", 0, token.start) + 1
                raise _Refused(
                    f"unexpected character {char!r} (U+{ord(char):04X}) in {token.text!r} at line {line}"
                )


def _after_explain(sql: str, explain: _Token, dialect: Dialect) -> str:
    rest = sql[explain.end + 1 :]
    words = _tokenize(rest, dialect)
    texts = tuple(token.text.upper() for token in words)
    for option in _EXPLAIN_OPTIONS[dialect]:
        if texts[: len(option)] == option:
            return rest[words[len(option) - 1].end + 1 :]
    return rest


def _parse_one(sql: str, dialect: Dialect) -> exp.Expr:
    try:
        parsed = sqlglot.parse(sql, read=dialect)
    except ParseError as exc:
        raise _Refused(f"the query does not parse: {_describe_parse_error(exc)}") from None
    except TokenError as exc:
        raise _Refused(f"the query does not parse: {exc}") from None
    # A trailing ';' yields an empty statement and a trailing comment a bare Semicolon node; neither runs.
    statements = [item for item in parsed if item is not None and type(item) is not exp.Semicolon]
    if not statements:
        raise _Refused("expected one SELECT statement, got only comments")
    if len(statements) > 1:
        kinds = ", ".join(_kind(item) for item in statements)
        raise _Refused(f"expected exactly one statement, found {len(statements)} ({kinds})")
    return statements[0]


def _describe_parse_error(exc: ParseError) -> str:
    if not exc.errors:
        return str(exc)
    first = exc.errors[0]
    near = str(first.get("highlight") or "").strip()
    where = f"line {first.get('line')}, column {first.get('col')}"
    return f"{first.get('description')} at {where}" + (f" near {near!r}" if near else "")


def _kind(node: exp.Expr) -> str:
    """A statement's keyword (``DELETE``, ``VACUUM``), or the text of something that is not a statement."""
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    if isinstance(node, _STATEMENTS):
        return _KEYWORDS.get(node.key, node.key.upper())
    text = node.sql()
    return f"the expression {text if len(text) <= 40 else text[:39] + '…'!r}"


def _check_top_level(statement: exp.Expr, first_word: str) -> None:
    inner = statement
    while isinstance(inner, exp.Subquery):
        inner = inner.this
    if not isinstance(inner, _TOP_LEVEL) or isinstance(inner, exp.Subquery):
        # Older sqlglot reads an unknown statement (SAVEPOINT s1) as an expression, newer ones as a Command:
        # its first word names it the same way under both.
        found = _kind(inner) if isinstance(inner, _STATEMENTS) else first_word.upper()
        raise _Refused(f"expected a SELECT, WITH … SELECT, VALUES or EXPLAIN statement, found {found}")


_HEAD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")
_KINDS = ", ".join(list(CATEGORIES)[:-1]) + f" and {list(CATEGORIES)[-1]}"


def _check_tree(statement: exp.Expr, dialect: Dialect, schemas: frozenset[str] | None) -> None:
    for node in statement.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise _Refused(f"expected a read-only query, found {_kind(node)} inside it")
        if isinstance(node, exp.Func) and not allowed_function(node, dialect):
            name = _function_name(node, dialect)
            raise _Refused(
                f"the function {name}() is not allowed in a read-only query (it is not on {dialect}'s "
                f"allow-list of {_KINDS} functions)"
            )
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            _check_relation(node, dialect, schemas)
        if isinstance(node, exp.Column) and node.db and system_relation(node.db, node.table, dialect):
            raise _Refused(f"the column {node.sql(dialect)!r} reads a system catalog, not data")


def _check_relation(table: exp.Table, dialect: Dialect, schemas: frozenset[str] | None) -> None:
    shown = ".".join(part for part in (table.catalog, table.db, table.name) if part)
    if system_relation(table.db, table.name, dialect):
        raise _Refused(
            f"the table {shown!r} is a system catalog, not data: ask about the source's own tables"
        )
    if table.catalog:
        raise _Refused(f"the table {shown!r} names another database: ask about the source's own tables")
    if schemas is not None and table.db and table.db.lower() not in schemas:
        known = ", ".join(sorted(schemas)) or "none"
        raise _Refused(f"the table {shown!r} is outside the source's schemas ({known})")


def _function_name(node: exp.Func, dialect: Dialect) -> str:
    """The function's name as the dialect spells it (``lpad``, not sqlglot's ``pad``)."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    try:
        written = _HEAD.match(node.sql(dialect))
    except Exception:  # generating is only for the message; a generator gap must not hide the refusal
        written = None
    return (written.group(1) if written else node.sql_name()).lower()


__all__ = ["MAX_SQL_CHARS", "Dialect", "GuardVerdict", "check_read_only"]
