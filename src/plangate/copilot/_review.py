"""Review: rules first, read from the run's events and output; a model only when the rules found something.

For: the signals of an attempt (``tool_error``, ``step_failed``, ``empty_output``, ``step_limit_hit``,
``empty_query_result``, ``no_rows_in_range``, ``leaked_markup`` (markup, or text of the run's own prompts:
an answer step that echoes its instructions), ``invented_number``, ``answer_denies_rows``, and
``_shape``'s ``fan_out`` and ``query_shape``), what counts as the data a run read (for the number guard),
and the optional model
review (purpose ``review``), which may annotate the answer, rewrite it (a rewrite that adds a number the data
does not hold is reverted) and veto a retry, but never force one. Every model's answers go through these
rules. Not for: deciding whether to retry (``policy.retry_after_review``), or what replaces a small model's
unusable sentence (``plangate.copilot.small``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import JsonValue

from plangate.copilot._numbers import Known, invented
from plangate.copilot._periods import asked_period
from plangate.copilot._prompt import PROTOCOL
from plangate.copilot._run import Read, RunOutcome
from plangate.copilot._scope import Scope
from plangate.copilot._shape import fan_out_signals, shape_signals
from plangate.copilot.results import Review, Signal
from plangate.errors import PlangateError
from plangate.formulas import Plan
from plangate.formulas._executors import parse_json_answer
from plangate.formulas.plan import AgentExecutor, LlmExecutor, ToolExecutor
from plangate.models import Message, Model, ModelRequest, ResponseSchema, complete
from plangate.tools.data.periods import DateRange

_RETRYING = re.compile(r"^attempt \d+ failed \((?P<why>.*)\); retrying$", re.DOTALL)
_MARKUP = re.compile(
    r"<\s*/?\s*(decision|think|tool_call|html|div|span|p|br|table|script)\b|```|\{\{|\}\}|\{\s*\"op\"\s*:"
    r"|<\|[a-z_]+\|>|\[/?INST\]|(?m:^\s*Question:)",
    re.IGNORECASE,
)
_SHOWN = 5
_DENIES = re.compile(
    r"\b(no data|no rows|no results|no records|no information|not found|none for|has none|found nothing|"
    r"(does not|doesn't|do not|don't) (have|contain|hold|include) (any )?(data|rows|records|information))\b",
    re.IGNORECASE,
)


def known_data(question: str, plan: Plan | None, outcome: RunOutcome | None, known: Known) -> Known:
    """Add what a run read to ``known``: the question, the workflow's arguments, every data step's rows and
    row count, and the observations of tools its agents called."""
    known.add_text(question)
    if plan is not None:
        for step in plan.steps:
            if isinstance(step.executor, ToolExecutor):
                known.add_text(json.dumps(step.executor.args, ensure_ascii=False))
    if outcome is not None:
        for read in outcome.reads:
            known.add_values([len(read.rows)])
            known.add_values(list(read.columns))
            for row in read.rows:
                known.add_cells(row)
        for result in outcome.agent_results:
            known.add_value(result.observation)
    return known


def _tool_of(plan: Plan, step_id: str) -> str | None:
    step = plan.index.get(step_id)
    return step.executor.name if step is not None and isinstance(step.executor, ToolExecutor) else None


def _tool_errors(outcome: RunOutcome) -> list[Signal]:
    """Failed tool calls that were retried (the step's final failure is ``step_failed``): degraded when the
    same tool later succeeded, broken otherwise."""
    plan = outcome.plan
    calls: list[tuple[str, bool, str]] = []  # (tool, success, why) in order
    for event in outcome.step_events:
        tool = _tool_of(plan, event.step_id)
        if tool is None:
            continue
        retry = _RETRYING.match(event.reason) if event.status == "ready" else None
        if retry is not None:
            calls.append((tool, False, f"step {event.step_id!r}: {retry.group('why')}"))
        elif event.status == "complete":
            calls.append((tool, True, ""))
    for result in outcome.agent_results:
        calls.append(
            (result.tool, result.success, f"{result.tool}: {result.error_message or result.summary}")
        )
    signals: list[Signal] = []
    for index, (tool, success, why) in enumerate(calls):
        if success:
            continue
        recovered = any(ok and name == tool for name, ok, _ in calls[index + 1 :])
        severity = "degraded" if recovered else "broken"
        detail = why + ("; it succeeded later" if recovered else "")
        signals.append(Signal(kind="tool_error", detail=detail, severity=severity))
    return signals


def _step_signals(outcome: RunOutcome) -> list[Signal]:
    signals: list[Signal] = []
    finals = {event.step_id: event for event in outcome.step_events}
    for step_id, status in outcome.steps.items():
        if status == "failed":
            why = finals[step_id].reason if step_id in finals else "failed"
            signals.append(
                Signal(kind="step_failed", detail=f"step {step_id!r} failed: {why}", severity="broken")
            )
    if not outcome.completed and not signals:
        signals.append(Signal(kind="step_failed", detail=outcome.reason, severity="broken"))
    for step in outcome.plan.steps:
        if isinstance(step.executor, AgentExecutor) and outcome.steps.get(step.id) == "failed":
            reason = finals[step.id].reason if step.id in finals else ""
            if "exhausted" in reason:
                signals.append(
                    Signal(
                        kind="step_limit_hit",
                        detail=f"step {step.id!r} ran out of rounds",
                        severity="degraded",
                    )
                )
    return signals


def _read_signals(reads: list[Read]) -> list[Signal]:
    signals: list[Signal] = []
    for read in reads:
        if read.truncated or read.clipped:
            limit = "row limit" if read.truncated else "size limit"
            signals.append(
                Signal(
                    kind="step_limit_hit",
                    detail=f"step {read.step_id!r} hit the {limit} "
                    f"({len(read.rows):,} rows kept): aggregate or filter",
                    severity="degraded",
                )
            )
        if not read.rows:
            signals.append(
                Signal(
                    kind="empty_query_result",
                    detail=f"step {read.step_id!r} returned no rows",
                    severity="degraded",
                )
            )
    return signals


def _relevant_ranges(reads: list[Read], scope: Scope) -> list[DateRange]:
    ranges: list[DateRange] = []
    for read in reads:
        period = read.args.get("period")
        if read.tool == "db_aggregate" and isinstance(period, dict) and isinstance(period.get("column"), str):
            column = str(period["column"]).lower()
            ranges += [
                r
                for r in scope.dates
                if f"{r.table}.{r.column}".lower() == column
                or (r.column.lower() == column and r.table.lower() == str(read.args.get("table")).lower())
            ]
            continue
        text = json.dumps(read.args, ensure_ascii=False).lower()
        named = [r for r in scope.dates if re.search(rf"\b{re.escape(r.table.lower())}\b", text)]
        columns = [r for r in named if re.search(rf"\b{re.escape(r.column.lower())}\b", text)]
        ranges += columns or named
    return list(dict.fromkeys(ranges))


def no_rows_in_range(question: str, reads: list[Read], scope: Scope) -> Signal | None:
    """The ``no_rows_in_range`` signal, when the question names a period that no date column read covers."""
    period = asked_period(question)
    if period is None or period.start is None or period.end is None:
        return None
    ranges = _relevant_ranges(reads, scope)
    if not ranges or any(period.overlaps(r.first, r.last) for r in ranges):
        return None
    covered = "; ".join(r.describe() for r in ranges[:3])
    return Signal(
        kind="no_rows_in_range",
        detail=f"the question asks about {period.label}, but {covered}",
        severity="degraded",
    )


_PLACEHOLDER = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_PIECES = re.compile(r"(?<=[.!?:])\s+|\n+")
_ECHO_WORDS = 5
"""Words a piece of a prompt has at least to count as echoed when an answer repeats it."""


def prompt_pieces(plan: Plan | None) -> list[str]:
    """The sentences of plangate's own prompts an answer must never repeat: the run's ``llm`` and agent
    step prompts (their ``{{…}}`` left out) and the copilot's protocol."""
    texts = [PROTOCOL]
    if plan is not None:
        for step in plan.steps:
            if isinstance(step.executor, LlmExecutor | AgentExecutor):
                texts.append(step.executor.prompt)
    pieces: list[str] = []
    for text in texts:
        for piece in _PIECES.split(_PLACEHOLDER.sub("\n", text)):
            plain = " ".join(piece.lower().split())
            if len(plain.split()) >= _ECHO_WORDS:
                pieces.append(plain)
    return list(dict.fromkeys(pieces))


def echoed_prompt(answer: str, pieces: list[str]) -> str | None:
    """The piece of a prompt ``answer`` repeats, whole or cut short at its end (``… from these rows
    only. Co…``), or None."""
    plain = " ".join(answer.lower().split())
    tail = " ".join(plain.rstrip("…. ").split()[-_ECHO_WORDS * 2 :])
    for piece in pieces:
        if piece in plain:
            return piece
        words = tail.split()
        # The answer's last words start the piece: an echo the token limit (or a clip) cut short.
        for start in range(len(words) - _ECHO_WORDS + 1):
            if piece.startswith(" ".join(words[start:])):
                return piece
    return None


def answer_signals(answer: str, known: Known, prompts: list[str] | None = None) -> list[Signal]:
    """The signals of the answer's text: leaked markup (or text of the run's own prompts: ``prompts``, as
    ``prompt_pieces`` gives them), and numbers the data does not hold."""
    signals: list[Signal] = []
    echo = echoed_prompt(answer, prompts) if prompts else None
    if echo is not None:
        shown = echo if len(echo) <= 60 else echo[:59] + "…"
        signals.append(
            Signal(
                kind="leaked_markup",
                detail=f"the answer repeats the workflow's own instructions: {shown!r}",
                severity="broken",
            )
        )
    markup = _MARKUP.search(answer)
    if markup is not None and echo is None:
        signals.append(
            Signal(
                kind="leaked_markup", detail=f"the answer contains {markup.group(0)!r}", severity="degraded"
            )
        )
    missing = invented(answer, known)
    if missing:
        shown = ", ".join(missing[:_SHOWN]) + (
            f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        )
        signals.append(
            Signal(
                kind="invented_number", detail=f"{shown} is not in the data the run read", severity="broken"
            )
        )
    return signals


DEFINITIONS_PREFIX = "Definition used: "
"""How the line that says which metric definitions an answer used begins."""


def definitions_note(answer: str, reads: list[Read], scope: Scope) -> str:
    """``answer`` followed by the semantic layer's definitions its queries used, one line each
    (``Definition used: revenue = sum(…) where …``), so that a reader knows which figure it is."""
    used: dict[str, str] = {}
    for read in reads:
        used |= read.definitions
    if not used or not answer.strip():
        return answer
    lines = []
    for name, definition in used.items():
        metric = scope.semantic.metric(name) if scope.semantic is not None else None
        about = f" ({metric.description})" if metric is not None and metric.description else ""
        lines.append(f"{DEFINITIONS_PREFIX}{name} = {definition}{about}.")
    return answer.rstrip() + "\n\n" + "\n".join(lines)


def review_run(question: str, outcome: RunOutcome, scope: Scope, known: Known) -> list[Signal]:
    """Every rule's signals for an attempt that ran (or tried to)."""
    signals = _tool_errors(outcome) + _step_signals(outcome) + _read_signals(outcome.reads)
    if outcome.completed and not outcome.answer.strip():
        signals.append(
            Signal(
                kind="empty_output",
                detail=f"the last step {outcome.answer_step!r} gave no answer",
                severity="broken",
            )
        )
    ranged = no_rows_in_range(question, outcome.reads, scope)
    if ranged is not None:
        signals.append(ranged)
    signals += fan_out_signals(outcome.reads, scope)
    if outcome.answer.strip():
        signals += answer_signals(outcome.answer, known, prompt_pieces(outcome.plan))
        denial = _DENIES.search(outcome.answer)
        if denial is not None and outcome.result.rows:
            rows = len(outcome.result.rows)
            signals.append(
                Signal(
                    kind="answer_denies_rows",
                    severity="broken",
                    detail=(
                        f"the answer says {denial.group(0)!r}, but the query it rests on returned {rows:,} "
                        f"row{'' if rows == 1 else 's'}"
                    ),
                )
            )
    return signals + shape_signals(question, outcome, scope)


# -- the model review -------------------------------------------------------------------------------------

_REVIEW_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["accept", "retry"]},
        "note": {"type": "string", "maxLength": 300},
        "answer": {"type": ["string", "null"], "maxLength": 4000},
    },
    "required": ["verdict", "note", "answer"],
    "additionalProperties": False,
}
_REVIEW_PROMPT = """You review an answer to a question about data. Rules found these problems:
{signals}
Question: {question}
Rows the answer is based on ({columns}): {rows}
Answer: {answer}
Reply with JSON: {{"verdict": "accept" if the answer is still usable as it is (or as you rewrite it),
"retry" if it must be rebuilt; "note": one sentence for the reader; "answer": a corrected answer, or null
to keep it}}.
Never add a number that is not in the rows."""


