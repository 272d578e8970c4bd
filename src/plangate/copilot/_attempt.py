"""One attempt of a turn: generate (and repair), decide, run, review; and what to ask for if it is retried.

For: the sequence of SPEC §5's steps 1 to 5 for one try, each phase delegated to its module, every
decision taken by ``policy``, and whatever differs between kinds of model asked of the turn's generation
strategy (``_strategy``): this code reads the same for every model. Not for: the loop of attempts or storing
the turn (``turn.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from plangate.copilot import _review as review_rules
from plangate.copilot import policy
from plangate.copilot._check import REPAIRED_WARNINGS, check_draft, needs_repair
from plangate.copilot._conversations import TurnStatus
from plangate.copilot._generate import Generation, Generator
from plangate.copilot._numbers import Known
from plangate.copilot._ops import Draft, ops_text, slug
from plangate.copilot._phases import Phases
from plangate.copilot._run import PlanRunner, RunOutcome
from plangate.copilot._scope import Scope
from plangate.copilot._strategy import GenerationStrategy
from plangate.copilot.results import Attempt, Review, Signal, formula_json
from plangate.errors import PlangateError
from plangate.events import Event, OpEvent, ReviewEvent, StatusEvent
from plangate.formulas import Formula, Issue, Plan
from plangate.models import Message, Model
from plangate.runs.telemetry import semconv as sc
from plangate.runs.usage import UsageTally

Emit = Callable[[Event], None]


@dataclass
class AttemptSetup:
    """What every attempt of a turn shares.

    Attributes:
        question: the question.
        history: the conversation's earlier turns.
        scope: the data.
        model: the copilot model.
        strategy: how it is asked for a workflow (``_strategy.strategy_for`` the model).
        runner: runs formulas as children of the turn's run.
        run_id: the turn's ``ask`` run.
        owner: who the runs belong to.
        emit: commits an event to the turn's run.
        review_model: the model of the optional model review, or None.
        phases: the spans of the turn's phases (tracing off: none are made).
        meter: the turn's usage and budget: checked before each attempt's formula run, which gets what is
            left of the budget as its own.
    """

    question: str
    history: Sequence[policy.HistoryItem]
    scope: Scope
    model: Model
    strategy: GenerationStrategy
    runner: PlanRunner
    run_id: str
    owner: str
    emit: Emit
    review_model: Model | None = None
    phases: Phases = field(default_factory=lambda: Phases(None))
    meter: UsageTally = field(default_factory=UsageTally)


@dataclass
class AttemptResult:
    """An attempt, and the instruction of the retry when the policy wants one; ``exhausted``: its formula
    run reached what was left of the turn's budget (nothing more may be tried)."""

    attempt: Attempt
    retry: str | None = None
    stage: str = "review"
    exhausted: bool = False


def _issue_lines(issues: Sequence[Issue]) -> str:
    errors = [issue for issue in issues if issue.level == "error" or issue.code in REPAIRED_WARNINGS]
    return "; ".join(f"{i.path}: {i.message}" if i.path else i.message for i in errors[:5])


