"""The tagged wire format, parsed while it streams: ``<decision>{…}</decision>`` then the visible reply.

Rules (SPEC §3):

- the opening tag must start within the first ``PLAIN_REPLY_WINDOW`` (500) characters; otherwise the whole
  text is a **plain reply**: ``TaggedResult.decision`` is ``None`` and ``plain`` is true, and the runtime
  decides what a plain reply means. Tags match without regard to case;
- the decision is the first balanced JSON object inside the tag (braces in strings and escaped quotes do
  not count); anything else inside the tag, such as a code fence, is ignored;
- the visible reply is what follows ``</decision>``, trimmed; text before the opening tag is kept as
  ``preamble`` and never shown;
- an unclosed tag (or object) at the end of the stream, a tag with no object, or a ``</decision>`` before
  the object closes is a ``DecisionParseError`` (a correction), never an empty reply.

Visible text is released only once it is safe: nothing while the opening tag may still come (up to 500
characters), nothing before the decision is decoded, and trailing whitespace only when more text follows.
However the stream is split into deltas, the same deltas joined give the same text, and the same result.

What it is for: the streaming state machine. What it is not for: the meaning of the decision's fields
(``decode``) or the json wire (``parse_decision_json``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, auto
from typing import Generic, TypeVar, cast, overload

from plangate.decisions._json import ObjectScanner, loads
from plangate.decisions.decode import decode_decision
from plangate.decisions.errors import DecisionParseError
from plangate.decisions.protocol import Decision
from plangate.errors import UsageError

T = TypeVar("T")

PLAIN_REPLY_WINDOW = 500
"""The opening tag must start before this many characters, or the text is a plain reply."""

OPEN_TAG = "<decision>"
CLOSE_TAG = "</decision>"
# ASCII-only case folding: with Unicode folding a tag could match through characters such as 'ſ', and
# whether a split fragment is a tag's beginning could no longer be told from its ASCII prefix.
_OPEN = re.compile(re.escape(OPEN_TAG), re.IGNORECASE | re.ASCII)
_CLOSE = re.compile(re.escape(CLOSE_TAG), re.IGNORECASE | re.ASCII)


class _State(Enum):
    SEEK_OPEN = auto()
    SEEK_OBJECT = auto()
    IN_OBJECT = auto()
    SEEK_CLOSE = auto()
    REPLY = auto()
    PLAIN = auto()
    DONE = auto()


@dataclass(frozen=True, slots=True)
class TaggedResult(Generic[T]):
    """What a tagged output held, once the stream ended.

    Attributes:
        decision: the decoded decision (or route, or plan), ``None`` for a plain reply.
        reply: the whole visible reply, trimmed (the deltas ``feed`` returned plus ``tail``).
        tail: visible text released only at the end of the stream; show it after the deltas.
        preamble: text the model wrote before the opening tag, for the logs.
    """

    decision: T | None
    reply: str
    tail: str
    preamble: str = ""

    @property
    def plain(self) -> bool:
        """Whether the output had no decision tag in time: a plain reply."""
        return self.decision is None


class TaggedStreamParser(Generic[T]):
    """Incremental parser of the tagged wire format (see the module docstring for the rules).

    Example::

        parser = TaggedStreamParser()
        for delta in deltas:
            show(parser.feed(delta))
        result = parser.finish()
        show(result.tail)

    ``TaggedStreamParser()`` decodes a ``Decision``; pass ``decode_route`` or ``decode_plan`` (or any function
    of the decoded JSON) to read another output in the same format.
    """

    @overload
    def __init__(self: TaggedStreamParser[Decision]) -> None: ...

    @overload
    def __init__(self, decode: Callable[[object], T]) -> None: ...

    def __init__(self, decode: Callable[[object], T] | None = None) -> None:
        # Without a decoder the first overload applies, so T is Decision.
        self._decode = decode if decode is not None else cast("Callable[[object], T]", decode_decision)
        self._text = ""
        self._pos = 0
        self._state = _State.SEEK_OPEN
        self._scanner = ObjectScanner()
        self._object_start = 0
        self._decision: T | None = None
        self._preamble = ""
        self._error: DecisionParseError | None = None
        self._started = False
        self._held_ws = ""
        self._shown: list[str] = []

    def feed(self, delta: str) -> str:
        """Take the next piece of the stream.

        Returns:
            The visible text that became safe to show (often ``""``).

        Raises:
            DecisionParseError: as soon as the decision is known to be unusable; every later call raises it
                again.
        """
        self._check_open()
        self._text += delta
        try:
            return self._run(final=False)
        except DecisionParseError as exc:
            self._error = exc
            raise

    def finish(self) -> TaggedResult[T]:
        """End the stream.

        Returns:
            The result; its ``tail`` is the last visible text to show.

        Raises:
            DecisionParseError: the tag or its object was not closed, or the decision is unusable.
        """
        self._check_open()
        try:
            tail = self._run(final=True)
            if self._state is _State.SEEK_OPEN:
                self._state = _State.PLAIN
                tail += self._run(final=True)
            unclosed = _UNCLOSED.get(self._state)
            if unclosed is not None:
                raise DecisionParseError("decision", unclosed)
        except DecisionParseError as exc:
            self._error = exc
            raise
        self._state = _State.DONE
        return TaggedResult(self._decision, "".join(self._shown), tail, self._preamble)

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._state is _State.DONE:
            raise UsageError("the tagged stream parser was already finished; expected no more input")

    def _run(self, *, final: bool) -> str:
        shown = ""
        while True:
            state = self._state
            if state is _State.SEEK_OPEN:
                self._seek_open()
            elif state is _State.SEEK_OBJECT:
                self._seek_object(final=final)
            elif state is _State.IN_OBJECT:
                self._in_object(final=final)
            elif state is _State.SEEK_CLOSE:
                self._seek_close()
            elif state in (_State.REPLY, _State.PLAIN):
                shown += self._show(self._text[self._pos :])
                self._pos = len(self._text)
            if self._state is state:
                return shown

    def _seek_open(self) -> None:
        match = _OPEN.search(self._text)
        if match is not None and match.start() < PLAIN_REPLY_WINDOW:
            self._preamble = self._text[: match.start()].strip()
            self._pos = match.end()
            self._state = _State.SEEK_OBJECT
        elif len(self._text) >= PLAIN_REPLY_WINDOW + len(OPEN_TAG) - 1:
            # No tag can start inside the window any more: everything so far is reply.
            self._state = _State.PLAIN

    def _at_close_tag(self, index: int, *, final: bool) -> bool | None:
        """Whether a closing tag starts at ``index``; ``None`` when more text is needed to tell."""
        if _CLOSE.match(self._text, index) is not None:
            return True
        if not final and len(self._text) - index < len(CLOSE_TAG):
            fragment = self._text[index:]
            if fragment.isascii() and CLOSE_TAG.startswith(fragment.lower()):
                return None
        return False

    def _seek_object(self, *, final: bool) -> None:
        while self._pos < len(self._text):
            char = self._text[self._pos]
            if char == "{":
                self._object_start = self._pos
                self._state = _State.IN_OBJECT
                return
            if char == "<":
                closed = self._at_close_tag(self._pos, final=final)
                if closed is None:
                    return
                if closed:
                    raise DecisionParseError("decision", "no JSON object inside <decision>…</decision>")
            self._pos += 1

    def _in_object(self, *, final: bool) -> None:
        while True:
            end, stop = self._scanner.advance(self._text, self._pos)
            if stop == "more":
                self._pos = end
                return
            if stop == "closed":
                raw = loads(self._text[self._object_start : end], "decision", offset=self._object_start)
                self._decision = self._decode(raw)
                self._pos = end
                self._state = _State.SEEK_CLOSE
                return
            closed = self._at_close_tag(end, final=final)
            if closed is None:
                self._pos = end
                return
            if closed:
                raise DecisionParseError("decision", "the JSON object is not closed before </decision>")
            self._pos = end + 1

    def _seek_close(self) -> None:
        match = _CLOSE.search(self._text, self._pos)
        if match is None:
            # Keep the last few characters: they may be the start of the closing tag.
            self._pos = max(self._pos, len(self._text) - len(CLOSE_TAG) + 1)
            return
        self._pos = match.end()
        self._state = _State.REPLY

    def _show(self, text: str) -> str:
        """Release visible text, trimmed at both ends of the whole reply."""
        if not self._started:
            text = text.lstrip()
            if not text:
                return ""
            self._started = True
        combined = self._held_ws + text
        visible = combined.rstrip()
        self._held_ws = combined[len(visible) :]
        self._shown.append(visible)
        return visible


_UNCLOSED = {
    _State.SEEK_OBJECT: "the <decision> tag is not closed and holds no JSON object (the output ended)",
    _State.IN_OBJECT: "the JSON object inside <decision> is not closed (the output ended)",
    _State.SEEK_CLOSE: "missing </decision> after the JSON object (the output ended)",
}


@overload
def parse_tagged(chunks: str | Iterable[str]) -> TaggedResult[Decision]: ...


@overload
def parse_tagged(chunks: str | Iterable[str], decode: Callable[[object], T]) -> TaggedResult[T]: ...


def parse_tagged(
    chunks: str | Iterable[str], decode: Callable[[object], T] | None = None
) -> TaggedResult[T] | TaggedResult[Decision]:
    """Parse a whole tagged output (a string, or the deltas of a finished stream) in one call.

    Raises:
        DecisionParseError: as ``TaggedStreamParser.feed`` and ``finish`` do.
    """
    parser: TaggedStreamParser[T] | TaggedStreamParser[Decision]
    parser = TaggedStreamParser() if decode is None else TaggedStreamParser(decode)
    for chunk in [chunks] if isinstance(chunks, str) else chunks:
        parser.feed(chunk)
    return parser.finish()


__all__ = [
    "CLOSE_TAG",
    "OPEN_TAG",
    "PLAIN_REPLY_WINDOW",
    "TaggedResult",
    "TaggedStreamParser",
    "parse_tagged",
]