@dataclass(frozen=True)
class ModelVerdict:
    """What the model review said: its verdict, its note, and the answer to keep."""

    verdict: str
    note: str
    answer: str
    reverted: list[str]


async def model_review(
    model: Model, question: str, answer: str, outcome: RunOutcome | None, review: Review, known: Known
) -> ModelVerdict | None:
    """Ask the model about an answer the rules flagged; None when it fails or answers nothing usable."""
    columns = outcome.result.columns if outcome is not None else []
    rows = outcome.result.rows[:30] if outcome is not None else []
    prompt = _REVIEW_PROMPT.format(
        signals="\n".join(f"- {s.kind} ({s.severity}): {s.detail}" for s in review.signals),
        question=question,
        columns=", ".join(columns) or "none",
        rows=json.dumps(rows, ensure_ascii=False)[:3000],
        answer=answer,
    )
    request = ModelRequest(
        "review",
        [Message("user", prompt)],
        response_schema=ResponseSchema("review", _REVIEW_SCHEMA),
        wire="json",
        max_tokens=400,
    )
    try:
        completion = await complete(model, request)
    except PlangateError:
        return None
    value, problem = parse_json_answer(completion.text)
    if problem is not None or not isinstance(value, dict) or value.get("verdict") not in ("accept", "retry"):
        return None
    note = value.get("note") if isinstance(value.get("note"), str) else ""
    kept = answer
    reverted: list[str] = []
    rewrite = value.get("answer")
    if isinstance(rewrite, str) and rewrite.strip() and rewrite.strip() != answer.strip():
        before = set(invented(answer, known))
        added = [number for number in invented(rewrite, known) if number not in before]
        if added:
            reverted = added
        else:
            kept = rewrite.strip()
    return ModelVerdict(str(value["verdict"]), str(note), kept, reverted)


