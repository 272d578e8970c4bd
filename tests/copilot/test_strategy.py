"""The generation strategy: chosen once per turn from the model (grammar for a model that samples under
grammars, free for any other), and the only thing an attempt asks about the model: an attempt driven by a
strategy of the test's own does exactly what that strategy says, on any model. The attempt limit is checked
in one place (``policy.retry_left``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from copilot_helpers import DONE, aggregate_step, answer_step, lines, query_step

from plangate.copilot import ask, policy
from plangate.copilot._generate import MAX_TOKENS, OpsFormat, _op_of
from plangate.copilot._numbers import Known
from plangate.copilot._ops import Draft, Op
from plangate.copilot._run import STEP_TOKENS, RunOutcome
from plangate.copilot._scope import Scope
from plangate.copilot._strategy import FreeStrategy, GenerationStrategy, samples_under_grammar, strategy_for
from plangate.copilot.policy import HistoryItem
from plangate.copilot.results import Review
from plangate.copilot.small import GrammarStrategy
from plangate.copilot.small._constrained import closing_ops
from plangate.formulas import Issue, check_formula
from plangate.formulas.loader import validate_formula
from plangate.models import Message, Model, ModelRequest, ResponseSchema, ScriptedModel
from plangate.models.anthropic import AnthropicModel
from plangate.models.local import LocalModel
from plangate.models.openai import OpenAIModel
from plangate.store import SQLiteStore

SHOP = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.db"
QUESTION = "How many customers per region?"
COUNT = aggregate_step(
    "count",
    source="shop",
    table="customers",
    measures=[{"agg": "count", "column": "*", "as": "n"}],
    group_by=["regions.name"],
    order_by=[{"column": "n", "desc": True}],
    limit=10,
)
SENTENCE = "Central, East, North, South and West all have customers."


class Grammared(ScriptedModel):
    """A scripted model that, like the local one, builds a grammar from a request's response schema."""

    def grammar_text(self, request: object) -> str:
        return ""


class NotCallable(ScriptedModel):
    grammar_text = "not a method"


# -- the choice ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: Grammared([]), GrammarStrategy),
        (LocalModel, GrammarStrategy),
        (lambda: ScriptedModel([]), FreeStrategy),
        (lambda: NotCallable([]), FreeStrategy),
        (lambda: OpenAIModel("gpt-4o-mini", api_key="sk-test-key-123456"), FreeStrategy),
        (lambda: AnthropicModel("claude-test", api_key="sk-ant-test-123456"), FreeStrategy),
    ],
    ids=["grammared", "local", "scripted", "grammar_text-not-callable", "openai", "anthropic"],
)
def test_a_model_that_samples_under_grammars_gets_the_grammar_strategy_any_other_the_free_one(
    make: Callable[[], Model], expected: type
) -> None:
    model = make()
    assert samples_under_grammar(model) is (expected is GrammarStrategy)
    assert type(strategy_for(model)) is expected


def test_the_strategy_is_chosen_once_per_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen: list[Model] = []

    def counting(model: Model) -> GenerationStrategy:
        chosen.append(model)
        return strategy_for(model)

    monkeypatch.setattr("plangate.copilot.turn.strategy_for", counting)
    model = ScriptedModel(["", lines(COUNT, answer_step("count"), DONE), SENTENCE])  # one retry
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask(QUESTION, SHOP, model=model, store=store)
    assert len(turn.attempts) == 2 and chosen == [model]


# -- what each strategy says --------------------------------------------------------------------------------


def test_the_free_strategy_asks_for_free_ops_and_keeps_its_draft_and_answer(shop_scope: Scope) -> None:
    free = FreeStrategy()
    # Both read the category values: the review checks a query filters on those its question names.
    assert (free.name, free.categories, free.step_tokens) == ("free", True, STEP_TOKENS)
    assert [free.temperature(n) for n in (1, 2)] == [None, None]
    assert free.ops_format(QUESTION, shop_scope) == OpsFormat(None, MAX_TOKENS, ())
    system, user = free.messages(shop_scope, QUESTION, [HistoryItem("Before?", "Yes.")], None)
    assert '{"op":"look","table":"T"}' in system.content and user.content.endswith(f"Question: {QUESTION}")
    assert "Earlier in this conversation:" in user.content
    draft = Draft("d")
    draft.apply(_op(COUNT))
    issue = Issue(level="error", code="x", path="steps", message="wrong")
    assert "update_step" in free.repair(draft, [issue]) and [s["id"] for s in draft.steps] == ["count"]
    assert free.answer_instead(Review(), _outcome(), Known()) is None


def test_the_grammar_strategy_asks_for_one_line_under_the_grammar_and_closes_it_itself(
    shop_scope: Scope,
) -> None:
    grammar = GrammarStrategy()
    assert (grammar.name, grammar.categories, grammar.step_tokens) == ("grammar", True, 200)
    assert [grammar.temperature(n) for n in (1, 2)] == [None, 0.7]
    found = grammar.ops_format(QUESTION, shop_scope)
    assert found.schema is not None and found.schema.name == "copilot_ops"
    assert list(found.schema.schema) == ["x-lines"] and found.max_tokens == 700
    assert list(found.closing) == closing_ops()
    system, user = grammar.messages(shop_scope, QUESTION, [HistoryItem("Before?", "Yes.")], None)
    assert system.content.startswith("You answer questions about the data source shop")
    assert user.content == f"Question: {QUESTION}"  # no history: the window is short
    draft = Draft("d")
    draft.apply(_op(COUNT))
    issue = Issue(level="error", code="x", path="steps", message="wrong")
    assert grammar.repair(draft, [issue]).startswith("The query has problems:") and not draft.steps


