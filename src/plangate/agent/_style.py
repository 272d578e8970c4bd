"""Prompt styles: how an agent run lays out its prompts for the model it runs on, asked of the model once.

For: ``PromptStyle``, everything the agent runtime does differently for the kind of model it calls (the
tool catalogue, the execute prompt, the tools a round's schema offers, and a closing message written
without a model call); and ``prompt_style``, the one place that picks a style from the model: a model that
asks for compact prompts (``plangate.models.wants_compact_prompts``; the local default does) gets
``plangate.agent.small.COMPACT``, every other model the full style (``_context.FULL``). The phases read the
run's style from its ``View`` and read the same for every model. Not for: the prompts themselves
(``_context.py``, ``plangate.agent.small``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from plangate.agent._context import FULL, Context, Entry, View
from plangate.agent._transcript import Act
from plangate.agent.result import Outcome
from plangate.agent.small import COMPACT
from plangate.conditions import Condition
from plangate.models import wants_compact_prompts
from plangate.tools import Tool


class PromptStyle(Protocol):
    """How a run's prompts are laid out for one kind of model.

    Attributes:
        name: ``full`` or ``compact`` (for logs and tests).
    """

    @property
    def name(self) -> str: ...

    def catalogue(self, entries: Sequence[Entry], goal: Condition | None, hint: Sequence[str] = ()) -> str:
        """The active tools as the system message lists them (``goal``: the run's ``done_when``; ``hint``:
        tools that fit the request, after those the goal names)."""
        ...

    def execute_context(self, view: View) -> Context:
        """The prompt of one execute round."""
        ...

    def offered_tools(self, active: Sequence[Tool], view: View) -> list[Tool]:
        """The tools a round's schema offers, of the ``active`` ones, at the moment ``view`` shows (any
        active tool is still accepted by validation)."""
        ...

    def argument_sources(self, view: View) -> list[str]:
        """What a round's tool call may copy its arguments from (for a model whose grammar copies them)."""
        ...

    def closing_text(self, outcome: Outcome, acts: Sequence[Act]) -> str | None:
        """The closing message of a completed run, written without a model call; None: the model writes it."""
        ...


def prompt_style(model: object) -> PromptStyle:
    """The style of a run on ``model``: compact for a model that asks for compact prompts, else full."""
    return COMPACT if wants_compact_prompts(model) else FULL


__all__ = ["PromptStyle", "prompt_style"]
