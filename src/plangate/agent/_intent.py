"""Telling a question from an action, by rule, and the goal that proves each (for models that need it).

For: ``infer_goal``, which reads the user's request before a run starts and, when it is plainly a question
(it asks for information and names no change) or plainly a set of changes ("move t8 to Friday 11:00",
"unplace t2 and place t7 on Tuesday"), returns the goal that proves it, as a ``done_when`` condition over
the run's receipts: a question is answered by a successful read (``QUESTION_GOAL``); an action is done when
as many writes succeeded as the request asks for (one per clause that names a change). A small model (the
local default) never says ``done``: with the goal, the runtime completes the run itself, and the closing
message is written from the observation. The rule also names the tools that fit the request best (the
words of each clause against each tool's name and description, a change's verb by its common synonyms):
a small model copies the worked example of its prompt, which then shows a read tool for a question and the
fitting write tool for a change. A request that mixes both, or names neither, gets no goal (the model
declares ``done``). Not for: what the model may call (validation) or a goal the caller gave
(``Agent(done_when=...)``, which always wins).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Inferred = Literal["question", "action"]
"""What the rule took a request for."""

QUESTION_GOAL = "receipts.any(success and source == 'tool_observation')"
"""A question is answered once a read succeeded."""

_ASKS = re.compile(
    r"^\s*(what|which|when|where|who|whom|whose|why|how|is|are|am|was|were|do|does|did|has|have|"
    r"show|list|give me|tell me|count|check|find|look up|summari[sz]e|describe|report)\b",
    re.IGNORECASE,
)
# Verbs of a change, as people write them to a planner, a calendar, a database or a ticket system.
_CHANGES = re.compile(
    r"\b(place|put|move|moves|shift|swap|trade|exchange|switch|unplace|book|schedule|reschedule|add|insert|"
    r"remove|delete|drop|cancel|clear|take\s+\w+\s+off|take\s+off|assign|set|update|change|create|make|"
    r"rename|replace|push|bump|relocate|postpone|send|write|save|approve|free\s+up)\b",
    re.IGNORECASE,
)
_WHEN = re.compile(r"\b(\d{1,2}:\d\d|\d{1,2}\s*(am|pm)|mon|tue|wed|thu|fri|sat|sun)[a-z]*\b", re.IGNORECASE)
_CLAUSES = re.compile(r"\s*(?:,\s*)?\b(?:and then|then|and|also)\b\s*|\s*[;.]\s+", re.IGNORECASE)


ToolWords = tuple[str, str]
"""A tool as the rule reads it: its name and its description."""

# A change's verb, and the verbs tools are commonly named or described by for it.
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "move": ("shift", "relocate", "push", "bump", "reschedule", "postpone"),
    "swap": ("trade", "exchange", "switch"),
    "place": ("put", "book", "schedule", "add", "insert", "assign"),
    "remove": ("unplace", "clear", "delete", "drop", "cancel", "take", "off"),
}
_STOP = frozenset(
    "a an the to of on in at for and or is are be it its my me i you your this that with from by as "
    "please can could would will do does what which when where who how".split()
)


@dataclass(frozen=True, slots=True)
class Part:
    """One change a request asks for: its words, and the write tool that fits it best."""

    text: str
    tool: str


@dataclass(frozen=True, slots=True)
class Goal:
    """An inferred goal: what the request was taken for, the condition that proves it, and the tools that
    fit it best (for the worked example of a small model's prompt)."""

    kind: Inferred
    done_when: str
    tools: tuple[str, ...] = field(default=())


def infer_goal(prompt: str, *, reads: Sequence[ToolWords], writes: Sequence[ToolWords]) -> Goal | None:
    """The goal the request ``prompt`` states, or None when the rule cannot tell.

    Args:
        prompt: the user's request.
        reads: the agent's read tools (a question can be answered only with one).
        writes: its write tools (an action can be done only with one).
    """
    text = " ".join(prompt.split())
    changes = _changes(_clauses(text))
    if changes is None:
        return None  # a change and a question in one request, or words the rule cannot place
    if not changes:
        if text and reads and (_asks(text) or text.endswith("?")):
            return Goal("question", QUESTION_GOAL, (_fitting(text, reads),))
        return None
    if not writes:
        return None
    fitting = tuple(dict.fromkeys(_fitting(part, writes) for part in changes))
    if len(changes) == 1:
        return Goal("action", "receipts.any(success and source == 'write_receipt')", fitting)
    count = len(changes)
    return Goal("action", f"receipts.count(success and source == 'write_receipt') >= {count}", fitting)


def request_parts(prompt: str, *, writes: Sequence[ToolWords]) -> tuple[Part, ...]:
    """The changes ``prompt`` asks for, in order, each with the write tool that fits it best; () for a
    request that is not plainly a set of changes (a question, a change mixed with a question, no write
    tools). A small model shown the part still to do, and its tool, does it instead of repeating the first.
    """
    changes = _changes(_clauses(" ".join(prompt.split()))) if writes else None
    return tuple(Part(part.strip(), _fitting(part, writes)) for part in changes or ())


def _clauses(text: str) -> list[str]:
    return [part for part in _CLAUSES.split(text) if part and part.strip()]


def _changes(clauses: Sequence[str]) -> list[str] | None:
    """The changes the clauses ask for, each as its text ([] for none), or None for a request that mixes
    changes with anything else. A clause with no verb of its own after a change shares that change's verb:
    another change when it says where or when of its own ("... and t9 on Friday 13:00"), else more of
    the same change ("swap t8 and t5")."""
    found: list[str] = []
    others = 0
    for part in clauses:
        if _CHANGES.search(part) and not _asks(part):
            found.append(part)
        elif found and not _asks(part) and not part.rstrip().endswith("?"):
            if _WHEN.search(part):
                verb = _CHANGES.search(found[-1])
                found.append(f"{verb.group(0) if verb else ''} {part}")
            else:
                found[-1] = f"{found[-1]} {part}"
        else:
            others += 1
    if found and others:
        return None
    return found


def _words(text: str) -> set[str]:
    """The words of ``text``, lower case, a plural's or a past tense's ending cut, stop words left out."""
    found = set()
    for word in re.findall(r"[a-z]+", text.lower().replace("_", " ")):
        if word in _STOP:
            continue
        found.add(word)
        for ending in ("es", "s", "ed", "d"):
            if len(word) > len(ending) + 2 and word.endswith(ending):
                found.add(word[: -len(ending)])
                break
    return found


def _expanded(words: set[str]) -> set[str]:
    """``words`` and, for a change's verb among them, the verbs it stands for."""
    more = set(words)
    for verb, synonyms in _SYNONYMS.items():
        if verb in words or words.intersection(synonyms):
            more.add(verb)
            more.update(synonyms)
    return more


def _fitting(text: str, tools: Sequence[ToolWords]) -> str:
    """The tool whose name (three points a word) and description (one) share most words with ``text``;
    the first tool on a tie."""
    asked = _expanded(_words(text))

    def score(item: ToolWords) -> int:
        name, description = item
        return 3 * len(_words(name) & asked) + len(_words(description) & asked)

    return max(tools, key=score)[0]


def _asks(text: str) -> bool:
    """Whether ``text`` opens as a request for information (a question word or a "show me" verb) and names
    no change after it ("can you move ..." is a change)."""
    return bool(_ASKS.match(text)) and not _CHANGES.search(_ASKS.sub("", text, count=1))


__all__ = ["QUESTION_GOAL", "Goal", "Inferred", "Part", "ToolWords", "infer_goal", "request_parts"]
