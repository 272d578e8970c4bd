"""The prompt of each model call, rebuilt from the run's state every time: a pure function of its inputs.

For: the messages of the route, plan, execute and deliver calls, laid out in the order things happened so that
each round's prompt extends the last one and a prefix cache (the provider's, or llama.cpp's context) can reuse
it. An execute prompt is, in order: a system message that changes only when the active tools do (rules, the
answer format for the model's wire, the active tool catalogue, the run's own instructions); the user's
request, and the run's summary once compaction folded older records out; then the conversation and the ReAct
record as they happened: the assistant's visible turns, each tool record (thought, call, observation, in the
user's voice as before) and each plan step completed, a person's answers and the assistant's questions in
their place; and last one small state message of named sections: the pinned blocks ``current_plan``,
``current_step`` (with the conditions the runtime checks itself) and ``execution_context`` (rounds left), and
the hidden corrections of the last rounds. Only that message changes from round to round, so only it (and what
the last round added) is new to the model; without a plan, ``current_plan`` and ``current_step`` cannot
change, and they go with the request instead. The system message, and the end of the history before the state
message, are marked ``cache_point`` for providers that cache on request. The run's ``Memory`` says how many of
the oldest turns and records the summary stands for; they are left out here, while the user's request and
every pinned block always stay. The execute prompt is the run's prompt style's (``_style.py``): the full
one is here (``FullStyle``); the compact one of small models, built from the same history and sections, is in
``plangate.agent.small``. Not for: deciding what to fold (``_compact.py``), calling the model (``_calls.py``)
or folding the record from events (``_transcript.py``).

What is rebuilt costs what changed: ``history`` lays out again only the records after the last one that was
final, and hands its settled start over already joined the way ``Context.messages`` joins it (``History``),
so a round late in a long run joins only the turns it added.
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import JsonValue

from plangate.agent._intent import Part
from plangate.agent._state import AgentConfig, Memory
from plangate.agent._transcript import Act, Transcript, Turn
from plangate.conditions import Condition
from plangate.decisions import PlanStep
from plangate.models import Message, Role, Wire

if TYPE_CHECKING:
    from plangate.agent._style import PromptStyle
    from plangate.agent.result import Outcome
    from plangate.tools import Tool

_ROLE = operator.itemgetter(0)
_TEXT = operator.itemgetter(1)

Entry = Mapping[str, JsonValue]
"""A tool's catalogue entry (``Tool.catalogue_entry``): name, description, parameters, effect."""

PINNED = ("current_plan", "current_step", "execution_context")
"""The sections no compaction may drop."""


@dataclass(frozen=True, slots=True)
class Section:
    """A named part of the state message that closes a prompt."""

    name: str
    text: str
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class Context:
    """A prompt as data: the system text, the run's history in order, and the named sections that close it.

    Attributes:
        history: ``(role, text)`` turns, oldest first, before consecutive turns of one role are joined.
        sections: the state message.
        pinned: sections shown in the history instead, right after the request, because they cannot change
            for the rest of the phase.
    """

    system: str
    history: tuple[tuple[Role, str], ...]
    sections: tuple[Section, ...]
    pinned: tuple[Section, ...] = ()

    def section(self, name: str) -> Section | None:
        """The section called ``name``, if the prompt has one (in its state message, or with the request)."""
        return next((item for item in (*self.sections, *self.pinned) if item.name == name), None)

    def messages(self) -> list[Message]:
        """The chat messages: the system message, the history, then the state message.

        Consecutive turns of one role are joined (some providers need user and assistant to alternate), the
        state message with them when the history ends with a user turn. The system message and the end of
        the history are cache points; a joined message keeps the turns it was made of as its blocks, so a
        provider that caches by blocks finds each earlier round's end again.
        """
        messages = [Message("system", self.system, cache_point=True)]
        history = self.history
        joined = history.joined if isinstance(history, History) else None
        if joined is None:
            joined = _NOTHING_JOINED
        # The settled start of the history was joined as it was laid out (``history``): the messages it
        # closed are taken as they are, and only what follows its last run of one role is joined here (in
        # C: a long run of tool records is most of a late round).
        messages += joined.closed[: joined.closed_count]
        runs: list[tuple[Role, list[str], list[tuple[str, bool]]]] = []
        if joined.role is not None:
            runs.append((joined.role, joined.parts[: joined.count], joined.blocks[: joined.count]))
        for role, turns in itertools.groupby(history[joined.turns :], _ROLE):
            texts = list(map(_TEXT, turns))
            if runs and runs[-1][0] == role:
                runs[-1][1].extend(texts)
            else:
                runs.append((role, texts, []))
        # (run, part) of the last part that is history, where the stable prefix ends.
        stable = (len(runs) - 1, len(runs[-1][1]) - 1) if runs else None
        closing = _sections_text(self.sections)
        if closing and runs and runs[-1][0] == "user":
            runs[-1][1].append(closing)
        elif closing:
            runs.append(("user", [closing], []))
        for number, (role, parts, blocks) in enumerate(runs):
            point = stable[1] if stable is not None and stable[0] == number else None
            messages.append(_joined_message(role, parts, blocks, point))
        return messages


