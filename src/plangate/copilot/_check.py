"""The copilot's check: the formula check of SPEC §2, plus what only the data can tell.

For: issues ``{level, code, path, message}`` on a draft built from ops: the ops that could not be applied,
the formula's schema, the plan check (``plangate.formulas.check``), and the data checks: every SQL text is
parsed with sqlglot in the source's dialect and each table and column resolved against the real schema
(an unknown one named with the closest real one), the read-only guard, a ``SUM`` / ``AVG`` / ``COUNT`` of a
parent table's column under a join to its children (the fan trap: the parent's rows are repeated once per
child), structured queries compiled against the schema and its semantic layer, sources outside the turn's
scope, and steps a turn cannot run unattended (people, manual steps, sub-formulas). Not for: repairing
anything (the model does, in ``_generate``).

Data issue codes: ``op`` (an op that could not be applied), ``no-steps``, ``unknown-table``,
``unknown-column``, ``sql-refused``, ``sql-syntax``, ``fan-out`` (a warning the repair rounds still hand
back; the review calls it ``fan_out``), ``invalid-query`` (a structured query), ``missing-source``,
``out-of-scope-source``, ``not-automatic``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import sqlglot
from pydantic import JsonValue
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope as SqlScope
from sqlglot.optimizer.scope import traverse_scope

from plangate.copilot._ops import Draft, schema_problems
from plangate.copilot._scope import Scope
from plangate.formulas import Formula, Issue, Plan, check_formula
from plangate.formulas.plan import (
    AgentExecutor,
    CookedStep,
    FormulaExecutor,
    HumanExecutor,
    ManualExecutor,
    ToolExecutor,
)
from plangate.tools.data import (
    AggregateError,
    SchemaInfo,
    SemanticLayer,
    TableInfo,
    compile_aggregate,
    parse_aggregate,
)
from plangate.tools.registry import closest_name
from plangate.tools.sql_guard import Dialect, check_read_only

DATA_TOOLS = frozenset({"db_query", "db_schema", "db_aggregate"})
REPAIRED_WARNINGS = frozenset({"fan-out"})
"""Warning codes the repair rounds hand back like errors: the query runs, but its figure is wrong."""


def _error(code: str, path: str, message: str) -> Issue:
    return Issue(level="error", code=code, path=path, message=message)


def check_draft(
    draft: Draft, scope: Scope, vars: Mapping[str, JsonValue]
) -> tuple[Formula | None, Plan | None, list[Issue]]:
    """Every issue of the draft, and the formula and plan when it gets that far.

    Returns:
        ``(formula, plan, issues)``; ``formula`` is None when the draft does not fit the schema, ``plan``
        when it cannot be cooked.
    """
    issues = [_error("op", "ops", problem) for problem in draft.problems]
    if not draft.steps:
        issues.append(_error("no-steps", "steps", "the workflow has no steps: add_step one, or reply"))
        return None, None, issues
    problems = schema_problems(draft)
    if problems is not None:
        issues += [_error("schema", path, message) for path, message in problems]
        return None, None, issues
    formula = draft.formula()
    plan, found = check_formula(formula, dict(vars), tools=scope.registry.names())
    issues += found
    if plan is not None:
        for index, step in enumerate(plan.steps):
            issues += step_issues(step, index, scope)
    return formula, plan, issues


def step_issues(step: CookedStep, index: int, scope: Scope) -> list[Issue]:
    """The copilot's own issues with one step of the plan."""
    at = step.source or f"steps[{index}]"
    executor = step.executor
    if isinstance(executor, HumanExecutor | ManualExecutor | FormulaExecutor):
        kind = {"human": "asks a person", "manual": "has no executor", "formula": "runs a sub-formula"}
        return [
            _error(
                "not-automatic",
                at,
                f"step {step.id!r} {kind[executor.type]}: a turn runs only tool, "
                "llm and agent steps, without people",
            )
        ]
    if step.gate is not None and step.gate.human is not None:
        return [_error("not-automatic", f"{at}.gate", f"step {step.id!r} waits for a person's approval")]
    if isinstance(executor, AgentExecutor):
        outside = [name for name in executor.tools if name not in DATA_TOOLS]
        return [
            _error(
                "not-automatic",
                f"{at}.agent.tools",
                f"step {step.id!r} gives its agent {name!r}, which is not a data tool",
            )
            for name in outside
        ]
    if not isinstance(executor, ToolExecutor) or executor.name not in DATA_TOOLS:
        return []
    args = executor.args
    where = f"{at}.tool.args"
    source = args.get("source")
    if not isinstance(source, str) or not source:
        return [_error("missing-source", f"{where}.source", f"name the data source: {scope.name!r}")]
    if "{{" in source:
        return []
    if source != scope.name:
        hint = f" (did you mean {scope.name!r}?)"
        return [
            _error(
                "out-of-scope-source",
                f"{where}.source",
                f"the data source {source!r} is outside this turn's scope, which is {scope.name!r}{hint}",
            )
        ]
    if executor.name == "db_query":
        sql = args.get("sql")
        if not isinstance(sql, str):
            return [_error("sql-syntax", f"{where}.sql", "expected the SQL text in 'sql'")]
        return sql_issues(sql, scope.schema, f"{where}.sql")
    if executor.name == "db_aggregate":
        return aggregate_issues(args, scope.schema, where, scope.semantic)
    return []


