"""Reading ops out of a model's text, tolerantly, and building a formula from them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.copilot._ops import Draft, Op, OpReader, ops_text, schema_problems, slug
from plangate.formulas.loader import validate_formula


def _read(*chunks: str) -> tuple[list[Op], OpReader]:
    reader = OpReader()
    ops = [op for chunk in chunks for op in reader.feed(chunk)]
    ops += list(reader.close())
    return ops, reader


def test_one_op_per_line_is_read_in_order() -> None:
    ops, _ = _read('{"op":"plan","summary":"s"}\n{"op":"look","table":"orders"}\n')
    assert [(op.name, op.fields) for op in ops] == [("plan", {"summary": "s"}), ("look", {"table": "orders"})]


def test_blank_fenced_prose_and_opless_lines_are_skipped_and_noted() -> None:
    text = (
        "Sure! Here is the workflow:\n\n```json\n"
        '{"op":"plan","summary":"s"}\n'
        '{"note":"no op here"}\n'
        "[1, 2]\n"
        '{"op":"dance"}\n'
        "```\n"
        '{"op":"done","explanation":"e","run":true}'
    )
    ops, reader = _read(text)
    assert [op.name for op in ops] == ["plan", "done"]
    assert reader.skipped == [
        "not JSON: 'Sure! Here is the workflow:'",
        'JSON without an op: \'{"note":"no op here"}\'',
        "JSON without an op: '[1, 2]'",
        "unknown op 'dance'",
    ]


def test_a_line_split_across_chunks_is_read_once_complete() -> None:
    line = '{"op":"add_step","step":{"id":"q","tool":{"name":"db_query","args":{"sql":"SELECT 1"}}}}\n'
    reader = OpReader()
    found = [op for i in range(0, len(line), 7) for op in reader.feed(line[i : i + 7])]
    assert [op.name for op in found] == ["add_step"]


def test_an_object_written_over_several_lines_is_read_whole() -> None:
    ops, _ = _read('{"op": "add_step",\n "step": {"id": "a",\n  "llm": {"prompt": "p"}}}\n{"op":"done"}\n')
    assert [op.name for op in ops] == ["add_step", "done"]
    assert ops[0].fields["step"] == {"id": "a", "llm": {"prompt": "p"}}


def test_an_op_inside_prose_and_an_array_of_ops_are_read() -> None:
    ops, _ = _read(
        'op 1: {"op":"plan","summary":"x"}\n[{"op":"look","table":"a"},{"op":"look","table":"b"}]\n'
    )
    assert [op.as_json() for op in ops] == [
        {"op": "plan", "summary": "x"},
        {"op": "look", "table": "a"},
        {"op": "look", "table": "b"},
    ]


def test_an_object_that_never_closes_is_noted_not_read() -> None:
    ops, reader = _read('{"op":"add_step","step":{"id":"a"\n')
    assert ops == [] and reader.skipped[0].startswith("an unfinished JSON object")


def test_read_is_what_the_model_wrote_up_to_the_last_complete_line() -> None:
    reader = OpReader()
    list(reader.feed('{"op":"look","table":"t"}\n{"op":"pl'))
    assert reader.read == '{"op":"look","table":"t"}\n'


@given(st.text(max_size=300))
def test_any_text_reads_without_raising(text: str) -> None:
    ops, _ = _read(text)
    assert all(
        op.name in ("plan", "look", "add_step", "update_step", "remove_step", "done", "reply", "ask")
        for op in ops
    )


# -- the draft -----------------------------------------------------------------------------------------------


def _op(name: str, **fields: object) -> Op:
    return Op(name, dict(fields), "")  # type: ignore[arg-type]


def _draft(*ops: Op) -> tuple[Draft, list[str | None]]:
    draft = Draft("ask-test")
    return draft, [draft.apply(op) for op in ops]


def test_ops_build_an_ordinary_formula() -> None:
    draft, problems = _draft(
        _op("plan", summary="Count orders"),
        _op(
            "add_step",
            step={"id": "q", "tool": {"name": "db_query", "args": {"source": "s", "sql": "SELECT 1"}}},
        ),
        _op("add_step", step={"id": "answer", "needs": ["q"], "llm": {"prompt": "{{steps.q.output.rows}}"}}),
        _op("done", explanation="e", run=False),
    )
    assert problems == [None, None, None, None]
    formula = draft.formula()
    assert formula == validate_formula(draft.data())
    assert [step.id for step in formula.steps] == ["q", "answer"]
    assert (formula.description, draft.explanation, draft.run) == ("Count orders", "e", False)


def test_update_step_merges_fields_and_null_deletes_one() -> None:
    step = {
        "id": "q",
        "title": "t",
        "retries": 1,
        "tool": {"name": "db_query", "args": {"sql": "SELECT 1", "source": "s"}},
    }
    draft, problems = _draft(
        _op("add_step", step=step),
        _op("update_step", id="q", title=None, tool={"args": {"sql": "SELECT 2"}}),
    )
    assert problems == [None, None]
    assert draft.steps == [
        {"id": "q", "retries": 1, "tool": {"name": "db_query", "args": {"sql": "SELECT 2", "source": "s"}}}
    ]


def test_update_step_accepts_the_fields_wrapped_in_step() -> None:
    draft, _ = _draft(
        _op("add_step", step={"id": "a", "title": "x"}), _op("update_step", id="a", step={"title": "y"})
    )
    assert draft.steps == [{"id": "a", "title": "y"}]


def test_remove_step_removes_it() -> None:
    draft, problems = _draft(
        _op("add_step", step={"id": "a"}), _op("add_step", step={"id": "b"}), _op("remove_step", id="a")
    )
    assert problems == [None, None, None] and [s["id"] for s in draft.steps] == ["b"]


@pytest.mark.parametrize(
    ("op", "problem"),
    [
        (_op("add_step", step="x"), "add_step: expected a step object in 'step', got str"),
        (_op("add_step", step={"title": "no id"}), "add_step: the step has no 'id'"),
        (
            _op("add_step", step={"id": "a"}),
            "add_step: a step 'a' exists already; change it with update_step",
        ),
        (_op("update_step", id="zz", title="t"), "update_step: no step 'zz' (steps: a)"),
        (_op("remove_step", id="zz"), "remove_step: no step 'zz'"),
    ],
)
def test_ops_that_cannot_apply_say_why_and_change_nothing(op: Op, problem: str) -> None:
    draft, _ = _draft(_op("add_step", step={"id": "a"}))
    assert draft.apply(op) == problem
    assert draft.steps == [{"id": "a"}] and draft.problems == [problem]


def test_a_step_that_does_not_fit_the_schema_is_reported_with_its_path() -> None:
    draft, _ = _draft(
        _op("add_step", step={"id": "a", "tool": {"name": "t"}, "llm": {"prompt": "p"}, "depnds": 1})
    )
    problems = schema_problems(draft)
    assert problems is not None
    assert ("steps[0].depnds", "unknown field (did you mean 'depends_on'?)") in problems


def test_ops_text_gives_the_add_step_lines_that_rebuild_the_formula() -> None:
    draft, _ = _draft(_op("add_step", step={"id": "a", "llm": {"prompt": "p"}}))
    lines = ops_text(draft.formula()).splitlines()
    assert [json.loads(line) for line in lines] == [
        {"op": "add_step", "step": {"id": "a", "llm": {"prompt": "p"}}}
    ]


@pytest.mark.parametrize(
    ("question", "name"),
    [
        (
            "Which 3 regions had the highest revenue in 2025?",
            "which-3-regions-had-the-highest-revenue-in-2025",
        ),
        (
            "How many orders were placed on the web channel in March of 2025 by customers?",
            "how-many-orders-were-placed-on-the-web-channel",
        ),
        ("每个地区的收入", "ask"),
    ],
)
def test_a_formula_is_named_after_its_question(question: str, name: str) -> None:
    assert slug(question) == name