def _joined_message(
    role: Role, parts: list[str], blocks: list[tuple[str, bool]], point: int | None
) -> Message:
    """The message of one run of ``parts`` of one role; ``blocks`` holds the first parts' blocks already
    made (never a cache point); ``point``: the part where the stable prefix ends, if in this run."""
    if len(parts) == 1:
        return Message(role, parts[0], cache_point=point == 0)
    made = [*blocks, *zip(parts[len(blocks) :], itertools.repeat(False))]
    if point is not None:
        made[point] = (parts[point], True)
    return Message(role, "\n\n".join(parts), cache_point=point == len(parts) - 1, blocks=tuple(made))


class FullStyle:
    """The prompts of any model that does not ask for compact ones: the full rules and the tools' JSON
    entries, every active tool offered, and a closing message the model writes."""

    name = "full"

    def catalogue(self, entries: Sequence[Entry], goal: Condition | None, hint: Sequence[str] = ()) -> str:
        return catalogue_text(entries)

    def execute_context(self, view: View) -> Context:
        return _full_execute_context(view)

    def offered_tools(self, active: Sequence[Tool], view: View) -> list[Tool]:
        return list(active)

    def argument_sources(self, view: View) -> list[str]:
        return argument_sources(view)

    def closing_text(self, outcome: Outcome, acts: Sequence[Act]) -> str | None:
        return None


FULL = FullStyle()
"""The full prompt style (also a ``View``'s default)."""


@dataclass(frozen=True, slots=True)
class View:
    """Everything a prompt is built from.

    Attributes:
        catalogue: the active tools as JSON text (``Toolset.catalogue()``).
        evidence: successful receipts bound to the current step.
        memory: what compaction folded out of the prompt, if anything.
        goal: the run's ``done_when`` condition, which the runtime checks itself.
        step_condition: the current step's ``done_when``, when it is a condition the runtime checks.
        style: the prompt style the run's model asked for (``_style.prompt_style``), which laid out
            ``catalogue`` and lays out the execute prompt.
        parts: the changes the request asks for, in order, by rule (``_intent.request_parts``; () when it
            is not plainly a set of changes).
        parts_done: how many different writes succeeded in the run so far (the parts done, in order).
    """

    config: AgentConfig
    wire: Wire
    catalogue: str
    transcript: Transcript
    plan: Sequence[PlanStep] | None
    step_index: int
    rounds_used: int
    evidence: int
    memory: Memory | None = None
    goal: Condition | None = None
    step_condition: Condition | None = None
    style: PromptStyle = FULL
    parts: tuple[Part, ...] = ()
    parts_done: int = 0

    def turns(self) -> tuple[Turn, ...]:
        """The conversation the prompt shows: the user's request, then the turns no summary stands for."""
        turns = self.transcript.turns
        if self.memory is None or not self.memory.turns:
            return tuple(turns)
        return (*turns[:1], *turns[1 + self.memory.turns :])

    def acts(self) -> list[Act]:
        """The ReAct records the prompt shows verbatim: those no summary stands for."""
        acts = self.transcript.acts
        return acts[self.memory.acts :] if self.memory is not None and self.memory.acts else acts