class AttemptRun:
    """Runs attempt ``n`` of a turn (1 for the first)."""

    def __init__(self, setup: AttemptSetup, n: int, instruction: str | None) -> None:
        self.setup = setup
        self.n = n
        self.instruction = instruction
        self.started = time.time()
        self.known = Known()
        self.draft = Draft(slug(setup.question))
        self.temperature = setup.strategy.temperature(n)
        self.generator = Generator(
            setup.model,
            setup.scope,
            self._op,
            known=self.known,
            ops_format=setup.strategy.ops_format(setup.question, setup.scope),
            temperature=self.temperature,
        )

    async def _op(self, op: dict[str, JsonValue]) -> None:
        self.setup.emit(OpEvent(op=op, attempt=self.n))

    def _status(self, stage: str, code: str, text: str = "") -> None:
        self.setup.emit(StatusEvent(stage=stage, code=code, text=text))

    def _attempt(self, status: TurnStatus, reason: str, **fields: object) -> Attempt:
        return Attempt.model_validate(
            {
                "n": self.n,
                "status": status,
                "reason": reason,
                "started_at": self.started,
                "finished_at": time.time(),
                **fields,
            }
        )

    async def run(self) -> AttemptResult:
        """Generate, check and repair, decide, then run and review (or reply, ask, stop)."""
        setup = self.setup
        self._status("generate", "attempt", f"attempt {self.n}" + (" (retry)" if self.instruction else ""))
        convo = setup.strategy.messages(setup.scope, setup.question, setup.history, self.instruction)
        generation = await self._generate(convo)
        terminal, plan = await self._terminal(generation, convo)
        step = policy.next_step(terminal)
        if step == "retry":
            return self._empty(terminal)
        if step == "fail":
            reason = terminal.text or f"the workflow does not pass the check: {_issue_lines(terminal.issues)}"
            return AttemptResult(
                self._attempt("failed", reason, formula=terminal.formula, issues=list(terminal.issues)),
                stage="check",
            )
        if step == "asked":
            return AttemptResult(
                self._attempt("partial", f"the copilot asks first: {terminal.text}", answer=terminal.text),
                stage="generate",
            )
        if step == "reply":
            return self._reply(terminal.text)
        if step == "ready":
            note = terminal.explanation or "run it to get the answer"
            return AttemptResult(
                self._attempt(
                    "partial",
                    "the workflow was built, not run (done with run: false)",
                    formula=terminal.formula,
                    answer=f"Workflow ready: {note}",
                    issues=list(terminal.issues),
                ),
                stage="check",
            )
        if plan is None or terminal.formula is None:  # next_step says run only for a checked formula
            reason = "the copilot built no workflow to run"
            return AttemptResult(self._attempt("failed", reason, issues=list(terminal.issues)), stage="check")
        return await self._run(terminal.formula, plan, list(terminal.issues))

    async def _terminal(
        self, generation: Generation, convo: list[Message]
    ) -> tuple[policy.Terminal, Plan | None]:
        """How generation, and the check with its repair rounds, ended."""
        if generation.ended == "error":
            return policy.Terminal("error", generation.text, generation.error_code), None
        if generation.ops == 0:
            skipped = "; ".join(generation.skipped[:3])
            correction = "The model wrote no op" + (
                f" (it wrote {skipped})" if skipped else " (it wrote nothing)"
            )
            return policy.Terminal("error", correction, "empty_generation"), None
        if generation.ended in ("reply", "ask"):
            return policy.Terminal("reply" if generation.ended == "reply" else "ask", generation.text), None
        formula, plan, issues = self._check()
        rounds = 0
        while needs_repair(issues) and rounds < policy.REPAIR_ROUNDS:
            rounds += 1
            self._status("check", "issues", _issue_lines(issues))
            convo += [
                Message("assistant", generation.transcript or "(nothing)"),
                Message("user", self.setup.strategy.repair(self.draft, issues)),
            ]
            generation = await self._generate(convo)
            if generation.ended == "error":
                return policy.Terminal("error", generation.text, generation.error_code), None
            if generation.ended in ("reply", "ask"):
                return policy.Terminal(
                    "reply" if generation.ended == "reply" else "ask", generation.text
                ), None
            formula, plan, issues = self._check()
        if needs_repair(issues):
            self._status("check", "issues", _issue_lines(issues))
        else:
            self._status("check", "passed", f"{len(plan.steps) if plan else 0} steps")
        terminal = policy.Terminal(
            "final",
            formula=formula,
            issues=tuple(issues),
            explanation=self.draft.explanation,
            autorun=self.draft.run,
        )
        await self._op(
            {
                "op": "final",
                "formula": formula_json(formula) if formula is not None else self.draft.data(),
                "issues": [issue.model_dump(mode="json") for issue in issues],
                "explanation": terminal.explanation,
                "autorun": terminal.autorun,
            }
        )
        return terminal, plan

    async def _generate(self, convo: list[Message]) -> Generation:
        with self.setup.phases.phase("generate", self.n) as shown:
            generation = await self.generator.run(self.draft, convo)
            shown[sc.COPILOT_STATUS] = generation.ended
            shown[sc.COPILOT_DETAIL] = f"{generation.ops} ops"
        return generation

    def _check(self) -> tuple[Formula | None, Plan | None, list[Issue]]:
        with self.setup.phases.phase("check", self.n) as shown:
            try:
                formula_vars = policy.fill_input(
                    self.draft.formula(), self.setup.question, self.setup.history
                )
            except PlangateError:  # the draft does not validate: the check reports why
                formula_vars = {"question": self.setup.question, "history": []}
            checked = check_draft(self.draft, self.setup.scope, formula_vars)
            shown[sc.COPILOT_STATUS] = "issues" if needs_repair(checked[2]) else "passed"
            shown[sc.COPILOT_DETAIL] = _issue_lines(checked[2])
        return checked

    def _empty(self, terminal: policy.Terminal) -> AttemptResult:
        attempt = self._attempt("failed", terminal.text)
        self._review(Review.of([Signal(kind="empty_generation", detail=terminal.text, severity="broken")]))
        retry = None
        if policy.retry_left(self.n):
            retry = policy.retry_instruction(self.setup.question, terminal.text, empty=True)
        return AttemptResult(attempt, retry, stage="generate")

    def _review(self, review: Review) -> None:
        self.setup.emit(
            ReviewEvent(
                signals=[signal.model_dump(mode="json") for signal in review.signals],
                verdict=review.verdict,
                severity=review.severity,
                attempt=self.n,
            )
        )

    def _reply(self, text: str) -> AttemptResult:
        with self.setup.phases.phase("review", self.n) as shown:
            known = review_rules.known_data(self.setup.question, None, None, self.known)
            review = Review.of(review_rules.answer_signals(text, known))
            shown[sc.COPILOT_STATUS], shown[sc.COPILOT_DETAIL] = review.verdict, review.summary()
        self._review(review)
        status = policy.attempt_status(review)
        retry = None
        if policy.retry_after_review(review, self.n - 1):
            retry = policy.rebuild_instruction(self.setup.question, review.summary())
        reason = review.summary() or "answered without data"
        return AttemptResult(self._attempt(status, reason, answer=text, review=review), retry)

    async def _run(self, formula: Formula, plan: Plan, issues: list[Issue]) -> AttemptResult:
        setup = self.setup
        setup.meter.check("run")  # a formula run that may not make a call is not started
        self._status("run", "started", f"running {len(plan.steps)} steps")
        with setup.phases.phase("run", self.n) as shown:
            outcome = await setup.runner.run(
                plan, setup.run_id, setup.owner, temperature=self.temperature, budget=setup.meter.left()
            )
            shown[sc.COPILOT_STATUS] = outcome.status
            shown[sc.COPILOT_DETAIL] = outcome.run_id or ""
        self._status("run", outcome.status, outcome.reason)
        with setup.phases.phase("review", self.n) as shown:
            known = review_rules.known_data(setup.question, plan, outcome, self.known)
            signals = review_rules.review_run(setup.question, outcome, setup.scope, known)
            review = Review.of(signals)
            answer = outcome.answer
            instead = setup.strategy.answer_instead(review, outcome, known)
            if instead is not None:
                answer, review = instead
            if review.signals and setup.review_model is not None and outcome.completed:
                answer, review = await self._model_review(setup.review_model, outcome, review, known)
            shown[sc.COPILOT_STATUS], shown[sc.COPILOT_DETAIL] = review.verdict, review.summary()
        self._review(review)
        answer = review_rules.definitions_note(answer, outcome.reads, setup.scope)
        status = policy.attempt_status(review, ran=outcome.completed)
        reason = self._reason(outcome, review)
        retry = None
        if policy.retry_after_review(review, self.n - 1):
            retry = policy.retry_instruction(
                setup.question, review.summary() or outcome.reason, formula_text=ops_text(formula)
            )
        attempt = self._attempt(
            status,
            reason,
            review=review,
            formula=formula,
            run_id=outcome.run_id,
            answer=answer,
            result=outcome.result,
            issues=issues,
        )
        if outcome.status == "exhausted":
            return AttemptResult(attempt, stage="run", exhausted=True)
        return AttemptResult(attempt, retry)

    async def _model_review(
        self, model: Model, outcome: RunOutcome, review: Review, known: Known
    ) -> tuple[str, Review]:
        verdict = await review_rules.model_review(
            model, self.setup.question, outcome.answer, outcome, review, known
        )
        if verdict is None:
            return outcome.answer, review
        rewritten = verdict.answer != outcome.answer
        now = review_rules.answer_signals(verdict.answer, known) if rewritten else None
        return verdict.answer, review_rules.apply_model_review(review, verdict, now)

    @staticmethod
    def _reason(outcome: RunOutcome, review: Review) -> str:
        if not outcome.completed:
            failures = [s for s in review.signals if s.kind == "step_failed"]
            return "; ".join(s.detail for s in failures) if failures else outcome.reason
        if review.signals:
            return review.summary()
        return "answered from the data"


__all__ = ["AttemptResult", "AttemptRun", "AttemptSetup"]
