"""The copilot's check: the formula check plus the data checks, each naming the closest real name."""

from __future__ import annotations

import pytest

from plangate.copilot._check import check_draft, sql_issues
from plangate.copilot._ops import Draft, Op
from plangate.copilot._scope import Scope
from plangate.formulas import Issue


def _draft(*steps: dict[str, object]) -> Draft:
    draft = Draft("t")
    for step in steps:
        assert draft.apply(Op("add_step", {"step": step}, "")) is None  # type: ignore[dict-item]
    return draft


def _errors(draft: Draft, scope: Scope) -> list[Issue]:
    return [
        issue
        for issue in check_draft(draft, scope, {"question": "q", "history": []})[2]
        if issue.level == "error"
    ]


def _query(sql: str, source: str = "shop") -> dict[str, object]:
    return {"id": "q", "tool": {"name": "db_query", "args": {"source": source, "sql": sql}}}


ANSWER = {"id": "answer", "needs": ["q"], "llm": {"prompt": "{{question}} {{steps.q.output.rows}}"}}


def _messages(sql: str, scope: Scope) -> list[tuple[str, str]]:
    return [
        (issue.code, issue.message)
        for issue in sql_issues(sql, scope.schema, "sql")
        if issue.level == "error"
    ]


def test_a_clean_workflow_has_no_errors(shop_scope: Scope) -> None:
    draft = _draft(
        _query(
            "SELECT r.name, count(*) AS n FROM orders o JOIN customers c ON c.customer_id = o.customer_id "
            "JOIN regions r ON r.region_id = c.region_id GROUP BY r.name ORDER BY n DESC"
        ),
        ANSWER,
    )
    formula, plan, issues = check_draft(draft, shop_scope, {"question": "q", "history": []})
    assert formula is not None and plan is not None
    assert [issue for issue in issues if issue.level == "error"] == []


def test_an_unknown_table_names_the_closest_real_one(shop_scope: Scope) -> None:
    assert _messages("SELECT count(*) FROM order", shop_scope) == [
        ("unknown-table", "unknown table 'order' (did you mean 'orders'?)")
    ]


def test_an_unknown_qualified_column_names_the_closest_real_one(shop_scope: Scope) -> None:
    assert _messages("SELECT o.order_dat FROM orders o", shop_scope) == [
        ("unknown-column", "unknown column o.order_dat (did you mean 'orders.order_date'?)")
    ]


def test_an_unknown_bare_column_names_the_closest_column_of_its_tables(shop_scope: Scope) -> None:
    assert _messages("SELECT sum(totl) FROM order_items", shop_scope) == [
        ("unknown-column", "unknown column 'totl' in order_items")
    ]
    assert _messages("SELECT sum(quantty) FROM order_items", shop_scope) == [
        ("unknown-column", "unknown column 'quantty' in order_items (did you mean 'order_items.quantity'?)")
    ]


def test_aliases_ctes_derived_tables_and_output_names_resolve(shop_scope: Scope) -> None:
    sql = (
        "WITH t AS (SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id) "
        "SELECT c.name, t.n, d.total FROM t JOIN customers c ON c.customer_id = t.customer_id "
        "JOIN (SELECT order_id, sum(quantity) AS total FROM order_items GROUP BY order_id) d ON "
        "d.order_id = t.n "
        "WHERE n > 3 ORDER BY total DESC"
    )
    assert _messages(sql, shop_scope) == []


def test_a_column_a_cte_does_not_give_is_named(shop_scope: Scope) -> None:
    sql = "WITH t AS (SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id) SELECT t.nn FROM t"
    assert _messages(sql, shop_scope) == [("unknown-column", "'t' has no column 'nn' (did you mean 'n'?)")]


def test_identifiers_resolve_in_any_case(chinook_scope: Scope) -> None:
    assert _messages('SELECT billingcountry, SUM("Total") FROM invoice GROUP BY 1', chinook_scope) == []


def test_the_read_only_guard_runs_in_the_check(shop_scope: Scope) -> None:
    [(code, message)] = _messages("DELETE FROM orders", shop_scope)
    assert code == "sql-refused" and message.startswith("the read-only guard refuses it: expected a SELECT")


def test_sql_that_does_not_parse_is_an_error(shop_scope: Scope) -> None:
    [(code, message)] = _messages("SELECT FROM WHERE (", shop_scope)
    assert code in ("sql-refused", "sql-syntax") and "does not parse" in message


