"""The ask benchmark's question sets: every file loads, every gold SQL is honest, the kinds are covered.

"Honest" means: the gold SQL parses (sqlglot, SQLite dialect), passes plangate's read-only guard and runs
through plangate's own data source; a question expecting rows gets real rows (not "no data"), a no-data
question gets no data, and gets data again once its period is taken out of the query; a kind is what the SQL
does (a join3 question joins three tables); a top-N answer has no tie at its cut-off; gold SQL never rounds.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from bench_modules import load
from sqlglot import exp

from plangate.tools.data import QueryLimits
from plangate.tools.sql_guard import check_read_only

questions = load("_questions")
scoring = load("_scoring")

SETS = {question_set.name: question_set for question_set in questions.question_sets()}
EVERY = questions.every_question_set()
CASES = [
    pytest.param(question_set, question, id=f"{question_set.label}:{question.id}")
    for question_set in EVERY
    for question in question_set.questions
]
CORE_KINDS = ("count", "sum", "avg", "group_by", "top_n", "date_filter", "join2", "join3")
MINIMUMS = {  # questions per set, each core kind per set, no-data questions per set
    "shop": (40, 3, 5),
    "chinook": (15, 2, 5),
}
MAX_GOLD_ROWS = 50
"""A question whose answer is longer than this is a data dump, not a question."""
_DATE_COLUMN = re.compile(r"date|_on$", re.IGNORECASE)


def _tree(question: Any) -> exp.Expr:
    return sqlglot.parse_one(question.gold_sql, read="sqlite")


def _tables(tree: exp.Expr) -> set[str]:
    return {table.name.lower() for table in tree.find_all(exp.Table)}


def _top_one(tree: exp.Expr) -> bool:
    limit = tree.args.get("limit")
    return tree.args.get("order") is not None and limit is not None and limit.expression.name == "1"


def _filters_a_date(tree: exp.Expr) -> bool:
    columns = (column for where in tree.find_all(exp.Where) for column in where.find_all(exp.Column))
    return any(_DATE_COLUMN.search(column.name) for column in columns)


# ------------------------------------------------------------------------------------------- the files


def test_the_fan_out_and_held_out_groups_hold_a_set_of_each_database() -> None:
    for group in ("fanout", "heldout"):
        sets = questions.question_sets(group=group)
        assert sorted(s.name for s in sets) == ["chinook", "shop"], group
        assert all(s.label == f"{group}/{s.name}" and s.database == SETS[s.name].database for s in sets)
    held = {s.name: s for s in questions.question_sets(group="heldout")}
    assert len(held["chinook"].questions) >= 20 and len(held["shop"].questions) >= 20
    # The held-out set says what it is in its header: written before the change and never tuned on.
    for question_set in held.values():
        assert "never" in question_set.path.read_text().split("\n\n", 1)[0]


@pytest.mark.parametrize("group", ["", "fanout", "heldout"])
def test_ids_are_unique_within_each_group(group: str) -> None:
    for question_set in questions.question_sets(group=group):
        ids = Counter(question.id for question in question_set.questions)
        assert [item for item, count in ids.items() if count > 1] == [], question_set.label


def test_both_databases_have_a_question_set_of_the_required_size() -> None:
    assert set(SETS) == set(MINIMUMS)
    for name, (total, _, _) in MINIMUMS.items():
        assert len(SETS[name].questions) >= total, name
        assert SETS[name].database.stem == name  # the source name the copilot gives a file
    assert SETS["shop"].database == Path(questions.__file__).parents[1] / "examples" / "data" / "shop.db"
    assert SETS["chinook"].database.name == "chinook.sqlite"
    assert (SETS["chinook"].database.parent / "chinook.LICENSE.md").is_file()


@pytest.mark.parametrize("name", sorted(MINIMUMS))
def test_the_kinds_are_covered(name: str) -> None:
    _, per_kind, no_data = MINIMUMS[name]
    kinds = SETS[name].kinds()
    short = {kind: kinds[kind] for kind in CORE_KINDS if kinds[kind] < per_kind}
    assert not short, f"{name}: fewer than {per_kind} questions of {short}"
    assert kinds["no_data"] >= no_data
    assert sum(question.expect == "no_data" for question in SETS[name].questions) == kinds["no_data"]


@pytest.mark.parametrize("name", sorted(MINIMUMS))
def test_ids_and_questions_are_unique(name: str) -> None:
    ids = Counter(question.id for question in SETS[name].questions)
    texts = Counter(question.question.lower() for question in SETS[name].questions)
    assert [item for item, count in ids.items() if count > 1] == []
    assert [item for item, count in texts.items() if count > 1] == []


def test_the_shop_date_filters_cover_years_months_quarters_and_relative_periods() -> None:
    texts = " ".join(q.question.lower() for q in SETS["shop"].questions if q.kind == "date_filter")
    phrases = ("in 2025", "march 2026", "q4 2025", "first quarter", "latest month", "most recent quarter")
    for phrase in phrases:
        assert phrase in texts


# ------------------------------------------------------------------------------------------ gold SQL


@pytest.mark.parametrize(("question_set", "question"), CASES)
def test_gold_sql_parses_and_passes_the_read_only_guard(question_set: Any, question: Any) -> None:
    tree = _tree(question)
    assert isinstance(tree, exp.Select), "gold SQL is one SELECT"
    verdict = check_read_only(question.gold_sql, "sqlite")
    assert verdict.allowed, verdict.reason
    assert not list(tree.find_all(exp.Round)), "gold SQL keeps full precision (the scorer rounds)"


@pytest.mark.parametrize(("question_set", "question"), CASES)
def test_gold_sql_runs_and_returns_what_the_question_expects(question_set: Any, question: Any) -> None:
    result = questions.run_gold(question_set, question)
    assert not result.more_rows
    assert len(result.rows) <= MAX_GOLD_ROWS
    if question.expect == "no_data":
        assert scoring.is_no_data(result.rows), result.rows
    else:
        assert result.rows, "a question that expects rows gets rows"
        assert not scoring.is_no_data(result.rows), f"{result.rows} reads as no data"
    # The scorer accepts the gold answer itself, in any row order when order is not part of it.
    ordered = question.ordered
    assert scoring.rows_match(result.rows, result.rows[::-1] if not ordered else result.rows, ordered=ordered)


@pytest.mark.parametrize(("question_set", "question"), CASES)
def test_the_kind_is_what_the_sql_does(question_set: Any, question: Any) -> None:
    tree = _tree(question)
    kind = question.kind
    tables = _tables(tree)
    checks = {
        "count": lambda: any(tree.find_all(exp.Count)),
        "sum": lambda: any(tree.find_all(exp.Sum)),
        "avg": lambda: any(tree.find_all(exp.Avg)),
        # the longest, the most: min() or max(), or the one row on top of an ordering
        "min_max": lambda: any(tree.find_all(exp.Min, exp.Max)) or _top_one(tree),
        "ratio": lambda: any(tree.find_all(exp.Div)),
        "group_by": lambda: tree.args.get("group") is not None,
        "top_n": lambda: tree.args.get("order") is not None and tree.args.get("limit") is not None,
        "date_filter": lambda: _filters_a_date(tree),
        # The held-out files are frozen as first written: two of their "join2" questions join a third table.
        "join2": lambda: len(tables) == 2 or (question_set.group == "heldout" and len(tables) >= 2),
        "join3": lambda: len(tables) >= 3,
        "no_data": lambda: _filters_a_date(tree),
    }
    assert checks[kind](), f"a {kind} question whose SQL does not do it (tables: {sorted(tables)})"
    if question.ordered:
        assert tree.args.get("order") is not None, "an ordered answer needs an ORDER BY"


@pytest.mark.parametrize(
    ("question_set", "question"),
    [case for case in CASES if _tree(case.values[1]).args.get("limit") is not None],
)
def test_a_top_n_answer_has_no_tie_at_its_cut_or_in_its_order(question_set: Any, question: Any) -> None:
    tree = _tree(question)
    source = questions.open_source(question_set)
    limit = int(tree.args["limit"].expression.name)
    as_written = source.query(tree.sql(dialect="sqlite"), QueryLimits())
    assert as_written.rows == source.query(question.gold_sql, QueryLimits()).rows
    unlimited = tree.copy()
    unlimited.set("limit", None)
    everything = source.query(unlimited.sql(dialect="sqlite"), QueryLimits())
    keys = [_order_key(tree, everything.columns, row) for row in everything.rows]
    if len(keys) > limit:
        assert keys[limit - 1] != keys[limit], f"a tie at the cut: {everything.rows[limit - 1 : limit + 1]}"
    if question.ordered:
        top = keys[:limit]
        assert len(set(top)) == len(top), f"a tie inside the ranked answer: {everything.rows[:limit]}"


def _order_key(tree: exp.Expr, columns: list[str], row: tuple[object, ...]) -> tuple[object, ...]:
    lowered = [column.lower() for column in columns]
    key = []
    for term in tree.args["order"].expressions:
        target = term.this
        if isinstance(target, exp.Literal) and not target.is_string:
            key.append(row[int(target.name) - 1])
        elif isinstance(target, exp.Column) and target.name.lower() in lowered:
            key.append(row[lowered.index(target.name.lower())])
        else:
            raise AssertionError(f"order by an output column so that ties can be checked, not {target.sql()}")
    return tuple(key)


@pytest.mark.parametrize(
    ("question_set", "question"), [case for case in CASES if case.values[1].expect == "no_data"]
)
def test_a_no_data_question_has_data_once_its_period_is_taken_out(question_set: Any, question: Any) -> None:
    # Proves the gold is empty because of the period the question names, not because of a typo elsewhere.
    tree = _tree(question)

    def without_dates(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Predicate):
            if any(_DATE_COLUMN.search(column.name) for column in node.find_all(exp.Column)):
                return exp.true()
        return node

    widened = tree.transform(without_dates)
    assert widened.sql() != tree.sql(), "no date predicate found"
    result = questions.open_source(question_set).query(widened.sql(dialect="sqlite"), QueryLimits())
    assert not scoring.is_no_data(result.rows), widened.sql()


# ---------------------------------------------------------------------------------------- bad files


def _write(tmp_path: Path, body: str, *, database: str = "shop.db") -> Path:
    shutil.copyfile(SETS["shop"].database, tmp_path / "shop.db")
    path = tmp_path / "bad.toml"
    path.write_text(f'name = "shop"\ndatabase = "{database}"\n\n{body}', encoding="utf-8")
    return path


GOOD = """
[[questions]]
id = "customers-total"
kind = "count"
question = "How many customers?"
gold_sql = "SELECT count(*) FROM customers"
"""


def test_a_good_file_loads_into_typed_records(tmp_path: Path) -> None:
    loaded = questions.load_question_set(_write(tmp_path, GOOD))
    assert loaded.name == "shop" and loaded.database == (tmp_path / "shop.db").resolve()
    question = loaded.get("customers-total")
    assert (question.kind, question.expect, question.ordered) == ("count", "rows", False)
    assert question.precision == 2
    assert question.gold_columns == () and question.note == ""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (GOOD + GOOD, "question 'customers-total': the id is used twice (again in entry 2)"),
        (GOOD.replace('"count"', '"counts"'), "question 'customers-total': kind: expected one of count, sum"),
        (GOOD.replace("gold_sql", "gold_sq"), "question 'customers-total': missing gold_sql"),
        (GOOD + "orderd = true\n", "question 'customers-total': unknown key 'orderd'"),
        (GOOD.replace('id = "customers-total"', 'id = "Customers Total"'), "question entry 1: id: expected"),
        (GOOD.replace('id = "customers-total"\n', ""), "question entry 1: missing id"),
        (GOOD + 'expect = "no_data"\n', "kind 'count' with expect 'no_data'"),
        (GOOD.replace('"count"', '"no_data"'), "kind 'no_data' with expect 'rows'"),
        (GOOD + "precision = 9\n", "precision: expected a whole number from 0 to 6, got 9"),
        (GOOD + "ordered = 1\n", "ordered: expected true or false, got 1"),
        (GOOD + 'gold_columns = "name"\n', "gold_columns: expected a list of column names"),
        (GOOD.replace('"How many customers?"', '"  "'), "question: expected a non-empty string"),
        (GOOD.replace('"How many customers?"', "how many"), "not valid TOML"),
        ("", "expected at least one [[questions]] entry"),
        ("questions = [1]\n", "question entry 1: expected a table of keys, got 1"),
        ('owner = "x"\n' + GOOD, "unknown top-level key 'owner'"),
    ],
)
def test_a_bad_entry_names_the_file_and_the_question(tmp_path: Path, body: str, message: str) -> None:
    path = _write(tmp_path, body)
    with pytest.raises(questions.QuestionFileError) as caught:
        questions.load_question_set(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_a_missing_database_or_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(questions.QuestionFileError, match=r"database: expected an existing SQLite file"):
        questions.load_question_set(_write(tmp_path, GOOD, database="nowhere.db"))
    with pytest.raises(questions.QuestionFileError, match=r"cannot read the file"):
        questions.load_question_set(tmp_path / "absent.toml")


def test_a_gold_column_that_is_not_in_the_result_is_named(tmp_path: Path) -> None:
    loaded = questions.load_question_set(_write(tmp_path, GOOD + 'gold_columns = ["total"]\n'))
    expected = r"question 'customers-total': gold_columns: 'total' is not a column"
    with pytest.raises(questions.QuestionFileError, match=expected):
        questions.run_gold(loaded, loaded.get("customers-total"))


def test_the_command_line_checks_every_file_and_prints_the_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert questions.main([]) == 0
    out = capsys.readouterr().out
    assert f"shop.toml: {len(SETS['shop'].questions)} questions (" in out and "chinook.toml: " in out
    assert questions.main([str(_write(tmp_path, GOOD + GOOD))]) == 1
    assert "the id is used twice" in capsys.readouterr().err
