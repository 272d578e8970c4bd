"""The questions the terminal asks a person, answered with the words people type.

For: ``choose`` (one of a few choices: each has the words that pick it, ``y``/``yes``/``a``/``approve`` and
``n``/``no``/``r``/``reject`` among them, and Enter picks the default shown), ``text`` (a line of text) and
``json_object`` (edited arguments). An answer that is none of the choices is answered with the choices; after
:data:`MAX_INVALID` of them, or at the end of the input (a closed pipe, an empty stdin), the question raises
:class:`NoAnswer`, which the command turns into a message and :data:`EXIT_NO_ANSWER`, its run left waiting.
Nothing here loops without bound. Not for: what is asked (``_drive.py``).
"""

from __future__ import annotations

import json as jsonlib
import sys
from collections.abc import Mapping, Sequence

from pydantic import JsonValue
from rich.markup import escape

from plangate.cli._console import EXIT_NO_ANSWER, out
from plangate.errors import Signal, number_too_long

MAX_INVALID = 3
"""How many answers that are none of the choices a question takes before it stops asking."""

APPROVE_WORDS = ("a", "approve", "y", "yes")
REJECT_WORDS = ("r", "reject", "n", "no")
EDIT_WORDS = ("e", "edit")


class NoAnswer(Signal):
    """The terminal gave no usable answer: its input ended, or it gave :data:`MAX_INVALID` invalid ones.

    Attributes:
        why: what happened, for the message the command ends with.
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _read(prompt: str) -> str:
    """One line from the terminal (or the pipe that stands for it); :class:`NoAnswer` at its end."""
    try:
        said = out.input(prompt)
    except EOFError:
        out.print()
        raise NoAnswer("the input ended before an answer was given") from None
    if not sys.stdin.isatty():
        out.print(escape(said), markup=True)  # piped: the answer shows, as typed on a terminal
    return said


def choose(question: str, choices: Mapping[str, Sequence[str]], default: str) -> str:
    """Ask until one of ``choices`` is picked and return its name.

    Args:
        question: what is asked (rich markup allowed).
        choices: each choice's name and the words that pick it (compared without case or spaces).
        default: the choice Enter picks, shown in the prompt.

    Raises:
        NoAnswer: the input ended, or :data:`MAX_INVALID` answers picked nothing.
    """
    words = {word.lower(): name for name, said in choices.items() for word in said}
    shown = "/".join(said[0] for said in choices.values())
    for _ in range(MAX_INVALID):
        said = _read(f"{question} {escape(f'[{shown}]')} ({escape(choices[default][0])}): ").strip().lower()
        if not said:
            return default
        if said in words:
            return words[said]
        listed = ", ".join(f"{'/'.join(said_as)} to {name}" for name, said_as in choices.items())
        out.print(f"[red]{escape(repr(said))} is not a choice:[/] type {escape(listed)}; Enter for {default}")
    raise NoAnswer(f"{MAX_INVALID} answers were none of the choices")


def text(question: str, default: str = "") -> str:
    """A line of text (``default`` when the person only presses Enter).

    Raises:
        NoAnswer: the input ended.
    """
    suffix = f" ({escape(default)})" if default else ""
    said = _read(f"{question}{suffix}: ").strip()
    return said or default


def json_object(question: str, default: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """A JSON object (``default`` on Enter), asked again when the text is not one.

    Raises:
        NoAnswer: the input ended, or :data:`MAX_INVALID` answers were not a JSON object.
    """
    current = jsonlib.dumps(dict(default), ensure_ascii=False)
    for _ in range(MAX_INVALID):
        said = text(question, current)
        try:
            value = jsonlib.loads(said)
        except jsonlib.JSONDecodeError as exc:
            out.print(f"[red]not JSON:[/] {escape(exc.msg)} at column {exc.colno}")
            continue
        except ValueError as exc:
            out.print(f"[red]cannot read it:[/] {number_too_long(exc)}")
            continue
        if isinstance(value, dict):
            return value
        out.print(f"[red]expected a JSON object, got {type(value).__name__}[/]")
    raise NoAnswer(f"{MAX_INVALID} answers were not a JSON object")


__all__ = [
    "APPROVE_WORDS",
    "EDIT_WORDS",
    "EXIT_NO_ANSWER",
    "MAX_INVALID",
    "REJECT_WORDS",
    "NoAnswer",
    "choose",
    "json_object",
    "text",
]
