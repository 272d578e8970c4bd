"""Checked by mypy --strict in test_agent_typed.py (never run): what a type checker sees of the typed API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_type

from pydantic import BaseModel

from plangate.agent import Agent, AgentResult, RunContext
from plangate.models import TestModel
from plangate.tools import tool


class Answer(BaseModel):
    text: str


@dataclass
class Deps:
    user: str


@tool
def whoami(ctx: RunContext[Deps]) -> str:
    """Who asks."""
    assert_type(ctx.deps, Deps)
    return ctx.deps.user


def typed() -> None:
    agent = Agent(model=TestModel(), tools=[whoami], output_type=Answer, deps_type=Deps)
    assert_type(agent, Agent[Deps, Answer])
    result = agent.run("who?", deps=Deps("ann"))
    assert_type(result, AgentResult[Answer])
    assert_type(result.output, Answer | None)
    agent.run("who?", deps="ann")  # type: ignore[arg-type]


def untyped() -> None:
    agent = Agent(model=TestModel())
    assert_type(agent, Agent[None, str])
    assert_type(agent.run("hi").output, str | None)
