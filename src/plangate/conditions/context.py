"""What a condition is evaluated against: step states, receipts, variables, the environment and a file root.

Plain data only. Building a context from a running formula is the formula engine's job; reading it is the
compiler's. The one piece of policy here is the default environment: the process environment filtered through
the ``PLANGATE_ENV_ALLOW`` allow-list, so a condition can never read a variable nobody allowed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ENV_ALLOW_VARIABLE = "PLANGATE_ENV_ALLOW"
DEFAULT_ENV_ALLOW = ("CI",)


@dataclass(frozen=True, slots=True)
class StepState:
    """The state of one step as a condition sees it.

    Attributes:
        id: the step id (``run-tests``).
        status: one of ``pending``, ``ready``, ``running``, ``waiting``, ``complete``, ``failed``,
            ``skipped``, ``cancelled``.
        output: what the step produced; nested mappings are walked by ``<id>.output.a.b``.
        children: the steps it spawned, for ``children(<id>)`` and ``descendants(<id>)``.
    """

    id: str
    status: str
    output: Mapping[str, object] = field(default_factory=dict)
    children: Sequence[StepState] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReceiptState:
    """One evidence receipt of a run as a condition sees it, inside ``receipts.any(...)`` and its siblings.

    Attributes:
        tool: the tool that produced it (``ask_user`` for a person's answer).
        success: whether the call achieved what it was asked to do.
        step: the number of the plan step it is bound to (1 for the first), or ``None`` in a run without a
            plan.
        source: ``tool_observation`` (a read), ``write_receipt`` (an executed write) or ``user_reply``.
        output: what the tool returned (its JSON data, else its observation text; a person's answer);
            ``output.a.b`` walks it like a step's output.
    """

    tool: str
    success: bool
    step: int | None
    source: str
    output: object = None


@dataclass(frozen=True, slots=True)
class ConditionContext:
    """Everything an expression may read.

    Attributes:
        steps: step states by id.
        current_step: the id of the step a bare ``status`` / ``output.X`` / ``step.X`` refers to.
        vars: formula variables, for ``vars.X`` and ``{{X}}`` in ``file.exists``.
        env: the environment ``env.X`` reads; ``None`` means ``default_env()``.
        root: the directory ``file.exists`` is confined to; ``None`` makes every ``file.exists`` unsatisfied.
        receipts: the run's evidence receipts, oldest first, for ``receipts.any/all/count``.
    """

    steps: Mapping[str, StepState] = field(default_factory=dict)
    current_step: str | None = None
    vars: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] | None = None
    root: Path | None = None
    receipts: Sequence[ReceiptState] = ()


def env_allow_list() -> frozenset[str]:
    """The names ``default_env`` lets through: ``PLANGATE_ENV_ALLOW`` (comma-separated) or just ``CI``."""
    raw = os.environ.get(ENV_ALLOW_VARIABLE)
    if raw is None:
        return frozenset(DEFAULT_ENV_ALLOW)
    return _parse_allow_list(raw)


def _parse_allow_list(raw: str) -> frozenset[str]:
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def default_env() -> dict[str, str]:
    """The process environment, keeping only the allow-listed names that are set."""
    return {name: os.environ[name] for name in env_allow_list() if name in os.environ}


def env_lookup(ctx: ConditionContext, name: str) -> str | None:
    """Read ``name`` for ``env.NAME``: from ``ctx.env``, or from the allow-listed process environment."""
    env = ctx.env
    if env is not None:
        return env.get(name)
    if name not in env_allow_list():
        return None
    return os.environ.get(name)


__all__ = [
    "DEFAULT_ENV_ALLOW",
    "ENV_ALLOW_VARIABLE",
    "ConditionContext",
    "ReceiptState",
    "StepState",
    "default_env",
    "env_allow_list",
    "env_lookup",
]
