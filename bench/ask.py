"""Benchmark: the ask-your-data copilot over every question of ``bench/ask_questions/`` (shop and Chinook).

Each question is asked as a whole copilot turn (``plangate.copilot.Copilot``: generate, check, run, review,
retry) on a fresh SQLite store, per model:

- ``oracle``: a scripted model that replays the question's gold SQL as a ``db_query`` step and writes an
  answer from the rows it is shown. A check of the loop, not of intelligence: it must score about 100%, or
  the loop (the check, the run, the review, the scoring) has a defect.
- ``local``: the offline default model (SmolLM2-135M on llama.cpp), as ``plangate ask`` runs it.
- ``openai``: when ``OPENAI_BASE_URL`` is set and answers, the model ``PLANGATE_BENCH_OPENAI_MODEL`` names
  (else the first one the server lists) on it.

Reported per model (the rules are in ``bench/_scoring.py`` and the question files' headers):

- execution accuracy: a rows question is right when the turn's result rows equal the gold rows
  (``rows_match``); a no-data question when its result is no data (``is_no_data``) and its answer states no
  figure (``figures_in``);
- answers with an invented number (target 0): a delivered answer stating a figure that is not a cell of
  the rows the turn returned (rounded as written) nor their count; checked here, independently of the
  copilot's own number guard, whose catches are counted apart (``guard catches``); the line that says which
  metric definition an answer used is a quotation, not a figure, and is left out (``stated``);
- no-data questions answered with a number (target 0);
- confident wrong answers (target 0): turns that ended ``done`` (the review found nothing) with rows that
  are not the gold rows;
- turns that ended without a status (target 0): ``ask`` raised, or the turn is not stored whole;
- median seconds per turn;
- the gain of the reviewed retry: accuracy of the final answers minus accuracy of the first attempts.

Figures are given per group of question sets (``_questions.GROUPS``): the tuned sets, the fan-out questions
and the held-out set (written before the copilot was tuned for it and never tuned on: the figures that
count). The load average is printed with the figures (the machine may be shared). ``--quick`` asks the
local model a subset (``QUICK_PER_SET`` questions of each set, spread over the kinds); the oracle always
asks all.

Run:  .venv/bin/python bench/ask.py              (every question, every model: the full run)
      .venv/bin/python bench/ask.py --quick      (the local model on a subset)
      .venv/bin/python bench/ask.py --models oracle --json artifacts/bench/ask.json
      .venv/bin/python bench/ask.py --sets heldout,fanout --models local   (groups, or labels: heldout/shop)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _questions import Question, QuestionSet, every_question_set, run_gold
from _scoring import figures_in, is_no_data, rows_match
from plangate.copilot import Copilot, Turn
from plangate.copilot._conversations import Conversations
from plangate.copilot._review import DEFINITIONS_PREFIX
from plangate.models import Model, ModelRequest, ScriptedModel
from plangate.store import SQLiteStore
from plangate.tools.data import DataSources, QueryLimits

QUICK_PER_SET = 6
STATUSES = ("done", "partial", "unusable", "failed", "cancelled")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


# -- the oracle ----------------------------------------------------------------------------------------------


def _cell_text(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "NULL" if value is None else str(value)


def oracle_model(question_set: QuestionSet) -> ScriptedModel:
    """A scripted copilot that replays each question's gold SQL, then answers from the gold rows."""
    by_question: dict[str, tuple[str, str]] = {}
    source = question_set.name
    for question in question_set.questions:
        result = run_gold(question_set, question, limits=QueryLimits())
        if question.expect == "no_data" or is_no_data(result.rows):
            answer = "The data holds nothing for that period, so there is no figure to give."
        else:
            shown = [" | ".join(_cell_text(cell) for cell in row) for row in result.rows[:20]]
            answer = f"{' | '.join(result.columns)}: " + "; ".join(shown)
        ops = [
            {"op": "plan", "summary": f"replay the gold SQL of {question.id}"},
            {
                "op": "add_step",
                "step": {
                    "id": "gold",
                    "title": "the gold query",
                    "tool": {"name": "db_query", "args": {"source": source, "sql": question.gold_sql}},
                },
            },
            {
                "op": "add_step",
                "step": {
                    "id": "answer",
                    "needs": ["gold"],
                    "llm": {"prompt": "Question: {{question}}\nRows: {{steps.gold.output.rows}}"},
                },
            },
            {"op": "done", "explanation": "the gold query, then an answer", "run": True},
        ]
        by_question[question.question] = ("\n".join(json.dumps(op) for op in ops) + "\n", answer)

    def respond(request: ModelRequest) -> str:
        text = "\n".join(message.content for message in request.messages)
        # The longest question first: no question's text is cut from a longer one's.
        for asked in sorted(by_question, key=len, reverse=True):
            if asked in text:
                ops, answer = by_question[asked]
                return ops if request.purpose == "copilot" else answer
        return '{"op": "reply", "text": "no such question"}\n'

    return ScriptedModel(respond, name="oracle")