def needs_repair(issues: Iterable[Issue]) -> bool:
    """Whether the check's issues go back to the model: an error, or a warning of ``REPAIRED_WARNINGS``."""
    return any(issue.level == "error" or issue.code in REPAIRED_WARNINGS for issue in issues)


def aggregate_issues(
    args: Mapping[str, JsonValue], schema: SchemaInfo, where: str, semantic: SemanticLayer | None = None
) -> list[Issue]:
    """A structured query's issues: its shape, and every name resolved against the schema (and the
    semantic layer's metrics and dimensions)."""
    if _templated(dict(args)):
        return []  # filled from earlier steps at run time; the tool checks it then
    try:
        compile_aggregate(parse_aggregate(args), schema, semantic)
    except AggregateError as exc:
        text = str(exc)
        code = (
            "unknown-table"
            if "unknown table" in text
            else ("unknown-column" if "unknown column" in text else "invalid-query")
        )
        return [_error(code, f"{where}.{exc.path}", str(exc).split(": ", 1)[1])]
    return []


def _templated(value: JsonValue) -> bool:
    if isinstance(value, str):
        return "{{" in value
    if isinstance(value, list):
        return any(_templated(item) for item in value)
    if isinstance(value, dict):
        return any(_templated(item) for item in value.values())
    return False


def sql_issues(sql: str, schema: SchemaInfo, path: str) -> list[Issue]:
    """The issues of one SQL text: the read-only guard, the parse, and every table and column resolved."""
    if "{{" in sql:
        return [
            Issue(
                level="warning",
                code="sql-template",
                path=path,
                message="the SQL is filled from earlier steps at run time, so it is checked only then",
            )
        ]
    dialect: Dialect = "postgres" if schema.dialect == "postgres" else "sqlite"
    verdict = check_read_only(sql, dialect)
    if not verdict.allowed:
        return [_error("sql-refused", path, f"the read-only guard refuses it: {verdict.reason}")]
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
        scopes = traverse_scope(tree)
    except (SqlglotError, RecursionError, ValueError) as exc:
        return [_error("sql-syntax", path, f"it does not parse: {str(exc).splitlines()[0]}")]
    tables = {table.name.lower(): table for table in schema.tables}
    issues: list[Issue] = []
    for scope in scopes:
        issues += _scope_issues(scope, tables, path)
    if not issues:
        issues += [
            Issue(level="warning", code="fan-out", path=path, message=fan.message())
            for fan in _fan_outs(scopes, tables)
        ]
    return list({issue.message: issue for issue in issues}.values())


@dataclass(frozen=True)
class FanOut:
    """A measure of a parent table's column taken under a join to its children: ``aggregate`` (as written)
    is repeated once per ``child`` row of each ``parent`` row."""

    aggregate: str
    parent: str
    child: str

    def message(self) -> str:
        return (
            f"{self.aggregate} is repeated once per {self.child} row: the join from {self.parent} to its "
            f"{self.child} rows (one-to-many) multiplies it. Aggregate {self.parent} before joining (a "
            f"subquery), measure the {self.child} rows instead, or use db_aggregate, which computes each "
            "measure once per row of its own table"
        )


