"""``GrammarStrategy``: the copilot's generation strategy for a small model that samples under grammars.

For: what an attempt on such a model (the local default, SmolLM2-135M) does differently, in one place: a
short prompt (``_prompt``); one ``add_step`` line under the grammar of ``_constrained``, which holds the
question's hints, closed by the copilot's answer step and ``done``; a repair that writes the query again
from scratch; a retry sampled more freely (sampled greedily, it would write the same stream again); a few
hundred tokens for the answer step; and, when only its sentence is at fault, the data as the answer
(``_answer``). Not for: choosing the strategy (``plangate.copilot._strategy.strategy_for``).
"""

from __future__ import annotations

from collections.abc import Sequence

from plangate.copilot._generate import OpsFormat
from plangate.copilot._numbers import Known
from plangate.copilot._ops import Draft
from plangate.copilot._run import RunOutcome
from plangate.copilot._scope import Scope
from plangate.copilot.policy import HistoryItem
from plangate.copilot.results import Review
from plangate.copilot.small import _answer, _prompt
from plangate.copilot.small._constrained import closing_ops, op_lines_schema, question_hints
from plangate.formulas import Issue
from plangate.models import Message, ResponseSchema

MAX_TOKENS = 700
"""Tokens one request of a generation may write (one query line needs far fewer)."""
STEP_TOKENS = 200
"""Tokens one call of the run's ``llm`` and agent steps may write (a small local model writes slowly)."""
RETRY_TEMPERATURE = 0.7
"""How freely a retry samples: a model that samples greedily (the local one) would otherwise write the same
stream, and the same answer, again."""


class GrammarStrategy:
    """A small model that samples under grammars: it fills in one structured query, and the copilot does
    the rest."""

    name = "grammar"
    categories = True
    """The grammar offers filters on the category columns' values alone."""
    step_tokens = STEP_TOKENS

    def temperature(self, attempt: int) -> float | None:
        return RETRY_TEMPERATURE if attempt > 1 else None

    def messages(
        self, scope: Scope, question: str, history: Sequence[HistoryItem], instruction: str | None
    ) -> list[Message]:
        return _prompt.messages(scope, question, instruction)

    def ops_format(self, question: str, scope: Scope) -> OpsFormat:
        hints = question_hints(question, scope.categories, scope.schema, scope.semantic)
        schema = ResponseSchema("copilot_ops", op_lines_schema(scope.schema, hints, scope.semantic))
        return OpsFormat(schema, MAX_TOKENS, tuple(closing_ops()))

    def repair(self, draft: Draft, issues: Sequence[Issue]) -> str:
        draft.reset()  # under the grammar it can only write the query again, whole
        return _prompt.repair_text(issues)

    def answer_instead(self, review: Review, outcome: RunOutcome, known: Known) -> tuple[str, Review] | None:
        return _answer.answer_instead(review, outcome, known)


__all__ = ["MAX_TOKENS", "RETRY_TEMPERATURE", "STEP_TOKENS", "GrammarStrategy"]