# -- scoring -------------------------------------------------------------------------------------------------


@dataclass
class Scored:
    """One turn, scored (``set``: the set's label, ``heldout/shop``)."""

    set: str
    id: str
    kind: str
    status: str
    correct: bool
    first_correct: bool
    invented: list[str]
    no_data_with_number: bool
    guard_catches: int
    attempts: int
    seconds: float
    reason: str = ""
    error: str = ""
    answer: str = ""


def _written(value: float, text: str) -> bool:
    """Whether ``value`` is ``text`` (a figure as written: ``1,328,137.93``, ``146``) after rounding."""
    digits = text.replace(",", "").lstrip("+")
    decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
    try:
        wanted = float(digits)
    except ValueError:
        return False
    return math.isfinite(value) and abs(round(value, decimals) - wanted) <= 0.5 * 10.0**-decimals + 1e-9


def invented_figures(
    answer: str, question: str, rows: Sequence[Sequence[object]], columns: Sequence[str] = ()
) -> list[str]:
    """The figures of ``answer`` that are neither a number in ``rows`` or ``columns`` (as written: the digits
    of ``MPEG-4`` in a cell, the ``100.0`` of a column named ``100.0 * x / y``) nor the count of rows."""
    numbers = [
        float(cell) for row in rows for cell in row if isinstance(cell, int | float) and cell is not True
    ]
    texts = [cell for row in rows for cell in row if isinstance(cell, str)] + list(columns)
    for text in texts:
        numbers += [float(m.replace(",", "")) for m in _NUMBER.findall(text)]
    numbers.append(float(len(rows)))
    return [text for text in figures_in(answer, question) if not any(_written(v, text) for v in numbers)]


def _right(
    question: Question, gold: Sequence[Sequence[object]], rows: list[list[object]], answer: str
) -> bool:
    if question.expect == "no_data":
        return is_no_data(rows) and not figures_in(answer, question.question)  # type: ignore[arg-type]
    return rows_match(gold, rows, ordered=question.ordered, precision=question.precision)  # type: ignore[arg-type]


def stated(answer: str) -> str:
    """What an answer states: its text without the lines that say which metric definitions it used
    (``Definition used: revenue = sum(… * (1 - …))`` quotes a definition; it states no figure)."""
    return "\n".join(line for line in answer.splitlines() if not line.startswith(DEFINITIONS_PREFIX)).strip()


def score(question_set: QuestionSet, question: Question, turn: Turn, seconds: float) -> Scored:
    """A stored turn against the question's gold answer."""
    gold = run_gold(question_set, question).rows
    rows = [list(row) for row in turn.result.rows]
    first = turn.attempts[0]
    first_answer = stated(first.answer) if first.status in ("done", "partial") else ""
    answer = stated(turn.answer)
    catches = sum(1 for a in turn.attempts for s in a.review.signals if s.kind == "invented_number")
    return Scored(
        set=question_set.label,
        id=question.id,
        kind=question.kind,
        status=turn.status,
        correct=_right(question, gold, rows, answer),
        first_correct=_right(question, gold, [list(r) for r in first.result.rows], first_answer),
        invented=invented_figures(answer, question.question, rows, turn.result.columns),
        no_data_with_number=question.expect == "no_data" and bool(figures_in(answer, question.question)),
        guard_catches=catches,
        attempts=len(turn.attempts),
        seconds=seconds,
        reason=turn.reason,
        answer=turn.answer[:300],
    )


# -- running -------------------------------------------------------------------------------------------------


def _stored_whole(store: SQLiteStore, turn: Turn) -> bool:
    try:
        stored = Conversations(store).get_turn(turn.id)
    except Exception:
        return False
    return stored.status in STATUSES and [a.n for a in stored.attempts] == list(
        range(1, len(turn.attempts) + 1)
    )


def ask_one(question_set: QuestionSet, question: Question, model: Model | str, store: SQLiteStore) -> Scored:
    """Ask one question as a whole turn and score it; a turn that raises is scored with its error."""
    sources = DataSources()
    sources.register(question_set.name, question_set.database)
    copilot = Copilot(model=model, store=store, sources=sources, owner="bench")
    started = time.perf_counter()
    try:
        turn = copilot.ask(question.question, question_set.name)
    except Exception as exc:
        seconds = time.perf_counter() - started
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return Scored(
            question_set.label,
            question.id,
            question.kind,
            "none",
            False,
            False,
            [],
            False,
            0,
            0,
            seconds,
            error=error,
        )
    seconds = time.perf_counter() - started
    scored = score(question_set, question, turn, seconds)
    if turn.status not in STATUSES or not _stored_whole(store, turn):
        scored.status = "none"
    return scored