def apply_model_review(
    review: Review, verdict: ModelVerdict | None, answer_signals_now: list[Signal] | None
) -> Review:
    """The review after the model's: a veto turns ``retry`` into ``accept``; a ``retry`` changes nothing (the
    model cannot force one); a kept rewrite replaces the answer's own signals with ``answer_signals_now``."""
    if verdict is None:
        return review
    signals = list(review.signals)
    if answer_signals_now is not None:
        answer_kinds = {"invented_number", "leaked_markup"}
        signals = [s for s in signals if s.kind not in answer_kinds] + answer_signals_now
    note = verdict.note
    if verdict.reverted:
        note = (
            note + " " if note else ""
        ) + f"(its rewrite was reverted: it added {', '.join(verdict.reverted)})"
    updated = Review.of(signals, note=note)
    if review.verdict == "retry" and verdict.verdict == "accept":
        return updated.model_copy(update={"verdict": "accept"})
    if review.verdict == "accept":
        return updated.model_copy(update={"verdict": "accept"})
    return updated


__all__ = [
    "DEFINITIONS_PREFIX",
    "ModelVerdict",
    "answer_signals",
    "apply_model_review",
    "definitions_note",
    "echoed_prompt",
    "known_data",
    "model_review",
    "no_rows_in_range",
    "prompt_pieces",
    "review_run",
]
