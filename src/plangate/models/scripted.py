"""``ScriptedModel``: a model that replays scripted responses, for tests and offline demos.

What it is for: driving the runtime without a network or a real model, and asserting on what the runtime
asked (``.requests``). It is a test double, named as such wherever it is offered; it never calls anything.
What it is not for: judging what a real model would do.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Sequence

from plangate.errors import ConfigError
from plangate.models.base import ModelChunk, ModelRequest, TextDelta, Usage, Wire
from plangate.models.errors import ScriptExhaustedError

Script = Sequence[str | BaseException] | Callable[[ModelRequest], str]
"""Responses played in order (an exception in the list is raised at its turn), or a function of the
request that returns the response."""

_PIECES = 3


def _rough_tokens(text: str) -> int:
    # A stand-in for a tokenizer: about four characters a token.
    return math.ceil(len(text) / 4)


def _pieces(text: str) -> list[str]:
    """Split a response into a few chunks, so consumers see a real stream (and tags split across chunks)."""
    if len(text) < _PIECES:
        return [text] if text else []
    size = math.ceil(len(text) / _PIECES)
    return [text[start : start + size] for start in range(0, len(text), size)]


class ScriptedModel:
    """A scripted model: replays its responses in order, for tests and offline demos.

    Each response is streamed in a few ``TextDelta`` chunks, then one ``Usage`` with a rough token count
    (four characters a token). Every request is recorded in ``requests``.

    Args:
        responses: a list of responses (strings; an exception instance is raised when its turn comes), or a
            function ``(ModelRequest) -> str``.
        wire: the wire format the responses are written in: ``json`` or ``tagged``
            (``<decision>{…}</decision>`` then the reply).
        name: the model's name, as recorded by the runtime.
        follows_runs: the script is one run's: when the runtime rebuilds a stored run that started with
            this script (a resume, perhaps in another process), it plays on from the run's next unused
            response (``resume_at``), not from the first. ``scripted:<file>`` models do; a run resumed with
            another file plays that one from its start (the rest of the run).

    Example::

        model = ScriptedModel(['{"route": "reply", "reply": "Hello"}'])
        completion = await complete(model, ModelRequest("route", [Message("user", "hi")]))
    """

    def __init__(
        self, responses: Script, *, wire: Wire = "json", name: str = "scripted", follows_runs: bool = False
    ) -> None:
        if wire not in ("json", "tagged"):
            raise ConfigError(f"ScriptedModel wire: expected 'json' or 'tagged', got {wire!r}")
        self.name = name
        self.wire: Wire = wire
        self.follows_runs = follows_runs
        self.requests: list[ModelRequest] = []
        self._function: Callable[[ModelRequest], str] | None = None
        self._queue: list[str | BaseException] = []
        if callable(responses):
            self._function = responses
        else:
            if isinstance(responses, str):
                raise ConfigError("ScriptedModel responses: expected a list of strings, got one string")
            self._queue = list(responses)
        self._played = 0

    @property
    def remaining(self) -> int | None:
        """How many scripted responses are left (``None`` for a function script)."""
        return None if self._function is not None else len(self._queue) - self._played

    def resume_at(self, calls: int) -> None:
        """Play on from response number ``calls`` (0-based): the responses a run already used are skipped.
        Nothing changes for a function script."""
        if self._function is None:
            self._played = max(0, min(calls, len(self._queue)))

    def __repr__(self) -> str:
        left = "function" if self._function is not None else f"{self.remaining} left"
        return f"ScriptedModel(name={self.name!r}, wire={self.wire!r}, {left})"

    def _next(self, request: ModelRequest) -> str:
        if self._function is not None:
            return self._function(request)
        if self._played >= len(self._queue):
            raise ScriptExhaustedError(
                f"scripted model has no response left for purpose {request.purpose!r} "
                f"(it had {len(self._queue)}; this is call {len(self.requests)})"
            )
        response = self._queue[self._played]
        self._played += 1
        if isinstance(response, BaseException):
            raise response
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream the next scripted response.

        Raises:
            ScriptExhaustedError: the script has no response left.
        """
        self.requests.append(request)
        response = self._next(request)
        for piece in _pieces(response):
            yield TextDelta(piece)
        prompt = sum(_rough_tokens(message.content) for message in request.messages)
        yield Usage(input_tokens=prompt, output_tokens=_rough_tokens(response))


__all__ = ["Script", "ScriptedModel"]
