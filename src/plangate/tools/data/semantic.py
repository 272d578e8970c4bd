"""A source's semantic layer: named metrics, dimensions with friendly names, relationships the foreign keys
do not declare, and synonyms, read from ``<source>.semantic.toml`` (or ``[sources.semantic]`` in
``plangate.toml``) and checked against the source's real schema.

For: the file format, its issues with their paths (``metrics.revenue.sql: unknown column 'order_items.qty'
(did you mean 'order_items.quantity'?)``), and the checked :class:`SemanticLayer` that ``db_aggregate``
compiles a ``metric`` from. A metric is one aggregate over an arithmetic expression of qualified columns,
with an optional condition, written in SQL and parsed by sqlglot: nothing else is accepted, so a metric
cannot hide a subquery or a function call. Not for: compiling a query (``aggregate.py``) or telling a
question's words apart (``plangate.copilot``).

A file::

    description = "The shop's own definitions"

    [metrics.revenue]
    sql = "sum(order_items.quantity * order_items.unit_price * (1 - order_items.discount))"
    where = "orders.status != 'cancelled'"
    description = "net revenue, as the plan-week formula computes it"
    synonyms = ["sales", "turnover"]

    [metrics]
    units = "sum(order_items.quantity) where orders.status != 'cancelled'"   # the short form

    [dimensions.region]
    column = "regions.name"
    synonyms = ["area"]

    [[relationships]]                  # a many-to-one link no foreign key declares
    from = "orders.customer_id"
    to = "customers.customer_id"
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from plangate.errors import ConfigError, number_too_long
from plangate.tools.data.results import ColumnInfo, ForeignKey, SchemaInfo, TableInfo
from plangate.tools.registry import closest_name

SUFFIX = ".semantic.toml"
"""How a semantic file is named: ``shop.semantic.toml`` beside ``shop.db``."""

MetricAgg = Literal["count", "count_distinct", "sum", "avg", "min", "max"]

_TOP = ("description", "metrics", "dimensions", "relationships")
_METRIC_KEYS = ("sql", "where", "description", "synonyms")
_DIMENSION_KEYS = ("column", "description", "synonyms")
_RELATIONSHIP_KEYS = ("from", "to")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = frozenset({"count", "count_distinct", "sum", "avg", "min", "max", "*"})
_AGGS: dict[type[exp.Expr], MetricAgg] = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
# What an expression may be built of: columns, numbers and arithmetic (and, in a condition, comparisons,
# logic, IN, IS NULL, LIKE, BETWEEN and text); nothing that calls a function or reads another table.
_ARITHMETIC: tuple[type[exp.Expr], ...] = (
    exp.Column,
    exp.Literal,
    exp.Paren,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Neg,
    exp.Identifier,
)
_CONDITION: tuple[type[exp.Expr], ...] = (
    *_ARITHMETIC,
    exp.And,
    exp.Or,
    exp.Not,
    exp.EQ,
    exp.NEQ,
    exp.LT,
    exp.LTE,
    exp.GT,
    exp.GTE,
    exp.In,
    exp.Is,
    exp.Like,
    exp.Between,
    exp.Null,
    exp.Boolean,
    exp.Tuple,
)
_ALLOWED_TEXT = "columns written table.column, numbers and + - * / ( )"
_CONDITION_TEXT = ", texts, comparisons, and, or, not, in, is null, like, between"
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class SemanticIssue:
    """One problem of a semantic file: ``level`` (``error``), ``code``, where (``metrics.revenue.sql``) and
    what (the closest real name when there is one)."""

    level: Literal["error", "warning"]
    code: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SemanticError(ConfigError):
    """A semantic file that cannot be used; ``issues`` holds every problem, each with its path.

    Attributes:
        origin: the file (or ``plangate.toml``'s table) the layer came from.
        issues: the problems found.
    """

    def __init__(self, origin: str, issues: Sequence[SemanticIssue]) -> None:
        self.origin = origin
        self.issues = list(issues)
        shown = "; ".join(str(issue) for issue in self.issues[:5])
        more = f" (and {len(self.issues) - 5} more)" if len(self.issues) > 5 else ""
        super().__init__(f"{origin}: {shown}{more}")


@dataclass(frozen=True, slots=True)
class ColumnRef:
    """A column a metric or dimension names, resolved: the real table and column names."""

    table: str
    column: str

    @property
    def name(self) -> str:
        return f"{self.table}.{self.column}"


@dataclass(frozen=True)
class Metric:
    """A named measure.

    Attributes:
        name: what questions and queries call it (``revenue``).
        agg: its aggregate.
        argument: what is aggregated, its columns resolved to real names (never ``*``: a metric says the
            table it counts).
        condition: the rows it keeps (its ``where``), resolved; None for every row.
        definition: the definition as a person reads it (``sum(…) where …``), said with every answer.
        description: what it means, in words.
        synonyms: other words a question may use for it.
        columns: the columns ``argument`` reads; ``condition_columns``: those ``condition`` reads.
    """

    name: str
    agg: MetricAgg
    argument: exp.Expr
    condition: exp.Expr | None
    definition: str
    description: str = ""
    synonyms: tuple[str, ...] = ()
    columns: tuple[ColumnRef, ...] = ()
    condition_columns: tuple[ColumnRef, ...] = ()

    @property
    def tables(self) -> list[str]:
        """The tables the metric reads, its argument's first."""
        return list(dict.fromkeys(ref.table for ref in (*self.columns, *self.condition_columns)))

    def condition_values(self) -> list[tuple[str, bool]]:
        """The texts its condition compares with, each with whether the condition leaves those rows out
        (``status != 'cancelled'``: ``('cancelled', True)``)."""
        if self.condition is None:
            return []
        found: list[tuple[str, bool]] = []
        for node in self.condition.find_all(exp.EQ, exp.NEQ, exp.In):
            negated = isinstance(node, exp.NEQ) or isinstance(node.parent, exp.Not)
            literals = node.expressions if isinstance(node, exp.In) else [node.expression, node.this]
            found += [(v.name, negated) for v in literals if isinstance(v, exp.Literal) and v.is_string]
        return found


@dataclass(frozen=True)
class Dimension:
    """A column under a friendly name (``region`` for ``regions.name``), with its synonyms."""

    name: str
    column: ColumnRef
    description: str = ""
    synonyms: tuple[str, ...] = ()


@dataclass(frozen=True)
class SemanticLayer:
    """A source's checked semantic layer.

    Attributes:
        origin: where it was read from (a file, or ``plangate.toml``).
        description: what the file says of itself.
        metrics: by name, in file order.
        dimensions: by name, in file order.
        relationships: the many-to-one links it adds, as foreign keys of their ``from`` table.
    """

    origin: str
    description: str = ""
    metrics: dict[str, Metric] = field(default_factory=dict)
    dimensions: dict[str, Dimension] = field(default_factory=dict)
    relationships: tuple[tuple[str, ForeignKey], ...] = ()

    def metric(self, name: str) -> Metric | None:
        """The metric called ``name`` (any case), or None."""
        return self.metrics.get(name) or next(
            (m for key, m in self.metrics.items() if key.lower() == name.lower()), None
        )

    def dimension(self, name: str) -> Dimension | None:
        """The dimension called ``name`` (any case), or None."""
        return self.dimensions.get(name) or next(
            (d for key, d in self.dimensions.items() if key.lower() == name.lower()), None
        )

    def applied(self, schema: SchemaInfo) -> SchemaInfo:
        """``schema`` with the layer's relationships added as foreign keys (the joins a query may make)."""
        if not self.relationships:
            return schema
        added: dict[str, list[ForeignKey]] = {}
        declared = {(t.name, key) for t in schema.tables for key in t.foreign_keys}
        for table, key in self.relationships:
            if (table, key) not in declared:  # applied once, however often it is asked
                added.setdefault(table, []).append(key)
        tables = [
            replace(t, foreign_keys=[*t.foreign_keys, *added.get(t.name, [])]) if t.name in added else t
            for t in schema.tables
        ]
        return replace(schema, tables=tables)


# -- reading ------------------------------------------------------------------------------------------------


def semantic_path_for(database: str | Path) -> Path:
    """Where the semantic file of a SQLite file is looked for: ``shop.db`` → ``shop.semantic.toml``."""
    path = Path(database)
    return path.with_name(path.stem + SUFFIX)


def read_semantic_file(path: str | Path) -> dict[str, object]:
    """The TOML of a semantic file.

    Raises:
        SemanticError: it cannot be read or is not TOML.
    """
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        issue = SemanticIssue("error", "unreadable", "", f"cannot read the file ({exc.strerror or exc})")
        raise SemanticError(str(path), [issue]) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        issue = SemanticIssue("error", "toml", "", f"not valid TOML: {exc}")
        raise SemanticError(str(path), [issue]) from None
    except ValueError as exc:
        issue = SemanticIssue("error", "toml", "", f"not valid TOML: {number_too_long(exc)}")
        raise SemanticError(str(path), [issue]) from None


def load_semantic(data: Mapping[str, object], schema: SchemaInfo, origin: str) -> SemanticLayer:
    """The checked layer of ``data`` (a semantic file's table) on the source ``schema`` describes.

    Raises:
        SemanticError: the file has error-level issues (each with its path).
    """
    layer, issues = check_semantic(data, schema, origin)
    if layer is None or any(issue.level == "error" for issue in issues):
        raise SemanticError(origin, [issue for issue in issues if issue.level == "error"])
    return layer


def check_semantic(
    data: Mapping[str, object], schema: SchemaInfo, origin: str = "semantic"
) -> tuple[SemanticLayer | None, list[SemanticIssue]]:
    """Every issue of a semantic file on ``schema``, and its layer when it has no error.

    Issue codes: ``unknown-key``, ``type``, ``name``, ``expression`` (a metric that does not parse or uses
    what a metric may not), ``unknown-table``, ``unknown-column``, ``duplicate``.
    """
    checker = _Checker(schema)
    for key in data:
        if key not in _TOP:
            checker.fail("unknown-key", key, f"unknown key{_did_you_mean(key, _TOP)}")
    description = data.get("description", "")
    if not isinstance(description, str):
        checker.fail("type", "description", f"expected a text, got {description!r}")
        description = ""
    relationships = checker.relationships(data.get("relationships", []))
    schema_with = SemanticLayer(origin, relationships=tuple(relationships)).applied(schema)
    checker.schema = schema_with
    metrics = checker.table_of(data.get("metrics", {}), "metrics", checker.metric)
    dimensions = checker.table_of(data.get("dimensions", {}), "dimensions", checker.dimension)
    for name in sorted(set(metrics) & set(dimensions)):
        checker.fail("duplicate", f"dimensions.{name}", f"{name!r} names a metric too: give it another name")
    if checker.issues:
        return None, checker.issues
    layer = SemanticLayer(origin, description, metrics, dimensions, tuple(relationships))
    return layer, []


def _did_you_mean(name: str, options: Iterable[str]) -> str:
    near = closest_name(name, list(options))
    return f" (did you mean {near!r}?)" if near else f" (expected one of {', '.join(options)})"


@dataclass
class _Checker:
    """Collects the issues of one file while reading it; each reader returns what it could make of a part."""

    schema: SchemaInfo
    issues: list[SemanticIssue] = field(default_factory=list)

    def fail(self, code: str, path: str, message: str) -> None:
        self.issues.append(SemanticIssue("error", code, path, message))

    def table_of(
        self, value: object, path: str, read: Callable[[str, object, str], _T | None]
    ) -> dict[str, _T]:
        if not isinstance(value, dict):
            self.fail("type", path, f"expected a table of named entries, got {value!r}")
            return {}
        found: dict[str, _T] = {}
        for name, entry in value.items():
            where = f"{path}.{name}"
            if not _NAME.match(name) or name.lower() in _RESERVED:
                self.fail("name", where, "a name is letters, digits and '_' (and not an aggregate's name)")
                continue
            if any(name.lower() == other.lower() for other in found):
                self.fail("duplicate", where, f"{name!r} is defined twice (names ignore case)")
                continue
            made = read(name, entry, where)
            if made is not None:
                found[name] = made
        return found

    def _keys(self, entry: Mapping[str, object], allowed: Sequence[str], path: str) -> None:
        for key in entry:
            if key not in allowed:
                self.fail("unknown-key", f"{path}.{key}", f"unknown key{_did_you_mean(key, allowed)}")

    def _texts(self, entry: Mapping[str, object], key: str, path: str) -> tuple[str, ...]:
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
            self.fail("type", f"{path}.{key}", f"expected a list of words or phrases, got {value!r}")
            return ()
        return tuple(item.strip() for item in value)

    def _text(self, entry: Mapping[str, object], key: str, path: str) -> str:
        value = entry.get(key, "")
        if not isinstance(value, str):
            self.fail("type", f"{path}.{key}", f"expected a text, got {value!r}")
            return ""
        return value.strip()

    def metric(self, name: str, entry: object, path: str) -> Metric | None:
        if isinstance(entry, str):
            text, written = _split_where(entry)
            entry = {"sql": text, **({"where": written} if written is not None else {})}
            at_sql = at_where = path
        elif isinstance(entry, dict):
            self._keys(entry, _METRIC_KEYS, path)
            at_sql, at_where = f"{path}.sql", f"{path}.where"
        else:
            self.fail("type", path, f"expected a definition (text) or a table with 'sql', got {entry!r}")
            return None
        sql = entry.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            self.fail("type", at_sql, f"expected the metric's SQL, such as 'sum(table.column)', got {sql!r}")
            return None
        made = self._aggregate(sql, at_sql)
        where = entry.get("where")
        condition: exp.Expr | None = None
        condition_columns: tuple[ColumnRef, ...] = ()
        if where is not None:
            if not isinstance(where, str) or not where.strip():
                self.fail("type", at_where, f"expected a condition, got {where!r}")
                return None
            parsed = self._expression(where, at_where, _CONDITION, "a condition")
            if parsed is not None:
                condition, condition_columns = parsed
        if made is None or (where is not None and condition is None):
            return None
        agg, argument, columns = made
        definition = " ".join(sql.split()) + (f" where {' '.join(str(where).split())}" if where else "")
        return Metric(
            name,
            agg,
            argument,
            condition,
            definition,
            self._text(entry, "description", path),
            self._texts(entry, "synonyms", path),
            columns,
            condition_columns,
        )

    def _aggregate(
        self, sql: str, path: str
    ) -> tuple[MetricAgg, exp.Expr, tuple[ColumnRef, ...]] | None:
        try:
            tree = sqlglot.parse_one(sql, read=self.schema.dialect)
        except (SqlglotError, ValueError) as exc:
            self.fail("expression", path, f"it does not parse: {str(exc).splitlines()[0]}")
            return None
        agg: MetricAgg
        if isinstance(tree, exp.Count):
            inner = tree.this
            if isinstance(inner, exp.Star):
                self.fail("expression", path, "count(*) names no table: count a column, count(table.key)")
                return None
            if isinstance(inner, exp.Distinct):
                if len(inner.expressions) != 1:
                    self.fail("expression", path, "count(distinct …) takes one expression")
                    return None
                agg, inner = "count_distinct", inner.expressions[0]
            else:
                agg = "count"
        elif type(tree) in _AGGS:
            agg, inner = _AGGS[type(tree)], tree.this
        else:
            self.fail(
                "expression",
                path,
                "a metric is one aggregate: sum(…), avg(…), count(…), count(distinct …), min(…) or max(…)",
            )
            return None
        checked = self._tree(inner, path, _ARITHMETIC, "an aggregate's expression")
        if checked is None:
            return None
        return agg, checked[0], checked[1]

    def _expression(
        self, text: str, path: str, allowed: tuple[type[exp.Expr], ...], what: str
    ) -> tuple[exp.Expr, tuple[ColumnRef, ...]] | None:
        try:
            tree = sqlglot.parse_one(text, read=self.schema.dialect)
        except (SqlglotError, ValueError) as exc:
            self.fail("expression", path, f"it does not parse: {str(exc).splitlines()[0]}")
            return None
        return self._tree(tree, path, allowed, what)

    def _tree(
        self, tree: exp.Expr, path: str, allowed: tuple[type[exp.Expr], ...], what: str
    ) -> tuple[exp.Expr, tuple[ColumnRef, ...]] | None:
        for node in tree.walk():
            if not isinstance(node, allowed) or isinstance(node, exp.Star):
                shown = node.sql(dialect=self.schema.dialect)[:40]
                extra = _CONDITION_TEXT if allowed is _CONDITION else ""
                self.fail("expression", path, f"{what} may hold only {_ALLOWED_TEXT}{extra}; not {shown!r}")
                return None
        refs: list[ColumnRef] = []
        bad = False
        for column in list(tree.find_all(exp.Column)):
            ref = self.column(column, path)
            if ref is None:
                bad = True
                continue
            refs.append(ref)
            column.set("this", exp.to_identifier(ref.column))
            column.set("table", exp.to_identifier(ref.table.split(".")[-1]))
            column.set("db", exp.to_identifier(ref.table.split(".")[0]) if "." in ref.table else None)
        if bad:
            return None
        if not refs and allowed is _ARITHMETIC:
            self.fail("expression", path, f"{what} reads no column")
            return None
        return tree, tuple(dict.fromkeys(refs))

    def column(self, node: exp.Column | str, path: str) -> ColumnRef | None:
        """Resolve a ``table.column`` name (a sqlglot column or a text), case-insensitively."""
        if isinstance(node, str):
            table_part, _, column_part = node.strip().rpartition(".")
            text = node.strip()
        else:
            parts = [part for part in (node.args.get("db"), node.args.get("table")) if part is not None]
            table_part = ".".join(part.name for part in parts)
            column_part = node.name
            text = f"{table_part}.{column_part}" if table_part else column_part
        if not table_part:
            self.fail("unknown-column", path, f"write the column as table.column, not {text!r}")
            return None
        table = _table(self.schema, table_part)
        if table is None:
            names = [t.name for t in self.schema.tables]
            self.fail("unknown-table", path, f"unknown table {table_part!r}{_hint(table_part, names)}")
            return None
        column = _find(table.columns, column_part)
        if column is None:
            names = [f"{table.name}.{c.name}" for c in table.columns]
            self.fail("unknown-column", path, f"unknown column {text!r}{_hint(text, names)}")
            return None
        return ColumnRef(table.name, column.name)

    def dimension(self, name: str, entry: object, path: str) -> Dimension | None:
        if isinstance(entry, str):
            entry = {"column": entry}
            at = path
        elif isinstance(entry, dict):
            self._keys(entry, _DIMENSION_KEYS, path)
            at = f"{path}.column"
        else:
            message = f"expected a column (table.column) or a table with 'column', got {entry!r}"
            self.fail("type", path, message)
            return None
        column = entry.get("column")
        if not isinstance(column, str) or not column.strip():
            self.fail("type", at, f"expected the column, table.column, got {column!r}")
            return None
        ref = self.column(column, at)
        if ref is None:
            return None
        description = self._text(entry, "description", path)
        return Dimension(name, ref, description, self._texts(entry, "synonyms", path))

    def relationships(self, value: object) -> list[tuple[str, ForeignKey]]:
        if not isinstance(value, list):
            self.fail("type", "relationships", f"expected [[relationships]] entries, got {value!r}")
            return []
        found: list[tuple[str, ForeignKey]] = []
        for index, entry in enumerate(value):
            path = f"relationships[{index}]"
            if not isinstance(entry, dict):
                self.fail("type", path, f"expected a table with 'from' and 'to', got {entry!r}")
                continue
            self._keys(entry, _RELATIONSHIP_KEYS, path)
            ends: list[ColumnRef] = []
            for key in _RELATIONSHIP_KEYS:
                text = entry.get(key)
                if not isinstance(text, str) or not text.strip():
                    self.fail("type", f"{path}.{key}", f"expected a column, table.column, got {text!r}")
                    continue
                ref = self.column(text, f"{path}.{key}")
                if ref is not None:
                    ends.append(ref)
            if len(ends) == 2:
                many, one = ends
                found.append((many.table, ForeignKey(many.column, one.table, one.column)))
        return found


def _split_where(text: str) -> tuple[str, str | None]:
    """``sum(x) where y`` as ``("sum(x)", "y")``: the last ``where`` outside quotes and parentheses."""
    depth, quote, cut = 0, "", -1
    lowered = text.lower()
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and re.match(r"\swhere\s", lowered[index : index + 7]):
            cut = index
    if cut < 0:
        return text.strip(), None
    return text[:cut].strip(), text[cut + 6 :].strip()


def _table(schema: SchemaInfo, name: str) -> TableInfo | None:
    lowered = name.lower()
    return next((t for t in schema.tables if t.name == name), None) or next(
        (t for t in schema.tables if t.name.lower() == lowered), None
    )


def _find(columns: Sequence[ColumnInfo], name: str) -> ColumnInfo | None:
    lowered = name.lower()
    return next((c for c in columns if c.name == name), None) or next(
        (c for c in columns if c.name.lower() == lowered), None
    )


def _hint(name: str, candidates: Sequence[str]) -> str:
    near = closest_name(name, candidates) or closest_name(name.lower(), [c.lower() for c in candidates])
    if near is None:
        return ""
    real = next((c for c in candidates if c.lower() == near.lower()), near)
    return f" (did you mean {real!r}?)"


__all__ = [
    "SUFFIX",
    "ColumnRef",
    "Dimension",
    "Metric",
    "SemanticError",
    "SemanticIssue",
    "SemanticLayer",
    "check_semantic",
    "load_semantic",
    "read_semantic_file",
    "semantic_path_for",
]