def sql_fan_outs(sql: str, schema: SchemaInfo) -> list[FanOut] | None:
    """The fan-outs of one SQL text, or None when it cannot be read (templated, refused, not parsed)."""
    if "{{" in sql:
        return None
    dialect: Dialect = "postgres" if schema.dialect == "postgres" else "sqlite"
    try:
        scopes = traverse_scope(sqlglot.parse_one(sql, read=dialect))
    except (SqlglotError, RecursionError, ValueError):
        return None
    return _fan_outs(scopes, {table.name.lower(): table for table in schema.tables})


def _fan_outs(scopes: list[SqlScope], tables: Mapping[str, TableInfo]) -> list[FanOut]:
    found: list[FanOut] = []
    for scope in scopes:
        real = {
            alias.lower(): tables[source.name.lower()]
            for alias, source in scope.sources.items()
            if isinstance(source, exp.Table) and source.name.lower() in tables
        }
        children = _children(scope, real)
        if not children:
            continue
        for node in scope.expression.find_all(exp.Sum, exp.Avg, exp.Count):
            if _scope_of(node) is not scope.expression or isinstance(node.this, exp.Distinct | exp.Star):
                continue
            for column in node.find_all(exp.Column):
                table = _table_of(column, real)
                if table is not None and table.name in children:
                    found.append(FanOut(node.sql(), table.name, children[table.name]))
                    break
    return list({(f.aggregate, f.parent): f for f in found}.values())


def _scope_of(node: exp.Expr) -> exp.Expr | None:
    """The SELECT a node belongs to (the innermost one around it)."""
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent


def _table_of(column: exp.Column, real: Mapping[str, TableInfo]) -> TableInfo | None:
    if column.table:
        return real.get(column.table.lower())
    owners = [t for t in real.values() if any(c.name.lower() == column.name.lower() for c in t.columns)]
    return owners[0] if len(owners) == 1 else None


def _children(scope: SqlScope, real: Mapping[str, TableInfo]) -> dict[str, str]:
    """The tables of the scope joined to rows of another table of it that refer to them: parent → child
    (one invoice, its many lines), from the join conditions (``ON``, ``USING``, ``WHERE a.x = b.y``)."""
    select = scope.expression
    if not isinstance(select, exp.Select) or len(real) < 2:
        return {}
    pairs: list[tuple[TableInfo, str, TableInfo, str]] = []
    conditions: list[exp.Expr] = []
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None:
            conditions.append(join.args["on"])
        joined = real.get(join.this.alias_or_name.lower()) if isinstance(join.this, exp.Table) else None
        for name in join.args.get("using") or []:
            others = [t for t in real.values() if t is not joined and _has(t, name.name)]
            pairs += [(other, name.name, joined, name.name) for other in others if joined is not None]
    if select.args.get("where") is not None:
        conditions.append(select.args["where"])
    for condition in conditions:
        for equal in condition.find_all(exp.EQ):
            left, right = equal.this, equal.expression
            if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                a, b = _table_of(left, real), _table_of(right, real)
                if a is not None and b is not None and a is not b:
                    pairs.append((a, left.name, b, right.name))
    children: dict[str, str] = {}
    for a, a_column, b, b_column in pairs:
        for parent, parent_column, child, child_column in (
            (a, a_column, b, b_column),
            (b, b_column, a, a_column),
        ):
            if _refers(child, child_column, parent, parent_column):
                children.setdefault(parent.name, child.name)
    return children


def _has(table: TableInfo, column: str) -> bool:
    return any(c.name.lower() == column.lower() for c in table.columns)


def _refers(child: TableInfo, column: str, parent: TableInfo, parent_column: str) -> bool:
    """Whether ``child.column`` is a foreign key to ``parent.parent_column`` that is not also the child's
    whole key (a one-to-one link repeats nothing)."""
    keys = [c.name.lower() for c in child.columns if c.primary_key]
    if keys == [column.lower()]:
        return False
    return any(
        key.column.lower() == column.lower()
        and key.references_table.lower() == parent.name.lower()
        and (not key.references_column or key.references_column.lower() == parent_column.lower())
        for key in child.foreign_keys
    )