@dataclass
class Figures:
    """The figures of one model."""

    model: str
    group: str
    questions: int
    accuracy: float
    correct: int
    first_attempt_correct: int
    retry_gain_points: float
    invented_number_answers: int
    confident_wrong: int
    no_data_with_number: int
    no_data_questions: int
    without_status: int
    median_seconds: float
    guard_catches: int
    statuses: dict[str, int] = field(default_factory=dict)
    per_set: dict[str, str] = field(default_factory=dict)


def group_of(label: str) -> str:
    """The group of a set's label: ``heldout`` for ``heldout/shop``, ``tuned`` for ``shop``."""
    return label.partition("/")[0] if "/" in label else "tuned"


def figures(model: str, scored: list[Scored], group: str = "all") -> Figures:
    """What the benchmark reports, from the scored turns of one model (of one group of sets)."""
    n = len(scored) or 1
    correct = sum(s.correct for s in scored)
    first = sum(s.first_correct for s in scored)
    statuses: dict[str, int] = {}
    for s in scored:
        statuses[s.status] = statuses.get(s.status, 0) + 1
    per_set = {}
    for name in sorted({s.set for s in scored}):
        mine = [s for s in scored if s.set == name]
        per_set[name] = f"{sum(s.correct for s in mine)}/{len(mine)}"
    return Figures(
        model=model,
        group=group,
        questions=len(scored),
        accuracy=round(100 * correct / n, 1),
        correct=correct,
        first_attempt_correct=first,
        retry_gain_points=round(100 * (correct - first) / n, 1),
        invented_number_answers=sum(bool(s.invented) for s in scored),
        confident_wrong=sum(s.status == "done" and not s.correct for s in scored),
        no_data_with_number=sum(s.no_data_with_number for s in scored),
        no_data_questions=sum(s.kind == "no_data" for s in scored),
        without_status=sum(s.status == "none" for s in scored),
        median_seconds=round(statistics.median([s.seconds for s in scored]), 2) if scored else 0.0,
        guard_catches=sum(s.guard_catches for s in scored),
        statuses=statuses,
        per_set=per_set,
    )


QUICK_KINDS = ("count", "top_n", "group_by", "date_filter", "no_data", "sum", "avg", "join3", "min_max")
"""The kinds ``--quick`` takes a question of, in this order (the first question of each kind in the file)."""


def quick_subset(question_set: QuestionSet, count: int) -> list[Question]:
    """``count`` questions of the set: the first of each kind of ``QUICK_KINDS``, in that order, then the
    first ones of the file; in file order."""
    chosen: list[Question] = []
    for kind in QUICK_KINDS:
        found = next((q for q in question_set.questions if q.kind == kind), None)
        if found is not None and len(chosen) < count:
            chosen.append(found)
    for question in question_set.questions:
        if len(chosen) >= count:
            break
        if question not in chosen:
            chosen.append(question)
    return sorted(chosen, key=question_set.questions.index)


def openai_spec() -> str | None:
    """``openai:<model>`` when ``OPENAI_BASE_URL`` answers, else None."""
    base = os.environ.get("OPENAI_BASE_URL")
    if not base:
        return None
    try:
        response = httpx.get(
            base.rstrip("/") + "/models",
            headers={"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'x')}"},
            timeout=5,
        )
        response.raise_for_status()
        listed = [item["id"] for item in response.json().get("data", []) if isinstance(item, dict)]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        print(f"OPENAI_BASE_URL={base} does not answer ({type(exc).__name__}): the openai part is skipped")
        return None
    chosen = os.environ.get("PLANGATE_BENCH_OPENAI_MODEL") or (listed[0] if listed else None)
    return f"openai:{chosen}" if chosen else None


