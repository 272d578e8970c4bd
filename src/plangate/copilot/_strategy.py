"""How the copilot model is asked for a workflow: one generation strategy per turn, chosen from the model.

For: ``GenerationStrategy``, everything an attempt needs that differs from one kind of model to another (the
prompt, how the ops are asked for, the repair message, the sampling temperature of a retry, the token cap of
the run's steps, whether the scope reads category values, and what may replace an unusable answer);
``FreeStrategy``, for any model that reads the op protocol and writes ops freely; and ``strategy_for``, the
one place that picks a strategy from the model: a model that samples under grammars (the local default) gets
``plangate.copilot.small.GrammarStrategy``, every other model ``FreeStrategy``. The attempt, generation and
run code call the strategy and read the same for every model. Not for: the heuristics of the grammar path
(``plangate.copilot.small``) or the rules every model's answers go through (``_review``, ``_numbers``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from plangate.copilot._generate import OpsFormat
from plangate.copilot._numbers import Known
from plangate.copilot._ops import Draft
from plangate.copilot._prompt import messages, repair_text
from plangate.copilot._run import STEP_TOKENS, RunOutcome
from plangate.copilot._scope import Scope
from plangate.copilot.policy import HistoryItem
from plangate.copilot.results import Review
from plangate.copilot.small import GrammarStrategy
from plangate.formulas import Issue
from plangate.models import Message, Model


class GenerationStrategy(Protocol):
    """What generating a workflow needs from the kind of model that writes it.

    Attributes:
        name: ``free`` or ``grammar`` (for logs and tests).
        categories: the scope reads the source's category columns and their values.
        step_tokens: what one call of the run's ``llm`` and agent steps may write.
    """

    @property
    def name(self) -> str: ...

    @property
    def categories(self) -> bool: ...

    @property
    def step_tokens(self) -> int: ...

    def temperature(self, attempt: int) -> float | None:
        """The sampling temperature of attempt ``attempt`` (1 for the first), of its generation and its
        run's steps; None for the model's own."""
        ...

    def messages(
        self, scope: Scope, question: str, history: Sequence[HistoryItem], instruction: str | None
    ) -> list[Message]:
        """The opening messages of an attempt's generation (``instruction``: the retry's, or None)."""
        ...

    def ops_format(self, question: str, scope: Scope) -> OpsFormat:
        """How the attempt's generation asks for ops on ``question``."""
        ...

    def repair(self, draft: Draft, issues: Sequence[Issue]) -> str:
        """The message that hands the check's errors back, ``draft`` made ready for what the model writes
        next."""
        ...

    def answer_instead(self, review: Review, outcome: RunOutcome, known: Known) -> tuple[str, Review] | None:
        """What replaces the run's answer, and the review that says so; None keeps it."""
        ...


class FreeStrategy:
    """Any model that reads the op protocol: it writes ops freely, edits its draft to repair it (or sends it
    again whole), samples its retries as it samples anything, and its answer stands or falls by the review."""

    name = "free"
    categories = True
    """The review checks that a query filters on the category values its question names."""
    step_tokens = STEP_TOKENS

    def temperature(self, attempt: int) -> float | None:
        return None

    def messages(
        self, scope: Scope, question: str, history: Sequence[HistoryItem], instruction: str | None
    ) -> list[Message]:
        return messages(scope, question, history, instruction)

    def ops_format(self, question: str, scope: Scope) -> OpsFormat:
        return OpsFormat()

    def repair(self, draft: Draft, issues: Sequence[Issue]) -> str:
        draft.start_repair()
        return repair_text(issues)

    def answer_instead(self, review: Review, outcome: RunOutcome, known: Known) -> tuple[str, Review] | None:
        return None


def samples_under_grammar(model: Model) -> bool:
    """Whether the model builds a grammar from a request's response schema (as the local model does).

    Such a model writes only what the schema allows, so it is given the lines schema; the others read the
    protocol and write ops freely (a response schema would make them write one JSON value, not lines).
    """
    return callable(getattr(model, "grammar_text", None))


def strategy_for(model: Model) -> GenerationStrategy:
    """The strategy of a turn on ``model``: ``GrammarStrategy`` for a model that samples under grammars,
    ``FreeStrategy`` for any other."""
    return GrammarStrategy() if samples_under_grammar(model) else FreeStrategy()


__all__ = ["FreeStrategy", "GenerationStrategy", "samples_under_grammar", "strategy_for"]
