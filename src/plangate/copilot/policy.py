"""The copilot's decisions, as pure functions: what to do after generating, what a run gets as input, whether
to retry after a review, what the retry asks for, and how an attempt and a turn are judged.

For: every rule of SPEC §5's "Decide" step, and nothing else: no I/O, no model, no store, so that each rule
is tested line by line. Not for: producing what the rules read (generation, check, run, review modules).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from plangate.copilot._conversations import TurnStatus
from plangate.copilot.results import Attempt, Review
from plangate.errors import ConfigError
from plangate.formulas import Formula, Issue

MAX_ATTEMPTS = 2
"""Attempts per turn, the first try included: one reviewed retry at most (checked by ``retry_left`` only)."""
REPAIR_ROUNDS = 2
"""Times the check's errors go back to the model before the formula is final."""
HISTORY_TURNS = 6
"""Earlier turns of the conversation a turn sees."""
HISTORY_ANSWER_CHARS = 600
"""Characters of each earlier answer a turn sees."""
ANSWER_CHARS = 4_000
"""Characters of an answer that are kept."""

REBUILD_KINDS = frozenset(
    {
        "no_rows_in_range",
        "empty_query_result",
        "step_limit_hit",
        "step_failed",
        "tool_error",
        "empty_output",
    }
)
"""Signal kinds worth a rebuilt workflow even when not ``broken``: a different query may well fix them."""

QUESTION_VAR = re.compile(r"question|query|topic|input|问题|需求|主题", re.IGNORECASE)
"""A formula var whose name matches receives the question."""

NextStep = Literal["reply", "asked", "retry", "fail", "ready", "run"]
TerminalKind = Literal["final", "reply", "ask", "error"]

_LOOK_HINT = "emit one op per line; `look` at a table first"


@dataclass(frozen=True)
class Terminal:
    """How generating (and checking) ended: the ``final`` op, a ``reply``, an ``ask``, or an error.

    Attributes:
        kind: which of the four.
        text: the reply, the question to the user, or the error's message.
        error_code: for errors: ``empty_generation`` (no op at all), ``model_error``, ``source_error``, …
        formula: the final formula (``final``), or None when none could be built.
        issues: the check's issues in the final formula.
        explanation: what the model said the workflow does (``done.explanation``).
        autorun: ``done.run``: false builds the formula without running it.
    """

    kind: TerminalKind
    text: str = ""
    error_code: str | None = None
    formula: Formula | None = None
    issues: tuple[Issue, ...] = ()
    explanation: str = ""
    autorun: bool = True


@dataclass(frozen=True)
class HistoryItem:
    """An earlier turn of the conversation, as a later turn sees it."""

    question: str
    answer: str


def next_step(terminal: Terminal, self_checked: bool = True) -> NextStep:
    """What to do once generation ended.

    Args:
        terminal: how it ended.
        self_checked: whether the check's errors already went back to the model (the repair rounds ran);
            when not, error-level issues do not fail the attempt here: the run's own check stops it.

    Returns:
        ``reply`` (answer without a workflow), ``asked`` (the stream ended on ``ask``), ``retry`` (the
        model produced no op at all), ``fail`` (any other error, or error-level issues after the
        self-check), ``ready`` (built, not to be run: ``autorun`` false) or ``run``.
    """
    if terminal.kind == "error":
        return "retry" if terminal.error_code == "empty_generation" else "fail"
    if terminal.kind == "reply":
        return "reply"
    if terminal.kind == "ask":
        return "asked"
    if terminal.formula is None:
        return "fail"
    if self_checked and any(issue.level == "error" for issue in terminal.issues):
        return "fail"
    return "run" if terminal.autorun else "ready"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with ``…`` when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def history_items(history: Sequence[HistoryItem]) -> list[dict[str, JsonValue]]:
    """The last ``HISTORY_TURNS`` turns, answers clipped to ``HISTORY_ANSWER_CHARS``, as JSON."""
    recent = list(history)[-HISTORY_TURNS:] if HISTORY_TURNS else []
    return [{"question": item.question, "answer": clip(item.answer, HISTORY_ANSWER_CHARS)} for item in recent]


def fill_input(formula: Formula, question: str, history: Sequence[HistoryItem]) -> dict[str, JsonValue]:
    """The vars a run of ``formula`` gets for ``question``.

    With no declared vars: ``{question, history}``. Otherwise every declared var gets its default (or
    ``""``), and the question goes to the var whose name looks like a question (``question``, ``query``,
    ``topic``, ``input``, ``问题``, ``需求``, ``主题``, any case), else to the first required var, else to the
    first.
    ``history`` always rides along: the last 6 turns, answers clipped to 600 characters.
    """
    past: JsonValue = list(history_items(history))
    if not formula.vars:
        return {"question": question, "history": past}
    values: dict[str, JsonValue] = {
        name: var.default if var.default is not None else "" for name, var in formula.vars.items()
    }
    names = list(formula.vars)
    target = next((name for name in names if QUESTION_VAR.search(name)), None)
    if target is None:
        target = next((name for name in names if formula.vars[name].required), names[0])
    values[target] = question
    values["history"] = past
    return values