_EXECUTE_RULES = """\
You are an agent that completes the user's request through tools, one decision per round. The runtime, not \
you, runs tools, decides which calls need the user's consent, and judges every decision.

Each round, declare exactly one decision:
- action "continue": make progress; put at most one tool call in tool_call {name, arguments}. Its \
observation arrives next round.
- action "ask_user": ask the user one question, written in speak.
- action "confirm": ask the user to approve a tool call that changes something (tool_call required).
- action "next_plan": the current plan step is complete; goal_check says why (its done_when and the \
evidence).
- action "done": the whole request is complete (under a plan: only on the last step, with a goal_check).
- action "abort": stop; abort.user_message tells the user why.
speak is shown to the user; reason is for the logs.

A plan step counts as complete only with evidence gathered while it was current: a successful tool \
observation, an executed change, or the user's answer. A done_when written as a condition on receipts \
(receipts.any(...)) is checked by the runtime after every result, and it completes the step or the request \
itself. Tools with effect "write" run only after the user approves them. Repeating the same call without \
learning anything new stops the run."""

_PLAN_RULES = """\
You plan how to complete the user's request with the tools below. Reply with action "plan_done" and \
plan_steps: a short list of steps, each with content (what to do) and done_when (the observable evidence \
that it is complete, in words, or as a condition on the evidence receipts that the runtime checks itself: \
receipts.any(tool == 'name' and success)). Set context_hook {domain, packs} to activate the tools of a \
domain for the plan, or null. Use action "ask_user" with a question when the request cannot be planned \
without the user's answer, or "continue" with a reason to take another planning pass."""

_ROUTE_RULES = """\
Decide how to handle the user's request. route "reply": answer directly (write the answer in reply); \
route "plan": it needs several steps; route "execute": act with tools, without a plan."""

_DELIVER_RULES = """\
Write the closing message for the user: what was done and the result, briefly and precisely. Plain \
text, no JSON. Use only facts from the conversation and the record."""

_TYPED_DELIVER_RULES = """\
Write the run's answer for the user, using only facts from the conversation and the record, as only a JSON \
value (no other words) that fits this schema: """

_FORMATS: dict[Wire, str] = {
    "json": "Reply with one JSON object that matches the response schema, and nothing else.",
    "tagged": (
        "Start the reply with <decision>{...}</decision> holding the JSON object, then write the text for "
        "the user after the closing tag."
    ),
}


@functools.lru_cache(maxsize=64)
def _system(rules: str, wire: Wire | None, catalogue: str, instructions: str | None) -> str:
    parts = [rules]
    if wire is not None:
        parts.append(_FORMATS[wire])
    if catalogue:
        parts.append(f"Active tools (name, description, parameters, effect):\n{catalogue}")
    if instructions:
        parts.append(f"Instructions for this agent:\n{instructions}")
    return "\n\n".join(parts)


def catalogue_text(entries: Sequence[object]) -> str:
    """The tool catalogue as the system message shows it: one compact JSON object per line."""
    return "\n".join(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) for entry in entries)


def plan_checklist(plan: Sequence[PlanStep], done_through: int) -> str:
    """``[x] step …`` for steps up to ``done_through`` (exclusive), ``[ ] step …`` for the rest."""
    return "\n".join(
        f"[{'x' if index < done_through else ' '}] {step.content}" for index, step in enumerate(plan)
    )


