"""Counting a prompt's tokens where the provider gives no count, calibrated by what it does count.

For: ``estimate_tokens`` / ``text_tokens`` (CJK 1 a character, ASCII 1 per 4, others 1 per 2, +6 a message),
``clip`` (a text cut in the middle to a number of tokens), ``Meter`` (the estimate scaled by the provider's
own count) and ``MeteredModel`` (a run's model whose every ``Usage`` calibrates the meter). Not for:
deciding what to fold when a prompt is over budget (``_compact.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

from plangate.models import (
    Message,
    Model,
    ModelChunk,
    ModelRequest,
    ModelWrapper,
    Usage,
    wants_compact_prompts,
)
from plangate.runs.telemetry import RunTrace, observed

MESSAGE_TOKENS = 6
"""What the estimate adds for each message (its role and the provider's framing)."""

SCALE_RANGE = (0.25, 4.0)
"""Bounds of the provider's count over the estimate; a ratio outside them is not measuring the same
thing (cached tokens left out, several requests counted as one) and is clamped."""

_CJK = re.compile(
    "["
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK and Kangxi radicals
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u31ff"  # Bopomofo, Hangul compatibility Jamo, Kanbun, strokes, Katakana extensions
    "\u3200-\u4dbf"  # enclosed CJK, CJK compatibility, Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7ff"  # Hangul syllables, Jamo Extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\ufe30-\ufe4f"  # CJK compatibility forms
    "\uff00-\uffef"  # half-width and full-width forms
    "\U00020000-\U0003ffff"  # the ideographic planes (Extensions B and later)
    "]"
)

_CUT = " [...] "


# -- the estimate ---------------------------------------------------------------------------------------


def _quarters(text: str) -> int:
    """The estimate of ``text`` in quarter tokens: CJK 4, ASCII 1, any other character 2."""
    if text.isascii():
        return len(text)
    plain = len(text.encode("ascii", "ignore"))
    cjk = len(_CJK.findall(text))
    return plain + 2 * (len(text) - plain - cjk) + 4 * cjk


def _weight(char: str) -> int:
    if char.isascii():
        return 1
    return 4 if _CJK.match(char) else 2


def text_tokens(text: str) -> int:
    """The estimated tokens of ``text``: CJK 1 a character, ASCII 1 per 4, others 1 per 2, rounded up."""
    return (_quarters(text) + 3) // 4


def estimate_tokens(messages: Iterable[Message]) -> int:
    """The estimated tokens of a prompt: ``text_tokens`` of each message's content, plus 6 a message.

    Example::

        estimate_tokens([Message("user", "abcde"), Message("assistant", "你好")])  # (2 + 6) + (2 + 6) = 16
    """
    return sum(text_tokens(message.content) + MESSAGE_TOKENS for message in messages)


def clip(text: str, tokens: int) -> str:
    """``text`` cut in the middle to at most ``tokens`` estimated tokens, keeping its start and its end."""
    if text_tokens(text) <= tokens:
        return text
    room = 4 * tokens - len(_CUT)
    if room <= 0:
        return text[: _fit(text, 4 * max(tokens, 0))]
    head = _fit(text, room - room // 2)
    tail = _fit(reversed(text[head:]), room // 2)
    return f"{text[:head]}{_CUT}{text[len(text) - tail :] if tail else ''}"


def _fit(chars: Iterable[str], quarters: int) -> int:
    """How many of ``chars``, from the first, fit in ``quarters`` quarter tokens."""
    if isinstance(chars, str) and chars.isascii():
        return min(len(chars), quarters)
    count = 0
    for char in chars:
        quarters -= _weight(char)
        if quarters < 0:
            break
        count += 1
    return count


class Meter:
    """The run's count of a prompt's tokens: the estimate, scaled by the provider's own count.

    Combination: each model call whose stream reported input tokens (``Usage`` chunks, summed) sets
    ``scale`` to those tokens divided by the estimate of the request they counted, clamped to
    ``SCALE_RANGE``; every later count is the estimate times the latest scale, so a tokenizer that counts
    more than the estimate makes the runtime compact sooner. The scale lives as long as the run's loop in
    memory: a resumed run counts by the plain estimate until its first call reports usage.
    """

    def __init__(self) -> None:
        self.scale = 1.0

    def observe(self, messages: Sequence[Message], input_tokens: int) -> None:
        """Take the provider's count of the request made of ``messages``."""
        estimate = estimate_tokens(messages)
        if input_tokens > 0 and estimate > 0:
            low, high = SCALE_RANGE
            self.scale = min(max(input_tokens / estimate, low), high)

    def tokens(self, estimate: int) -> int:
        """The count for a prompt estimated at ``estimate``."""
        return math.ceil(estimate * self.scale - 1e-9)

    def room(self, tokens: int) -> int:
        """The largest estimate whose count is at most ``tokens``."""
        return math.floor(tokens / self.scale + 1e-9)


class MeteredModel(ModelWrapper):
    """A run's model seen through the run's meter: every ``Usage`` it streams calibrates the meter, each
    call's usage is handed to ``on_usage`` (the run's tally) when its stream ends or fails, and ``called``
    (when given) hears of every call as it starts (the run counts its calls)."""

    def __init__(
        self,
        model: Model,
        meter: Meter,
        on_usage: Callable[[str, Usage], None] | None = None,
        trace: RunTrace | None = None,
        called: Callable[[], None] | None = None,
    ) -> None:
        self.inner = model
        self.meter = meter
        self.on_usage = on_usage
        self.trace = trace
        self.called = called

    @property
    def compact_prompts(self) -> bool:
        return wants_compact_prompts(self.inner)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The inner model's stream, unchanged (observed for the run's trace and the metrics when they are
        on)."""
        if self.called is not None:
            self.called()
        counted = 0
        usage: Usage | None = None
        source = observed(self.inner, self.trace)
        try:
            async for chunk in source.stream(request):
                if isinstance(chunk, Usage):
                    counted += chunk.input_tokens
                    usage = chunk if usage is None else usage + chunk
                yield chunk
        finally:
            # A stream that failed after its usage arrived was still paid for.
            if usage is not None and self.on_usage is not None:
                self.on_usage(self.inner.name, usage)
        if counted:
            self.meter.observe(request.messages, counted)


__all__ = ["MESSAGE_TOKENS", "SCALE_RANGE", "Meter", "MeteredModel", "clip", "estimate_tokens", "text_tokens"]
