"""The compact prompt style: the prompts of a small model (the local default, SmolLM2-135M).

For: ``CompactStyle``, what a run on a model that asks for compact prompts does differently, in one place:
the tools listed as signatures with a worked example (``_prompt``); an execute prompt of short rules, with
the same history and state sections as the full one (``plangate.agent._context``); a round's schema that
does not offer again the read tool whose call just succeeded (its observation is in the prompt; a small
model would call it again and learn nothing); and a closing message with no model call, which quotes the
evidence (``evidence_text``). Not for: choosing the style (``plangate.agent._style.prompt_style``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from plangate.agent._context import (
    Context,
    Entry,
    Section,
    View,
    argument_sources,
    correction_sections,
    execution_section,
    history,
    plan_section,
    step_section,
)
from plangate.agent._intent import Part
from plangate.agent._transcript import Act
from plangate.agent.small._prompt import small_catalogue, small_rules
from plangate.conditions import Condition, named_tools

if TYPE_CHECKING:
    from plangate.agent.result import Outcome
    from plangate.tools import Tool

EVIDENCE_CHARS = 1_500
"""Characters of the last observation a small model's closing message quotes at most."""


class CompactStyle:
    """Short rules, tool signatures and a worked example; no repeated read; the evidence as the closing."""

    name = "compact"

    def catalogue(self, entries: Sequence[Entry], goal: Condition | None, hint: Sequence[str] = ()) -> str:
        return small_catalogue(entries, (*(() if goal is None else named_tools(goal)), *hint))

    def execute_context(self, view: View) -> Context:
        """Its own rules and catalogue, the same history and state."""
        rules = small_rules(goal=view.goal is not None, tools=bool(view.catalogue))
        system = _system(rules, view.catalogue, view.config.instructions)
        changing = [execution_section(view), *parts_sections(view), *correction_sections(view.transcript)]
        if view.plan:
            pinned = [plan_section(view.plan, view.step_index), step_section(view)]
            return Context(system, history(view), (*pinned, *changing))
        goal = [] if view.goal is None else [Section("goal", view.goal.expression, True)]
        return Context(system, history(view, goal), tuple(changing), pinned=tuple(goal))

    def offered_tools(self, active: Sequence[Tool], view: View) -> list[Tool]:
        """The tool of the part of the request to do now, for a request of several changes; for a request of
        one change, the read tools and the write tool that fits it (not the other writes: "Drop t2 from the
        calendar" had a small model pick a batch tool over the one that takes a task off); else the active
        tools. Less, in the last two cases, the read tool whose call just succeeded (none left out if it was
        the only one)."""
        part = current_part(view)
        if part is not None:
            fitting = [item for item in active if item.name == part.tool]
            if fitting:
                return fitting
        single = sole_part(view)
        if single is not None and any(item.name == single.tool for item in active):
            active = [item for item in active if item.effect == "read" or item.name == single.tool]
        acts = view.transcript.acts
        if not acts or not acts[-1].success:
            return list(active)
        last = acts[-1].tool
        others = [item for item in active if not (item.name == last and item.effect == "read")]
        return others or list(active)

    def argument_sources(self, view: View) -> list[str]:
        """The words of the part of the request to do now, for a request of several changes that names its
        values there; else what any model's call may copy (``_context.argument_sources``)."""
        part = current_part(view)
        if part is not None and any(char.isdigit() for char in part.text):
            return [part.text]
        return argument_sources(view)

    def closing_text(self, outcome: Outcome, acts: Sequence[Act]) -> str | None:
        return evidence_text(outcome, acts)


def current_part(view: View) -> Part | None:
    """The part of a request of several changes to do now (None: one change, none left, or a plan)."""
    if len(view.parts) < 2 or view.plan or view.parts_done >= len(view.parts):
        return None
    return view.parts[view.parts_done]


def sole_part(view: View) -> Part | None:
    """The change a request of one change asks for, until it is done (None: several, none, or a plan)."""
    if len(view.parts) != 1 or view.plan or view.parts_done:
        return None
    return view.parts[0]


def parts_sections(view: View) -> list[Section]:
    """The ``request_parts`` section of a request of several changes (none under a plan, which says what
    comes next itself): each part, done or not, and the one to do now with the tool that fits it. A small
    model shown only the request repeats the change it made first."""
    parts = view.parts
    if len(parts) < 2 or view.plan:
        return []
    lines = [f"The request has {len(parts)} parts, done in order:"]
    for number, part in enumerate(parts, 1):
        if number <= view.parts_done:
            state = "done"
        elif number == view.parts_done + 1:
            state = f"do it now, with {part.tool}"
        else:
            state = "after that"
        lines.append(f"{number}. {part.text.rstrip('.')}: {state}")
    return [Section("request_parts", "\n".join(lines), True)]


@functools.lru_cache(maxsize=64)
def _system(rules: str, catalogue: str, instructions: str | None) -> str:
    parts = [rules, catalogue]
    if instructions:
        parts.append(f"Instructions for this agent:\n{instructions}")
    return "\n\n".join(part for part in parts if part)


def evidence_text(outcome: Outcome, acts: Sequence[Act]) -> str:
    """The closing message of a completed run on a small model, with no model call: what ended it (the
    proof, or the model's answer) and the last successful tool observation, quoted as the evidence.

    A 135M model's summary of an observation is slower to write and less reliable than the observation.
    """
    lead = outcome.user_message or "Done."
    last = next((act for act in reversed(acts) if act.success and act.observation), None)
    if last is None:
        return lead
    observation = last.observation or ""
    if len(observation) > EVIDENCE_CHARS:
        observation = observation[:EVIDENCE_CHARS].rstrip() + " …"
    return f"{lead}\n\n{last.tool}: {observation}"


COMPACT = CompactStyle()
"""The compact prompt style."""


__all__ = ["COMPACT", "EVIDENCE_CHARS", "CompactStyle", "evidence_text", "parts_sections"]