def _outputs(scope: SqlScope) -> set[str] | None:
    """The column names a derived table or CTE gives, or None when they cannot be told (``*``)."""
    node = scope.expression
    holder: exp.Expr = node
    while isinstance(holder.parent, exp.SetOperation):
        holder = holder.parent
    named = holder.parent.args.get("alias") if isinstance(holder.parent, exp.CTE | exp.Subquery) else None
    if isinstance(named, exp.TableAlias) and named.columns:
        return {column.name.lower() for column in named.columns}  # WITH c(x) AS ..., (...) AS d(total)
    while isinstance(node, exp.SetOperation):
        node = node.left
    if not isinstance(node, exp.Select):
        return None
    names: set[str] = set()
    for selected in node.selects:
        if isinstance(selected, exp.Star) or (isinstance(selected, exp.Column) and selected.is_star):
            return None
        names.add(selected.alias_or_name.lower())
    return names


def _scope_issues(scope: SqlScope, tables: Mapping[str, TableInfo], path: str) -> list[Issue]:
    real: dict[str, TableInfo] = {}
    derived: dict[str, set[str] | None] = {}
    issues: list[Issue] = []
    for alias, source in scope.sources.items():
        if isinstance(source, exp.Table):
            found = tables.get(source.name.lower())
            if found is None:
                names = [t.name for t in tables.values()]
                message = f"unknown table {source.name!r}{_hint(source.name, names)}"
                issues.append(_error("unknown-table", path, message))
                derived[alias.lower()] = None
            else:
                real[alias.lower()] = found
        elif isinstance(source, SqlScope):
            derived[alias.lower()] = _outputs(source)
    aliases = set()
    if isinstance(scope.expression, exp.Select):
        aliases = {s.alias.lower() for s in scope.expression.selects if s.alias}
    for column in scope.columns:
        name = column.name.lower()
        if not name or column.is_star:
            continue
        qualifier = column.table.lower()
        if qualifier:
            issues += _qualified(column, qualifier, real, derived, path)
        elif not _resolvable(name, real, derived, aliases):
            candidates = [f"{t.name}.{c.name}" for t in real.values() for c in t.columns]
            where = ", ".join(t.name for t in real.values()) or "its tables"
            issues.append(
                _error(
                    "unknown-column",
                    path,
                    f"unknown column {column.name!r} in {where}{_hint(column.name, candidates)}",
                )
            )
    return issues


def _qualified(
    column: exp.Column,
    qualifier: str,
    real: Mapping[str, TableInfo],
    derived: Mapping[str, set[str] | None],
    path: str,
) -> list[Issue]:
    name = column.name.lower()
    table = real.get(qualifier)
    if table is not None:
        if any(c.name.lower() == name for c in table.columns):
            return []
        names = [f"{table.name}.{c.name}" for c in table.columns]
        return [
            _error(
                "unknown-column",
                path,
                f"unknown column {column.table}.{column.name}{_hint(f'{table.name}.{column.name}', names)}",
            )
        ]
    if qualifier in derived:
        outputs = derived[qualifier]
        if outputs is None or name in outputs:
            return []
        return [
            _error(
                "unknown-column",
                path,
                f"{column.table!r} has no column {column.name!r}{_hint(column.name, sorted(outputs))}",
            )
        ]
    known = sorted({*real, *derived})
    return [
        _error(
            "unknown-table",
            path,
            f"{column.table!r} is not a table or alias of the query{_hint(column.table, known)}",
        )
    ]


def _resolvable(
    name: str, real: Mapping[str, TableInfo], derived: Mapping[str, set[str] | None], aliases: set[str]
) -> bool:
    if name in aliases or any(outputs is None or name in outputs for outputs in derived.values()):
        return True
    if not real and not derived:
        return True  # no FROM: a literal query, or a correlated one whose columns come from outside
    return any(any(c.name.lower() == name for c in table.columns) for table in real.values())


def _hint(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'orders.order_date'?)`` for the closest candidate, compared whole or, for a bare
    name, by its last part."""
    options = list(dict.fromkeys(candidates))
    lowered = {option.lower(): option for option in options}
    found = closest_name(name.lower(), list(lowered))
    if found is None:
        bare = name.lower().rsplit(".", 1)[-1]
        by_last = {option.rsplit(".", 1)[-1]: option for option in lowered}
        near = closest_name(bare, list(by_last))
        found = by_last[near] if near is not None else None
    return f" (did you mean {lowered[found]!r}?)" if found is not None else ""


__all__ = [
    "DATA_TOOLS",
    "REPAIRED_WARNINGS",
    "FanOut",
    "aggregate_issues",
    "check_draft",
    "needs_repair",
    "sql_fan_outs",
    "sql_issues",
    "step_issues",
]
