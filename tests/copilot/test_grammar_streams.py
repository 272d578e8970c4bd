"""Hallucinated tables and columns are impossible by construction: every op stream the grammar of a small
model allows passes the copilot's check, on the shop data and on Chinook, for the benchmark's questions.

A property test: streams are sampled at random from the GBNF grammar a turn sends llama.cpp (the walker of
``tests/models/test_local_grammar.py`` stands in for the model), each goes through the op reader, the draft
and the check a turn uses, and some run on the database. Two streams used to pass the grammar and fail the
check: a ``count`` of ``*`` with no table named, and an ``order_by`` on an aggregate no measure uses.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest

from plangate.copilot._check import check_draft
from plangate.copilot._generate import _op_of
from plangate.copilot._ops import Draft, OpReader
from plangate.copilot._scope import Scope, open_scope
from plangate.copilot.small._constrained import closing_ops, op_lines_schema, question_hints
from plangate.models._grammar import grammar_schema, schema_to_gbnf
from plangate.tools.data import compile_aggregate, parse_aggregate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from test_local_grammar import sentences

from _questions import question_sets

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
SAMPLES = 12
"""Streams sampled per question."""
RUN_EVERY = 4
"""One sampled stream in this many also runs on the database."""

# Questions the benchmark asks (its tuned and fan-out sets), plus the two shapes that used to escape.
EXTRA = {
    "shop": ["How many?", "Rank them by count, highest first", "Which 3 regions had the highest revenue?"],
    "chinook": ["How many?", "Which 5 genres earned the most?", "Top 3 countries by number of invoices"],
}


def _questions(name: str) -> list[str]:
    found = [
        q.question
        for group in ("", "fanout")
        for s in question_sets(group=group)
        if s.name == name
        for q in s.questions
    ]
    return [*found, *EXTRA[name]]


@pytest.fixture(scope="module")
def scopes() -> dict[str, Scope]:
    return {
        "shop": open_scope(DATA / "shop.db", categories=True),
        "chinook": open_scope(DATA / "chinook.sqlite", categories=True),
    }


def _streams(scope: Scope, question: str) -> list[str]:
    hints = question_hints(question, scope.categories, scope.schema, scope.semantic)
    grammar = schema_to_gbnf(grammar_schema(op_lines_schema(scope.schema, hints, scope.semantic)))
    return sentences(grammar, SAMPLES, seed=sum(map(ord, question)))


@pytest.mark.parametrize("name", ["shop", "chinook"])
def test_every_stream_the_grammar_allows_passes_the_check(scopes: dict[str, Scope], name: str) -> None:
    scope = scopes[name]
    database = scope.source.describe()
    failures: list[tuple[str, str, list[str]]] = []
    ran = 0
    with closing(sqlite3.connect(database)) as connection:
        for question in _questions(name):
            for index, text in enumerate(_streams(scope, question)):
                reader = OpReader()
                ops = [*reader.feed(text), *reader.close()]
                draft = Draft("t")
                problems = [draft.apply(op) for op in ops] + [draft.apply(_op_of(op)) for op in closing_ops()]
                _, _, issues = check_draft(draft, scope, {"question": question, "history": []})
                errors = [f"{i.code} {i.path}: {i.message}" for i in issues if i.level == "error"]
                errors += [p for p in problems if p is not None]
                if errors:
                    failures.append((question, text, errors))
                    continue
                if index % RUN_EVERY == 0:
                    args = draft.steps[0]["tool"]["args"]  # type: ignore[index,call-overload]
                    sql = compile_aggregate(parse_aggregate(args), scope.schema, scope.semantic).sql
                    connection.execute(sql).fetchmany(5)  # it runs: no error from the database
                    ran += 1
    assert failures == [], failures[:3]
    assert ran >= len(_questions(name)) * SAMPLES // RUN_EVERY


def test_the_two_streams_that_used_to_escape_are_closed(scopes: dict[str, Scope]) -> None:
    for name, scope in scopes.items():
        for question in EXTRA[name]:
            for text in _streams(scope, question):
                args = json.loads(text)["step"]["tool"]["args"]
                [measure] = args["measures"]
                assert measure.get("column") != "*", text  # a count of '*' names no table
                for order in args["order_by"]:  # the ordering names the measure written
                    assert order["column"] in (measure.get("agg"), measure.get("metric")), text