def _op(data: dict[str, object]) -> Op:
    return _op_of(data)  # type: ignore[arg-type]


def _outcome() -> RunOutcome:
    step = {"id": "q", "tool": {"name": "db_aggregate", "args": {"source": "shop", "table": "orders"}}}
    plan, _ = check_formula(validate_formula({"formula": "t", "steps": [step]}), {})
    assert plan is not None
    return RunOutcome("run_x", "completed", "completed", plan, "q", "East had 10.")


# -- an attempt does what its strategy says, on any model -------------------------------------------------


class Mixed:
    """A strategy of the test's own, unlike either real one: if an attempt asked the model (or the
    strategy's type) anything, its requests and its answer would not be these."""

    name = "mixed"
    categories = False
    step_tokens = 321
    schema = ResponseSchema("mixed_ops", {"type": "object"})

    def __init__(self) -> None:
        self.repaired: list[tuple[list[str], list[str]]] = []

    def temperature(self, attempt: int) -> float | None:
        return 0.25 * attempt

    def messages(
        self, scope: Scope, question: str, history: Sequence[HistoryItem], instruction: str | None
    ) -> list[Message]:
        return [Message("system", f"MIXED on {scope.name}"), Message("user", f"{question} / {instruction}")]

    def ops_format(self, question: str, scope: Scope) -> OpsFormat:
        return OpsFormat(
            self.schema, 123, ({**answer_step("count"), "by": "copilot"}, {**DONE, "by": "copilot"})
        )

    def repair(self, draft: Draft, issues: Sequence[Issue]) -> str:
        errors = [issue.code for issue in issues if issue.level == "error"]
        self.repaired.append(([str(s.get("id")) for s in draft.steps], errors))
        draft.reset()
        return "MIXED REPAIR"

    def answer_instead(self, review: Review, outcome: RunOutcome, known: Known) -> tuple[str, Review] | None:
        return f"{len(outcome.result.rows)} regions, by the strategy.", review


def _requests(model: ScriptedModel) -> list[tuple[object, ...]]:
    return [_shape(request) for request in model.requests]


def _shape(request: ModelRequest) -> tuple[object, ...]:
    return (
        request.purpose,
        [(m.role, m.content) for m in request.messages] if request.purpose == "copilot" else None,
        request.response_schema if request.purpose == "copilot" else None,
        request.max_tokens,
        request.temperature,
    )


@pytest.mark.parametrize("kind", [ScriptedModel, Grammared])
def test_an_attempt_does_exactly_what_its_strategy_says_on_any_model(
    kind: type[ScriptedModel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mixed = Mixed()
    monkeypatch.setattr("plangate.copilot.turn.strategy_for", lambda model: mixed)
    # One line and no done: the strategy's closing ops finish the workflow.
    model = kind([lines(COUNT), SENTENCE])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask(QUESTION, SHOP, model=model, store=store)
    assert _requests(model) == [
        ("copilot", [("system", "MIXED on shop"), ("user", f"{QUESTION} / None")], Mixed.schema, 123, 0.25),
        ("generate", None, None, 321, 0.25),
    ]
    assert [s.id for s in turn.formula.steps] == ["count", "answer"]  # type: ignore[union-attr]
    assert turn.answer == "5 regions, by the strategy." and mixed.repaired == []


def test_an_attempt_repairs_as_its_strategy_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mixed = Mixed()
    monkeypatch.setattr("plangate.copilot.turn.strategy_for", lambda model: mixed)
    broken = lines(query_step("count", "shop", "SELECT count(*) FROM region"))
    model = ScriptedModel([broken, lines(COUNT), SENTENCE])
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask(QUESTION, SHOP, model=model, store=store)
    assert mixed.repaired == [(["count", "answer"], ["unknown-table"])]
    second = model.requests[1]
    assert second.messages[-1].content == "MIXED REPAIR" and second.temperature == 0.25
    assert turn.status == "done" and [s.id for s in turn.formula.steps] == ["count", "answer"]  # type: ignore[union-attr]


# -- the attempt limit --------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 3])
@pytest.mark.parametrize("why", ["empty", "invented"])
def test_the_attempt_limit_is_read_in_one_place(
    limit: int, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``policy.MAX_ATTEMPTS`` changed, every retry decision and the turn's loop follow it: a second
    place that compared attempts to a limit of its own would stop the turn at another count."""
    monkeypatch.setattr(policy, "MAX_ATTEMPTS", limit)
    ops = lines(COUNT, answer_step("count"), DONE)
    script = [""] * limit if why == "empty" else [ops, "There are 7,777 customers."] * limit
    model = ScriptedModel(script)
    with SQLiteStore(tmp_path / "s.db") as store:
        turn = ask(QUESTION, SHOP, model=model, store=store)
    assert [a.n for a in turn.attempts] == list(range(1, limit + 1))
    assert model.remaining == 0
    assert [policy.retry_left(n) for n in range(1, limit + 1)] == [True] * (limit - 1) + [False]