def retry_left(n: int) -> bool:
    """Whether attempt ``n`` (1 for the first) may be followed by another: the one check of ``MAX_ATTEMPTS``,
    which every decision to retry, and the turn's loop of attempts, go through."""
    return n < MAX_ATTEMPTS


def retry_after_review(review: Review, attempt: int) -> bool:
    """Whether to try again after ``review`` of attempt ``attempt`` (0 for the first).

    Only when the review says ``retry``, its severity is ``broken`` or one of its signals is of a kind a
    rebuilt workflow may fix (``REBUILD_KINDS``, e.g. ``no_rows_in_range``), and an attempt is left
    (``retry_left(attempt + 1)``).
    """
    if review.verdict != "retry":
        return False
    worth_it = review.severity == "broken" or any(kind in REBUILD_KINDS for kind in review.kinds())
    return worth_it and retry_left(attempt + 1)


def fix_instruction(question: str, formula_text: str, reason: str) -> str:
    """The retry of an attempt that built a formula: hand it back with the reason, ask for a fix."""
    return (
        f"The workflow you built ran, and its review found a problem: {reason}.\n"
        f"Here is the workflow as ops:\n{formula_text}\n"
        "Fix it: raise a step limit, correct an argument, or query differently (another table, column or "
        "period), emitting the ops of the corrected workflow, one per line. Then answer the original "
        f"question: {question}"
    )


def rebuild_instruction(question: str, reason: str) -> str:
    """The retry of an attempt that built nothing usable: the question and the reason, a new workflow."""
    return (
        f"{question}\n\nThe previous attempt failed: {reason}.\n"
        "Build a complete new workflow for the question, one op per line."
    )


def empty_instruction(question: str, correction: str) -> str:
    """The retry after an empty generation: the question and the correction, with the format reminder
    unless the correction already says it."""
    lowered = correction.lower()
    hint = "" if ("one op per line" in lowered or "look" in lowered) else f"; {_LOOK_HINT}"
    return f"{question}\n\n{correction}{hint}."


def retry_instruction(
    question: str, reason: str, *, formula_text: str | None = None, empty: bool = False
) -> str:
    """The right one of the three retry instructions for how the attempt ended."""
    if empty:
        return empty_instruction(question, reason)
    if formula_text:
        return fix_instruction(question, formula_text, reason)
    return rebuild_instruction(question, reason)


def attempt_status(review: Review, *, ran: bool = True) -> TurnStatus:
    """An attempt that ran (or replied) and was reviewed: ``unusable`` when broken, ``partial`` when
    degraded, else ``done``. One that did not run successfully is ``failed``."""
    if not ran:
        return "failed"
    if review.severity == "broken":
        return "unusable"
    return "partial" if review.severity == "degraded" else "done"


_STATUS_RANK: Mapping[str, int] = {"done": 4, "partial": 3, "unusable": 2, "failed": 1, "cancelled": 0}


def chosen_attempt(attempts: Sequence[Attempt]) -> Attempt:
    """The attempt a turn reports: the best status (done > partial > unusable > failed > cancelled), the
    later one on a tie; a cancelled turn reports its last attempt.

    Raises:
        ConfigError: no attempts.
    """
    if not attempts:
        raise ConfigError("chosen_attempt: expected at least one attempt; found none")
    if attempts[-1].status == "cancelled":
        return attempts[-1]
    best = attempts[0]
    for attempt in attempts[1:]:
        if _STATUS_RANK[attempt.status] >= _STATUS_RANK[best.status]:
            best = attempt
    return best


def turn_answer(attempt: Attempt) -> str:
    """What a turn answers: the attempt's answer when it is usable (``done``, ``partial``), clipped to
    ``ANSWER_CHARS``; nothing otherwise (the reason says why)."""
    if attempt.status not in ("done", "partial"):
        return ""
    return clip(attempt.answer.strip(), ANSWER_CHARS)


__all__ = [
    "ANSWER_CHARS",
    "HISTORY_ANSWER_CHARS",
    "HISTORY_TURNS",
    "MAX_ATTEMPTS",
    "QUESTION_VAR",
    "REBUILD_KINDS",
    "REPAIR_ROUNDS",
    "HistoryItem",
    "NextStep",
    "Terminal",
    "TerminalKind",
    "attempt_status",
    "chosen_attempt",
    "clip",
    "empty_instruction",
    "fill_input",
    "fix_instruction",
    "history_items",
    "next_step",
    "rebuild_instruction",
    "retry_after_review",
    "retry_instruction",
    "retry_left",
    "turn_answer",
]