def plan_section(plan: Sequence[PlanStep] | None, step_index: int) -> Section:
    """The pinned ``current_plan`` block: the plan's steps, the current one marked."""
    if not plan:
        return Section("current_plan", "No plan: act step by step until the request is complete.", True)
    lines = []
    for index, step in enumerate(plan):
        mark = "x" if index < step_index else (">" if index == step_index else " ")
        done_when = f" (done when: {step.done_when})" if step.done_when else ""
        lines.append(f"{index + 1}. [{mark}] {step.content}{done_when}")
    return Section("current_plan", "\n".join(lines), True)


_CHECKED = "the runtime checks it after every result"


def step_section(view: View) -> Section:
    """The pinned ``current_step`` block: the step, its ``done_when``, its evidence, and the run's goal."""
    plan = view.plan
    goal = view.goal
    goal_line = (
        f"\nGoal: {goal.expression} ({_CHECKED}, and completes the request itself once it holds)"
        if goal is not None
        else ""
    )
    if not plan:
        return Section("current_step", f"None (no plan).{goal_line}", True)
    step = plan[view.step_index]
    last_step = view.step_index == len(plan) - 1
    text = (
        f"Step {view.step_index + 1} of {len(plan)}: {step.content}\n"
        f"Done when: {step.done_when or 'not stated'}\n"
        f"Evidence for this step so far: {view.evidence} successful receipt(s)"
    )
    if view.step_condition is not None:
        then = "the request is complete" if last_step else "the next step starts"
        last = f"That condition is checked by the runtime after every result: once it holds, {then}."
    elif last_step:
        last = "This is the last step: declare done when it is complete."
    else:
        last = "Declare next_plan when it is complete."
    return Section("current_step", f"{text}\n{last}{goal_line}", True)


def execution_section(view: View) -> Section:
    """The pinned ``execution_context`` block: the round, and the rounds left."""
    budget = view.config.max_rounds
    left = budget - view.rounds_used
    return Section(
        "execution_context",
        f"Round {view.rounds_used} of {budget} ({left} left after this one).",
        True,
    )


def summary_text(memory: Memory) -> str:
    """The ``run_summary`` section's text ("" when the memory holds no summary and dropped nothing)."""
    parts = []
    if memory.summary:
        parts.append(f"The oldest turns and records of this run, summarised:\n{memory.summary}")
    if memory.dropped:
        parts.append(
            f"({memory.dropped} older turn(s) or record(s) were dropped without a summary to keep the prompt "
            "within its budget.)"
        )
    return "\n".join(parts)


def history(view: View, fixed: Sequence[Section] = ()) -> tuple[tuple[Role, str], ...]:
    """The run so far, in order: the request (with the ``fixed`` sections, and the summary of what was
    folded), then every turn, tool record and plan step completed that no summary stands for.

    Records are in the user's voice, as the runtime's account of what was called and what came back (the
    model does not read its own past decisions as its messages: a small model repeats them).
    """
    transcript = view.transcript
    memory = view.memory
    folded_turns = memory.turns if memory is not None else 0
    folded_acts = memory.acts if memory is not None else 0
    summary = "" if memory is None else summary_text(memory)
    key = (folded_turns, folded_acts, summary, _sections_text(fixed) if fixed else "")
    # What the last call laid out of the same past is laid out again only from where it could change (a
    # tool record still waiting for its observation): a round costs what it added, not the whole run.
    kept = transcript.history_kept
    start, found, joined = 0, [], _Joined.empty()
    if isinstance(kept, _Kept) and kept.key == key and kept.upto <= len(transcript.order):
        start, found, joined = kept.upto, list(kept.found), kept.joined
    settled: tuple[int, int] | None = None  # (order entries, history entries) before the first open record
    order = transcript.order
    for position in range(start, len(order)):
        kind, index = order[position]
        if kind == "advance":
            found.append(("user", transcript.advances[index].text))
        elif kind == "act":
            if index >= folded_acts:
                act = transcript.acts[index]
                if settled is None and act.observation is None:
                    settled = (position, len(found))
                found.append(("user", act.text()))
        elif index == 0:
            found.append(("user", transcript.turns[0].text))
            if fixed:
                found.append(("user", key[3]))
            if summary:
                found.append(("user", f"## run_summary\n{summary}"))
        elif index > folded_turns:
            turn = transcript.turns[index]
            found.append(("assistant" if turn.role == "assistant" else "user", turn.text))
    upto, length = settled if settled is not None else (len(order), len(found))
    joined = joined.extended(found, length)
    transcript.history_kept = _Kept(key, upto, found[:length], joined)
    laid_out = History(found)
    laid_out.joined = joined
    return laid_out