def test_sql_filled_from_earlier_steps_is_only_a_warning(shop_scope: Scope) -> None:
    issues = sql_issues("SELECT * FROM {{steps.a.output.table}}", shop_scope.schema, "sql")
    assert [(i.level, i.code) for i in issues] == [("warning", "sql-template")]


def test_a_source_outside_the_turns_scope_is_an_error(shop_scope: Scope) -> None:
    errors = _errors(_draft(_query("SELECT 1", source="warehouse"), ANSWER), shop_scope)
    assert [(e.code, e.path, e.message) for e in errors] == [
        (
            "out-of-scope-source",
            "steps[0].tool.args.source",
            "the data source 'warehouse' is outside this turn's scope, which is 'shop' (did you mean "
            "'shop'?)",
        )
    ]


def test_a_data_step_without_a_source_is_an_error(shop_scope: Scope) -> None:
    errors = _errors(
        _draft({"id": "q", "tool": {"name": "db_query", "args": {"sql": "SELECT 1"}}}), shop_scope
    )
    assert [(e.code, e.message) for e in errors] == [("missing-source", "name the data source: 'shop'")]


def test_a_structured_query_is_compiled_against_the_schema(shop_scope: Scope) -> None:
    step = {
        "id": "q",
        "tool": {
            "name": "db_aggregate",
            "args": {
                "source": "shop",
                "table": "orders",
                "measures": [{"agg": "count", "column": "*"}],
                "group_by": ["chanel"],
            },
        },
    }
    errors = _errors(_draft(step), shop_scope)
    assert [(e.code, e.path, e.message) for e in errors] == [
        (
            "unknown-column",
            "steps[0].tool.args.group_by[0]",
            "unknown column 'chanel' (did you mean 'channel'?)",
        )
    ]


def test_steps_that_need_a_person_cannot_run_in_a_turn(shop_scope: Scope) -> None:
    errors = _errors(
        _draft(
            {"id": "ok", "human": {"prompt": "Fine?"}},
            {"id": "manual"},
            {"id": "g", "needs": ["ok"], "gate": {"human": True}, "llm": {"prompt": "p"}},
        ),
        shop_scope,
    )
    assert [(e.code, e.path) for e in errors] == [
        ("not-automatic", "steps[0]"),
        ("not-automatic", "steps[1]"),
        ("not-automatic", "steps[2].gate"),
    ]


def test_an_agent_step_may_use_data_tools_only(shop_scope: Scope) -> None:
    errors = _errors(
        _draft({"id": "a", "agent": {"prompt": "p", "tools": ["db_query", "db_schema"]}}), shop_scope
    )
    assert errors == []


def test_an_unknown_tool_and_a_bad_need_come_from_the_formula_check(shop_scope: Scope) -> None:
    errors = _errors(
        _draft(
            {"id": "q", "tool": {"name": "db_queryy", "args": {}}},
            {"id": "a", "needs": ["qq"], "llm": {"prompt": "p"}},
        ),
        shop_scope,
    )
    codes = sorted(e.code for e in errors)
    assert codes == ["unknown-need", "unknown-tool"]
    assert any("did you mean 'db_query'" in e.message for e in errors)


def test_an_empty_workflow_and_ops_that_failed_are_errors(shop_scope: Scope) -> None:
    draft = Draft("t")
    draft.apply(Op("remove_step", {"id": "x"}, ""))
    errors = _errors(draft, shop_scope)
    assert [(e.code, e.message) for e in errors] == [
        ("op", "remove_step: no step 'x'"),
        ("no-steps", "the workflow has no steps: add_step one, or reply"),
    ]


def test_schema_problems_are_errors_with_their_paths(shop_scope: Scope) -> None:
    errors = _errors(_draft({"id": "q", "tool": {"name": "db_query"}, "retries": -1}), shop_scope)
    assert [(e.code, e.path) for e in errors] == [("schema", "steps[0].retries")]


@pytest.mark.parametrize("sql", ["SELECT 1", "SELECT date('now')", "VALUES (1, 2)"])
def test_queries_without_tables_pass(shop_scope: Scope, sql: str) -> None:
    assert _messages(sql, shop_scope) == []


@pytest.mark.parametrize(
    "sql",
    [
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT count(*) "
        "AS n FROM c",
        "SELECT d.total FROM (SELECT count(*) FROM orders) AS d(total)",
    ],
)
def test_column_lists_of_ctes_and_derived_tables_resolve(shop_scope: Scope, sql: str) -> None:
    assert _messages(sql, shop_scope) == []
