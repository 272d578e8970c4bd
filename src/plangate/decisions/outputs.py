"""The structured outputs of the route and plan phases (SPEC §4), next to the execute decision.

What it is for: the pydantic models a model fills when it routes a request (``RouteDecision``) or writes a
plan (``PlanOutput``), with their well-formedness rules. What it is not for: reading model text (``decode``)
or acting on a route or a plan (the agent runtime).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

Route = Literal["reply", "plan", "execute"]
"""How a request is handled: answer directly, plan several steps, or act step by step without a plan."""

ROUTES: tuple[Route, ...] = get_args(Route)

PlanAction = Literal["continue", "ask_user", "plan_done"]
"""What the planner wants: keep planning, ask the user first, or hand over a finished plan."""

PLAN_ACTIONS: tuple[PlanAction, ...] = get_args(PlanAction)


class RouteDecision(BaseModel):
    """The route phase's choice.

    When the model's route output cannot be parsed, the runtime routes to ``plan`` (``try_parse_route``
    returns ``None`` for exactly that).

    Attributes:
        route: ``reply``, ``plan`` or ``execute``.
        reply: the answer, when the route is ``reply`` and the model wrote it already.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    route: Route = Field(description="reply: answer directly; plan: several steps; execute: act, no plan.")
    reply: str | None = Field(default=None, description="The answer, when route is reply.")


class PlanStep(BaseModel):
    """One step of a plan.

    Attributes:
        content: what the step does.
        done_when: the observable condition that proves the step complete.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str = Field(min_length=1, pattern=r"\S", description="What this step does.")
    done_when: str | None = Field(default=None, description="The observable proof that the step is done.")


class ContextHook(BaseModel):
    """Tools a plan wants active before execution starts.

    Attributes:
        domain: the tool domain to activate.
        packs: the packs of that domain (empty: the domain's default packs).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    domain: str = Field(min_length=1, pattern=r"\S", description="The tool domain to activate.")
    packs: list[str] = Field(default_factory=list, description="The packs of that domain to activate.")


class PlanOutput(BaseModel):
    """The plan phase's output.

    Rules: ``plan_done`` carries at least one step; ``ask_user`` carries the ``question``.

    Attributes:
        action: ``continue`` (keep planning), ``ask_user`` or ``plan_done``.
        reason: a short explanation for the logs.
        plan_steps: the steps, in order.
        context_hook: tools to pre-activate for the plan.
        question: what to ask the user (``ask_user``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: PlanAction = Field(description="continue: keep planning; ask_user; plan_done: the plan is ready.")
    reason: str | None = Field(default=None, description="A short explanation for the logs.")
    plan_steps: list[PlanStep] = Field(default_factory=list, description="The plan's steps, in order.")
    context_hook: ContextHook | None = Field(default=None, description="Tools to activate for this plan.")
    question: str | None = Field(default=None, description="The question for the user, with ask_user.")

    @model_validator(mode="after")
    def _complete(self) -> PlanOutput:
        broken = plan_violation(
            self.action, has_steps=bool(self.plan_steps), has_question=bool(self.question)
        )
        if broken is not None:
            field, reason = broken
            raise ValueError(f"{field}: {reason}")
        return self


def plan_violation(action: PlanAction, *, has_steps: bool, has_question: bool) -> tuple[str, str] | None:
    """Check a plan output's action against what it carries.

    Returns:
        ``(field, reason)`` for the first rule broken, or ``None``.
    """
    if action == "plan_done" and not has_steps:
        return "plan_steps", "at least one step is required when action is 'plan_done'"
    if action == "ask_user" and not has_question:
        return "question", "required when action is 'ask_user'"
    return None


__all__ = [
    "PLAN_ACTIONS",
    "ROUTES",
    "ContextHook",
    "PlanAction",
    "PlanOutput",
    "PlanStep",
    "Route",
    "RouteDecision",
    "plan_violation",
]