class History(tuple[tuple[Role, str], ...]):
    """A prompt's history as ``history`` lays it out: its ``(role, text)`` turns, with its settled start
    already joined the way ``Context.messages`` joins it, so that a late round joins only what it added."""

    joined: _Joined | None = None


@dataclass(frozen=True, slots=True)
class _Kept:
    """The history ``history`` laid out of a transcript's first ``upto`` entries, for ``key`` (what was
    folded, the summary, the fixed sections), every one of them final, and those turns joined."""

    key: tuple[int, int, str, str]
    upto: int
    found: list[tuple[Role, str]]
    joined: _Joined


@dataclass(frozen=True, slots=True)
class _Joined:
    """The first ``turns`` turns of a history joined as ``Context.messages`` joins them: the messages of
    the runs of one role they close (``closed[:closed_count]``, none of them a cache point), then the run
    still open, of ``role``, made of ``parts[:count]`` (with their blocks).

    The lists are shared with the ``_Joined`` that ``extended`` makes next, which appends to them: each
    value reads them only up to its counts.
    """

    turns: int
    closed: list[Message]
    closed_count: int
    role: Role | None
    parts: list[str]
    blocks: list[tuple[str, bool]]
    count: int

    @classmethod
    def empty(cls) -> _Joined:
        """Nothing joined yet, with lists of its own."""
        return cls(0, [], 0, None, [], [], 0)

    def extended(self, turns: Sequence[tuple[Role, str]], upto: int) -> _Joined:
        """These turns and ``turns[self.turns:upto]`` after them, joined."""
        if upto == self.turns:
            return self
        closed, role, parts, blocks = self.closed, self.role, self.parts, self.blocks
        if len(closed) != self.closed_count or len(parts) != self.count:
            # another value went on from this one already: go on from copies of what this one holds
            closed, parts, blocks = closed[: self.closed_count], parts[: self.count], blocks[: self.count]
        for turn_role, text in turns[self.turns : upto]:
            if turn_role != role:
                if role is not None:
                    closed.append(_joined_message(role, parts, blocks, None))
                role, parts, blocks = turn_role, [], []
            parts.append(text)
            blocks.append((text, False))
        return _Joined(upto, closed, len(closed), role, parts, blocks, len(parts))


_NOTHING_JOINED = _Joined.empty()
"""What ``Context.messages`` starts from for a history that comes without its start joined (read only)."""


def _sections_text(sections: Sequence[Section]) -> str:
    return "\n\n".join(f"## {item.name}\n{item.text}" for item in sections)


def correction_sections(transcript: Transcript) -> list[Section]:
    """The ``correction`` section, when the last decisions were not accepted."""
    if not transcript.corrections:
        return []
    notes = "\n".join(f"- {note}" for note in transcript.corrections)
    return [Section("correction", f"Your last decision was not accepted, for this reason:\n{notes}")]


