"""The ask-your-data copilot: a question about data becomes a checked, run, reviewed formula.

One turn (SPEC §5): the model streams ops that build an ordinary formula (Generate); the formula check and
the data checks run, and their errors go back to the model (Check); pure policy functions decide what comes
next (Decide, ``plangate.copilot.policy``); the formula runs on the formula runtime (Run); rules, and
optionally a model, review the result, with a number guard on the answer (Review); one retry with a reason
when the review says so (Retry). Turns and their attempts are stored in conversations.

Example::

    from plangate.copilot import ask

    turn = ask("Which 3 regions had the highest revenue in 2025?", data="examples/data/shop.db")
    print(turn.status, turn.answer)
    turn.result.columns, turn.result.rows, turn.formula

Modules: ``turn`` orchestrates; ``_scope`` (the data), ``_ops`` (op parsing, the draft formula),
``_strategy`` (the generation strategy, chosen once per turn from the model), ``_prompt``, ``_generate``,
``_check``, ``policy``, ``_run``, ``_review`` and ``_numbers`` (the number guard), ``_periods`` (the period
a question names), ``_store`` (store access), ``_attempt`` (one attempt's phases), ``results`` (what a turn
returns); ``small`` (the grammar path of small local models, behind its strategy: the short prompt, the
lines grammar and the question's hints, what it asks to compute, what replaces an unusable sentence).
"""

from __future__ import annotations

from plangate.copilot.policy import MAX_ATTEMPTS, HistoryItem, Terminal
from plangate.copilot.results import Attempt, Review, Signal, Turn, TurnResult
from plangate.copilot.turn import AskStream, Copilot, ask, ask_async, ask_stream

__all__ = [
    "MAX_ATTEMPTS",
    "AskStream",
    "Attempt",
    "Copilot",
    "HistoryItem",
    "Review",
    "Signal",
    "Terminal",
    "Turn",
    "TurnResult",
    "ask",
    "ask_async",
    "ask_stream",
]
