"""``bench/ask.py``: the oracle replays the gold SQL through whole turns and scores 100% (a check of the
loop), and the benchmark's own checks (invented figures, the figures it reports) find what they count."""

from __future__ import annotations

from pathlib import Path

from bench_modules import load

from plangate.copilot import Turn
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore

questions = load("_questions")
bench = load("ask")


def _set(name: str):  # type: ignore[no-untyped-def]
    return next(s for s in questions.question_sets() if s.name == name)


def test_the_oracle_answers_a_question_of_every_kind_right_through_whole_turns(tmp_path: Path) -> None:
    scored = []
    store = SQLiteStore(tmp_path / "store.db")
    try:
        for name in ("shop", "chinook"):
            question_set = _set(name)
            model = bench.oracle_model(question_set)
            for question in bench.quick_subset(question_set, 12):
                scored.append(bench.ask_one(question_set, question, model, store))
    finally:
        store.close()
    kinds = {s.kind for s in scored}
    assert {"no_data", "join3", "date_filter", "top_n"} <= kinds
    wrong = [(s.set, s.id, s.status, s.reason) for s in scored if not s.correct]
    assert wrong == []
    figures = bench.figures("oracle", scored)
    assert (figures.accuracy, figures.invented_number_answers, figures.without_status) == (100.0, 0, 0)
    assert figures.no_data_with_number == 0 and figures.no_data_questions >= 2


def test_a_wrong_query_is_scored_wrong_and_a_made_up_figure_is_counted(tmp_path: Path) -> None:
    question_set = _set("shop")
    question = question_set.get("customers-total")
    ops = (
        '{"op": "add_step", "step": {"id": "q", "tool": {"name": "db_query", "args": {"source": "shop", '
        '"sql": "SELECT count(*) AS n FROM products"}}}}\n'
        '{"op": "add_step", "step": {"id": "answer", "needs": ["q"], "llm": {"prompt": "{{question}} '
        '{{steps.q.output.rows}}"}}}\n{"op": "done", "run": true}\n'
    )
    model = ScriptedModel(lambda request: ops if request.purpose == "copilot" else "There are 40 products.")
    store = SQLiteStore(tmp_path / "store.db")
    try:
        scored = bench.ask_one(question_set, question, model, store)
    finally:
        store.close()
    assert scored.status == "done" and not scored.correct and not scored.first_correct
    assert scored.invented == []  # 40 is what it read: wrong, but not made up
    assert bench.figures("scripted", [scored]).confident_wrong == 1  # done, and wrong


def test_the_line_that_says_which_definition_an_answer_used_states_no_figure() -> None:
    answer = "Revenue was 12.50.\n\nDefinition used: revenue = sum(a.b * (1 - a.c)) (net revenue)."
    assert bench.stated(answer) == "Revenue was 12.50."
    assert bench.invented_figures(bench.stated(answer), "q?", [[12.5]]) == []


def test_invented_figures_are_those_not_in_the_rows_as_written() -> None:
    rows = [["East", 1328137.929999979], ["MPEG-4 video file", 3]]
    assert bench.invented_figures("East: 1,328,137.93 over 2 rows; 3 MPEG-4 files", "q?", rows) == []
    assert bench.invented_figures("East: 1,328,138.93", "q?", rows) == ["1,328,138.93"]
    assert bench.invented_figures("about 1.3 million", "q?", rows) == ["1.3"]
    assert bench.invented_figures("100.0 percent", "share?", [[12.5]], ["100.0 * a / b"]) == []


def test_a_turn_that_raises_counts_as_ended_without_status(tmp_path: Path) -> None:
    question_set = _set("shop")
    question = question_set.questions[0]
    store = SQLiteStore(tmp_path / "store.db")
    try:
        scored = bench.ask_one(question_set, question, "nosuch:model", store)
    finally:
        store.close()
    assert scored.status == "none" and "unknown model provider" in scored.error
    assert bench.figures("broken", [scored]).without_status == 1
    assert Turn  # the type the scorer reads