def argument_sources(view: View) -> list[str]:
    """What a tool call may copy its arguments from: the person's words and what the tools that succeeded
    observed, as the prompt shows them. Never the rules, the example or the assistant's own words, nor a
    refusal's message: its words say what a tool expected (``mon..sun``), not values anybody gave."""
    transcript = view.transcript
    memory = view.memory
    folded = (0, 0) if memory is None else (memory.turns, memory.acts)
    # The words and observations of the turns and records that are final were gathered by the last call
    # (a record is final once its observation came): only those after them are looked at again.
    kept = transcript.sources_kept
    if not isinstance(kept, _Sources) or kept.folded != folded:
        kept = _Sources(folded, 0, [], folded[1], [])
    words, observed = kept.words, kept.observed
    if len(words) != kept.words_count or len(observed) != kept.observed_count:
        # another value went on from this one already: go on from copies of what this one holds
        words, observed = words[: kept.words_count], observed[: kept.observed_count]
    turns, acts = transcript.turns, transcript.acts
    for position in range(kept.turns, len(turns)):
        turn = turns[position]
        if turn.role == "user" and (position == 0 or position > folded[0]):
            words.append(turn.text)
    settled = len(acts)
    for position in range(kept.acts, len(acts)):
        act = acts[position]
        if act.observation is None:
            settled = position
            break
        if act.success and act.observation:
            observed.append(act.observation)
    open_ = [act.observation for act in acts[settled:] if act.observation and act.success]
    transcript.sources_kept = _Sources(folded, len(turns), words, settled, observed)
    return [*words, *observed, *open_]


@dataclass(frozen=True, slots=True)
class _Sources:
    """What ``argument_sources`` gathered of a transcript with ``folded`` turns and records summarised: the
    user's words of its first ``turns`` turns, and the observations of its records before ``acts``, every
    one of them final. The lists are shared with the value made next, which appends to them: each value
    reads them only up to the lengths they had when it was made."""

    folded: tuple[int, int]
    turns: int
    words: list[str]
    acts: int
    observed: list[str]
    words_count: int = field(init=False)
    observed_count: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "words_count", len(self.words))
        object.__setattr__(self, "observed_count", len(self.observed))


def execute_context(view: View) -> Context:
    """The prompt of one execute round, as the run's prompt style lays it out."""
    return view.style.execute_context(view)


def _full_execute_context(view: View) -> Context:
    system = _system(_EXECUTE_RULES, view.wire, view.catalogue, view.config.instructions)
    pinned = [plan_section(view.plan, view.step_index), step_section(view)]
    changing = [execution_section(view), *correction_sections(view.transcript)]
    if view.plan:
        return Context(system, history(view), (*pinned, *changing))
    # Without a plan these two blocks cannot change while the run executes (it gets no plan then): they go
    # with the request, in the part every round reuses, and the state message keeps only what changes.
    return Context(system, history(view, pinned), tuple(changing), pinned=tuple(pinned))


def plan_context(view: View) -> Context:
    """The prompt of one planning call."""
    system = _system(_PLAN_RULES, view.wire, view.catalogue, view.config.instructions)
    return Context(system, history(view), tuple(correction_sections(view.transcript)))


def route_context(view: View) -> Context:
    """The prompt of the routing call."""
    system = _system(_ROUTE_RULES, view.wire, "", view.config.instructions)
    return Context(system, history(view), ())


def deliver_context(view: View, outcome_note: str, problem: str = "") -> Context:
    """The prompt of the closing message, after the run completed: plain text, or for a typed output the
    answer as JSON that fits its schema (``problem``: what was wrong with the last one)."""
    schema = view.config.output_schema
    if schema is None:
        system = _system(_DELIVER_RULES, None, "", view.config.instructions)
    else:
        rules = _TYPED_DELIVER_RULES + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        system = _system(rules, None, "", view.config.system_prompt)
    sections = []
    if view.plan:
        sections.append(Section("current_plan", plan_checklist(view.plan, view.step_index + 1), True))
    sections.append(Section("execution_context", outcome_note, True))
    if problem:
        sections.append(Section("correction", f"Your last answer was not accepted: {problem}", False))
    return Context(system, history(view), tuple(sections))


__all__ = [
    "FULL",
    "PINNED",
    "Context",
    "Entry",
    "FullStyle",
    "History",
    "Section",
    "View",
    "argument_sources",
    "catalogue_text",
    "correction_sections",
    "deliver_context",
    "execute_context",
    "execution_section",
    "history",
    "plan_checklist",
    "plan_context",
    "plan_section",
    "route_context",
    "step_section",
    "summary_text",
]