def run_model(
    name: str,
    model_for: Callable[[QuestionSet], Model | str],
    plan: list[tuple[QuestionSet, list[Question]]],
    progress: bool,
) -> list[Scored]:
    """Every planned question on one model, each turn on the same fresh store."""
    scored: list[Scored] = []
    with tempfile.TemporaryDirectory(prefix=f"plangate-bench-ask-{name}-") as folder:
        store = SQLiteStore(Path(folder) / "store.db")
        try:
            for question_set, questions in plan:
                model = model_for(question_set)
                for question in questions:
                    result = ask_one(question_set, question, model, store)
                    scored.append(result)
                    if progress:
                        mark = "ok " if result.correct else "-- "
                        where = f"{question_set.label}/{question.id}"
                        print(
                            f"  {name:7} {mark}{where:40} {result.status:9} "
                            f"{result.seconds:6.1f}s {result.error or result.reason[:70]}",
                            flush=True,
                        )
        finally:
            store.close()
    return scored


def _table(rows: list[Figures]) -> str:
    head = (
        "| model | group | questions | execution accuracy | confident wrong | first attempt | retry gain | "
        "invented-number answers | no-data answered with a number | without status | median s/turn | "
        "guard catches | per set |"
    )
    lines = [head, "|" + "---|" * 13]
    for f in rows:
        per_set = ", ".join(f"{k} {v}" for k, v in f.per_set.items())
        lines.append(
            f"| {f.model} | {f.group} | {f.questions} | {f.accuracy}% ({f.correct}) | {f.confident_wrong} | "
            f"{f.first_attempt_correct} | "
            f"{f.retry_gain_points:+} pts | {f.invented_number_answers} | {f.no_data_with_number}/"
            f"{f.no_data_questions} | {f.without_status} | {f.median_seconds} | {f.guard_catches} | "
            f"{per_set} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"the local model on {QUICK_PER_SET} questions a set"
    )
    parser.add_argument(
        "--models", default="oracle,local,openai", help="comma-separated: oracle, local, openai"
    )
    parser.add_argument(
        "--sets",
        default="",
        help="groups (tuned, fanout, heldout) or labels (shop, heldout/chinook) (default: all)",
    )
    parser.add_argument("--only", default="", help="comma-separated question ids (any set)")
    parser.add_argument("--json", type=Path, help="write the figures and every scored turn here")
    parser.add_argument("--quiet", action="store_true", help="no line per turn")
    args = parser.parse_args(argv)

    chosen = set(filter(None, args.sets.split(",")))
    sets = [
        s for s in every_question_set() if not chosen or s.label in chosen or group_of(s.label) in chosen
    ]
    only = set(filter(None, args.only.split(",")))
    full = [(s, [q for q in s.questions if not only or q.id in only]) for s in sets]
    quick = [(s, [q for q in quick_subset(s, QUICK_PER_SET) if not only or q.id in only]) for s in sets]
    wanted = args.models.split(",")
    cores = os.cpu_count()
    load_before = os.getloadavg()
    print(f"bench/ask.py: {sum(len(q) for _, q in full)} questions; {cores} cores; load {load_before[0]:.2f}")

    results: dict[str, list[Scored]] = {}
    if "oracle" in wanted:
        results["oracle"] = run_model("oracle", oracle_model, full, not args.quiet)
    if "local" in wanted:
        results["local"] = run_model(
            "local", lambda _: "local", quick if args.quick else full, not args.quiet
        )
    if "openai" in wanted and (spec := openai_spec()) is not None:
        results[spec] = run_model("openai", lambda _: spec, full, not args.quiet)

    load_after = os.getloadavg()
    table = []
    for name, scored in results.items():
        groups = list(dict.fromkeys(group_of(s.set) for s in scored))
        table += [figures(name, [s for s in scored if group_of(s.set) == g], g) for g in groups]
        if len(groups) > 1:
            table.append(figures(name, scored))
    print()
    print(_table(table))
    print(
        f"\nload average {load_before[0]:.2f} before, {load_after[0]:.2f} after (1 min); {cores} cores; "
        f"{'--quick: the local model on a subset' if args.quick else 'every question'}"
    )
    for name, scored in results.items():
        wrong = [f"{s.set}/{s.id}" for s in scored if not s.correct]
        if name == "oracle" and wrong:
            print(f"oracle: wrong on {', '.join(wrong)} (each one is a defect of the loop or of the scoring)")
        invented = [f"{s.set}/{s.id}: {', '.join(s.invented)}" for s in scored if s.invented]
        if invented:
            print(f"{name}: invented numbers in {'; '.join(invented)}")
        confident = [f"{s.set}/{s.id}" for s in scored if s.status == "done" and not s.correct]
        if confident:
            print(f"{name}: confident wrong answers (done, rows wrong): {', '.join(confident)}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "load": {"before": load_before, "after": load_after, "cores": cores},
            "quick": args.quick,
            "figures": [asdict(f) for f in table],
            "turns": {name: [asdict(s) for s in scored] for name, scored in results.items()},
        }
        args.json.write_text(json.dumps(data, indent=2))
        print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
