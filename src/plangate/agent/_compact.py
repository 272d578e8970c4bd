"""Keeping each execute prompt within the run's token budget: compaction when it is over.

For: ``fit_context``, which an execute round calls before its model call (the count of a prompt's tokens is
``_tokens.py``'s). When the next prompt passes ``context_budget - context_reserve``, the oldest
conversation turns and ReAct records are folded into the run's cumulative summary by a ``compact`` model
call (truncated, oldest first, when that call fails or says nothing), the new ``Memory`` goes into the
run's state, and a ``status`` event ``context_compacted`` says what was folded. Not for: rendering the
prompt (``_context.py`` leaves out what the memory stands for) or committing (the round commits the new
memory and the event with its own).

Never folded: the user's request, the pinned blocks and the current step (they are sections that
``_context.py`` rebuilds from the state every round, not records), hidden corrections (short-lived by
design), and a tool record still waiting for its observation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from plangate.agent._context import execute_context, summary_text
from plangate.agent._state import AgentConfig, Memory
from plangate.agent._tokens import Meter, clip, estimate_tokens, text_tokens
from plangate.agent._transcript import Act, Turn
from plangate.events import Event, StatusEvent
from plangate.models import Message, Model, ModelRequest, complete

if TYPE_CHECKING:
    from plangate.agent._context import View
    from plangate.agent._runcontext import RunContext

SUMMARY_TOKENS = 4_000
"""The most tokens a summary may take, whatever the budget: it is rewritten with the snapshot every round."""

KEEP_RECENT = 2
"""Turns and tool records kept verbatim, each, as long as folding older ones brings the prompt in budget."""

# -- compaction -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Room:
    """The budget of one compaction, in estimated tokens (the meter's scale already applied).

    ``target`` is half the limit, so one compaction makes room for many rounds instead of one; a summary
    gets an eighth of the limit at most, so what one compaction folds fits in one compact request.
    """

    limit: int
    target: int
    summary: int
    summary_tokens: int

    @classmethod
    def of(cls, config: AgentConfig, meter: Meter) -> _Room:
        limit = config.context_limit
        cap = min(limit // 8, SUMMARY_TOKENS)
        return cls(meter.room(limit), meter.room(limit // 2), meter.room(cap), cap)


@dataclass(frozen=True, slots=True)
class _Record:
    """A turn or a tool record that may be folded; ``weight`` is the least its removal saves."""

    kind: Literal["turn", "act"]
    text: str
    weight: int


def _turn(turn: Turn) -> _Record:
    # The prompt shows the bare text; the summariser is told who said it.
    return _Record("turn", f"[{turn.role} said]\n{turn.text}", max(text_tokens(turn.text) - 1, 0))


def _act(act: Act) -> _Record:
    text = act.text()
    return _Record("act", text, max(text_tokens(text) - 1, 0))


def _candidates(view: View) -> tuple[list[_Record], list[_Record]]:
    turns = [_turn(turn) for turn in view.turns()[1:]]
    acts: list[_Record] = []
    for act in view.acts():
        if act.observation is None:
            break  # its result is still to come: folding it now would summarise "(none yet)"
        acts.append(_act(act))
    return turns, acts


def _in_time_order(turns: list[_Record], acts: list[_Record]) -> list[_Record]:
    """Both lists merged so that the share folded of each grows evenly.

    The transcript keeps turns and tool records apart, with no common clock; rounds add to both at a
    steady pace, so equal shares stand for the same stretch of time.
    """
    keyed = [((index + 1) / len(turns), 0, record) for index, record in enumerate(turns)]
    keyed += [((index + 1) / len(acts), 1, record) for index, record in enumerate(acts)]
    keyed.sort(key=lambda item: (item[0], item[1]))
    return [record for _, _, record in keyed]


def _choose(view: View, estimate: int, room: _Room) -> list[_Record]:
    """The records to fold, oldest first: down to the target, into the most recent ones only if the limit
    cannot be met without them.

    The prediction is an upper bound: each removal saves at least its weight, the old summary section
    goes, and the new one is counted at its largest (``room.summary``).
    """
    turns, acts = _candidates(view)
    new_section = summary_text(Memory(summary=".", dropped=10**9))
    predicted = estimate + text_tokens(f"## run_summary\n{new_section}\n\n") + room.summary
    old = "" if view.memory is None else summary_text(view.memory)
    if old:
        predicted -= text_tokens(f"## run_summary\n{old}") - 1
    keep_turns, keep_acts = max(len(turns) - KEEP_RECENT, 0), max(len(acts) - KEEP_RECENT, 0)
    chosen: list[_Record] = []
    for record in _in_time_order(turns[:keep_turns], acts[:keep_acts]):
        if predicted <= room.target:
            return chosen
        chosen.append(record)
        predicted -= record.weight
    for record in _in_time_order(turns[keep_turns:], acts[keep_acts:]):
        if predicted <= room.limit:
            break
        chosen.append(record)
        predicted -= record.weight
    return chosen


_COMPACT_RULES = """\
You keep the memory of a long agent run. The oldest records of the run no longer fit in the agent's \
prompt; write what the agent must remember of them. Merge the summary so far and the records below into \
one updated summary: what the user asked and answered, facts and figures learned (names, ids, numbers, \
dates), changes made and their results, what failed and why, and what is still open. Leave out repetition \
and raw data the agent will not need again. Plain text, no JSON, at most about {words} words."""


def _compact_messages(summary: str, texts: Sequence[str], cap: int) -> list[Message]:
    records = "\n\n".join(texts)
    return [
        Message("system", _COMPACT_RULES.format(words=max(cap * 3 // 4, 50))),
        Message("user", f"## summary_so_far\n{summary or '(none yet)'}\n\n## records\n{records}"),
    ]


def _chunks(records: Sequence[_Record], room: _Room) -> Iterator[list[str]]:
    """The records' texts in groups whose compact request stays within the limit (a record too large for
    a request of its own is cut in the middle)."""
    base = estimate_tokens(_compact_messages("", [], room.summary_tokens))
    space = max(room.limit - base - room.summary - 1, 64)
    chunk: list[str] = []
    used = 0
    for record in records:
        text = clip(record.text, space - 1)
        size = text_tokens(text) + 1
        if chunk and used + size > space:
            yield chunk
            chunk, used = [], 0
        chunk.append(text)
        used += size
    if chunk:
        yield chunk


async def _summarise(
    model: Model, summary: str, records: Sequence[_Record], room: _Room
) -> tuple[str, int, str]:
    """Fold ``records`` into ``summary``, one compact call per chunk.

    Returns:
        The new summary, how many records (from the first) it covers, and why the rest reached no summary
        ("" when all did).
    """
    summary = clip(summary, room.summary)
    done = 0
    for texts in _chunks(records, room):
        request = ModelRequest(
            "compact",
            _compact_messages(summary, texts, room.summary_tokens),
            wire=model.wire,
            max_tokens=room.summary_tokens,
        )
        try:
            completion = await complete(model, request)
        except Exception as exc:
            # As for every model call: what the model raises is an outcome of the call, never a crash.
            return summary, done, f"the compact call failed: {type(exc).__name__}: {exc}"
        text = completion.text.strip()
        if not text:
            return summary, done, "the compact call returned no text"
        summary = clip(text, room.summary)
        done += len(texts)
    return summary, done, ""


def _report(fold: Sequence[_Record], summarised: int, why: str, before: int, after: int) -> str:
    turns = sum(1 for record in fold if record.kind == "turn")
    what = f"{len(fold)} older record(s) ({turns} conversation turn(s), {len(fold) - turns} tool record(s))"
    if summarised == len(fold):
        head = f"folded {what} into the run's summary"
    elif summarised == 0:
        head = f"dropped {what} without a summary ({why})"
    else:
        head = (
            f"folded {what}: {summarised} into the run's summary, {len(fold) - summarised} dropped without "
            f"one ({why})"
        )
    return f"{head}; prompt estimate {before:,} -> {after:,} tokens"


async def fit_context(loop: RunContext, view: View | None = None) -> tuple[list[Message], list[Event]]:
    """The messages of the round's execute call, compacted first when they would pass the budget;
    ``view``: the round's ``loop.view()``, when the caller holds it already.

    Returns:
        The messages, and the ``context_compacted`` status event to commit with the round (none when the
        prompt fit or nothing could be folded). ``loop.state.memory`` holds the new memory.
    """
    view = loop.view() if view is None else view
    messages = execute_context(view).messages()
    estimate = estimate_tokens(messages)
    room = _Room.of(loop.config, loop.meter)
    if estimate <= room.limit:
        return messages, []
    fold = _choose(view, estimate, room)
    if not fold:
        return messages, []
    memory = view.memory or Memory()
    summary, summarised, why = await _summarise(loop.model, memory.summary, fold, room)
    turns = sum(1 for record in fold if record.kind == "turn")
    memory = Memory(
        summary=summary,
        turns=memory.turns + turns,
        acts=memory.acts + len(fold) - turns,
        dropped=memory.dropped + len(fold) - summarised,
    )
    loop.state.memory = memory
    messages = execute_context(replace(view, memory=memory)).messages()
    meter = loop.meter
    text = _report(fold, summarised, why, meter.tokens(estimate), meter.tokens(estimate_tokens(messages)))
    return messages, [StatusEvent(stage="execute", code="context_compacted", text=text)]


__all__ = ["KEEP_RECENT", "SUMMARY_TOKENS", "fit_context"]
