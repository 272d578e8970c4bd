"""Generate: stream the copilot model's ops into a draft formula, answering ``look`` and going on.

For: one generation (the first, or a repair round): each request has purpose ``copilot``; ops are read as the
text arrives and applied to the draft, each applied op reported through ``emit`` (the turn stores it as an
``op`` event); ``look {table}`` stops the stream, is answered with the table's columns, types and 5 sample
rows, and generation continues with another request; ``done``, ``reply`` and ``ask`` end it. How the model
is asked (a response schema or none, the output limit, the ops that close a stream that ends without
``done``) is the ``OpsFormat`` the turn's generation strategy gives (``_strategy``), the same code for
every model. Not for: checking the draft (``_check``) or deciding what follows (``policy``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from plangate.copilot._numbers import Known
from plangate.copilot._ops import Draft, Op, OpReader
from plangate.copilot._prompt import look_text
from plangate.copilot._scope import Scope
from plangate.errors import PlangateError
from plangate.models import Message, Model, ModelChunk, ModelRequest, ResponseSchema, TextDelta
from plangate.tools.data import DataSourceError, QueryRefused
from plangate.tools.registry import closest_name

MAX_LOOKS = 6
"""``look`` ops answered per generation; later ones are told to write the workflow instead."""
MAX_CALLS = 10
"""Requests per generation (each ``look`` answered costs one more)."""
MAX_TOKENS = 2_000
"""Tokens one request of a generation may write, unless its ``OpsFormat`` says otherwise."""
DRAIN_CHARS = 400
"""Characters still read, unused, after the op that ends a response (``done``, ``reply``, ``ask``, ``look``),
so that the provider's count of the call (the stream's last chunk, with most providers) arrives and is
counted; a model that writes on past them is cut off, and that call's usage is not known."""

Emit = Callable[[dict[str, JsonValue]], Awaitable[None]]
Ended = Literal["done", "reply", "ask", "eof", "error"]


@dataclass(frozen=True)
class OpsFormat:
    """How a generation asks the model for ops.

    Attributes:
        schema: the response schema the model writes under (the lines a model that samples under a
            grammar may write), or None: it reads the op protocol in the prompt and writes ops freely.
        max_tokens: what one request may write.
        closing: the ops the copilot adds when the text ends without ``done`` after at least one op (and
            the generation then ends ``done``); none: it ends ``eof``.
    """

    schema: ResponseSchema | None = None
    max_tokens: int = MAX_TOKENS
    closing: tuple[dict[str, JsonValue], ...] = ()


@dataclass
class Generation:
    """How one generation ended.

    Attributes:
        ended: ``done``, ``reply``, ``ask``, ``eof`` (the text ended without ``done``) or ``error``.
        text: the reply, the question, or the error's message.
        error_code: ``model_error`` when the model failed.
        ops: how many ops were read.
        transcript: the lines the model wrote, as the next request's assistant message.
        skipped: notes on the lines that were not ops.
    """

    ended: Ended
    text: str = ""
    error_code: str | None = None
    ops: int = 0
    transcript: str = ""
    skipped: list[str] = field(default_factory=list)


class Generator:
    """Runs generations for one attempt of a turn.

    Args:
        model: the copilot model.
        scope: the data the turn may read (``look`` reads from it).
        emit: reports each applied op.
        known: where the rows ``look`` showed are added (the number guard counts them as read).
        ops_format: how the model is asked for ops (the strategy's, for this attempt).
        temperature: the sampling temperature, or None for the model's default.
    """

    def __init__(
        self,
        model: Model,
        scope: Scope,
        emit: Emit,
        *,
        known: Known,
        ops_format: OpsFormat | None = None,
        temperature: float | None = None,
    ) -> None:
        self.temperature = temperature
        self.model = model
        self.scope = scope
        self.emit = emit
        self.format = ops_format or OpsFormat()
        self.known = known
        self.looks = 0

    def request(self, conversation: Sequence[Message]) -> ModelRequest:
        """The request of one model call of a generation."""
        return ModelRequest(
            "copilot",
            list(conversation),
            response_schema=self.format.schema,
            wire="json",
            max_tokens=self.format.max_tokens,
            temperature=self.temperature,
        )

    async def run(self, draft: Draft, conversation: Sequence[Message]) -> Generation:
        """Generate until ``done``, ``reply``, ``ask``, the end of the text, or an error."""
        convo = list(conversation)
        transcript = ""
        skipped: list[str] = []
        total = 0
        for _ in range(MAX_CALLS):
            reader = OpReader()
            try:
                stop, ops, looked = await self._stream(self.request(convo), reader, draft)
            except PlangateError as exc:
                return Generation(
                    "error", f"the model failed: {exc}", "model_error", total, transcript, skipped
                )
            total += ops
            transcript += reader.read
            skipped += reader.skipped
            if looked is None:
                ended, text = stop if stop is not None else ("eof", "")
                if ended == "eof" and total and self.format.closing:
                    for op in self.format.closing:
                        await self._apply(_op_of(op), draft)
                    ended = "done"
                return Generation(ended, text, None, total, transcript, skipped)
            convo += [Message("assistant", reader.read), Message("user", self._look(looked))]
        skipped.append(f"stopped after {MAX_CALLS} requests")
        return Generation("eof", "", None, total, transcript, skipped)

    async def _stream(
        self, request: ModelRequest, reader: OpReader, draft: Draft
    ) -> tuple[tuple[Ended, str] | None, int, str | None]:
        """Read one response: returns how it stopped (``done`` / ``reply`` / ``ask``), the ops read, and the
        table of a ``look`` that interrupted it."""
        ops = 0
        stream = self.model.stream(request)
        try:
            async for chunk in stream:
                if not isinstance(chunk, TextDelta) or not chunk.text:
                    continue
                for op in reader.feed(chunk.text):
                    ops += 1
                    outcome = await self._apply(op, draft)
                    if outcome is not None:
                        await _drain(stream)
                        return outcome, ops, None
                    if op.name == "look":
                        await _drain(stream)
                        return None, ops, str(op.fields.get("table") or "")
            for op in reader.close():
                ops += 1
                outcome = await self._apply(op, draft)
                if outcome is not None:
                    return outcome, ops, None
                if op.name == "look":
                    return None, ops, str(op.fields.get("table") or "")
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                await closer()
        return None, ops, None

    async def _apply(self, op: Op, draft: Draft) -> tuple[Ended, str] | None:
        event = op.as_json()
        problem = draft.apply(op)
        if problem is not None:
            event["error"] = problem
        await self.emit(event)
        if op.name == "done":
            return "done", ""
        if op.name in ("reply", "ask"):
            text = op.fields.get("text")
            return ("reply" if op.name == "reply" else "ask"), text.strip() if isinstance(text, str) else ""
        return None

    def _look(self, name: str) -> str:
        self.looks += 1
        if self.looks > MAX_LOOKS:
            return f"No more looks ({MAX_LOOKS} answered): write the workflow now, then done."
        table = self.scope.table(name)
        if table is None:
            names = [t.name for t in self.scope.schema.tables]
            near = closest_name(name, names) or closest_name(name.lower(), [n.lower() for n in names])
            hint = f" (did you mean {near!r}?)" if near else f" (tables: {', '.join(names[:30])})"
            return f"look {name}: there is no table {name!r}{hint}. Go on with the next operation."
        quoted = ".".join('"' + part.replace('"', '""') + '"' for part in table.name.split("."))
        try:
            sample = self.scope.source.query(f"SELECT * FROM {quoted} LIMIT 5", self.scope.limits)
        except (DataSourceError, QueryRefused) as exc:
            return look_text(table, self.scope, None, str(exc))
        for row in sample.rows:
            self.known.add_cells([value for value in row if not isinstance(value, bytes)])
        return look_text(table, self.scope, sample, None)


async def _drain(stream: AsyncIterator[ModelChunk]) -> None:
    """Read the rest of a response the copilot has what it needs of, up to ``DRAIN_CHARS`` of text."""
    left = DRAIN_CHARS
    async for chunk in stream:
        if isinstance(chunk, TextDelta):
            left -= len(chunk.text)
            if left < 0:
                return


def _op_of(data: dict[str, JsonValue]) -> Op:
    return Op(str(data["op"]), {k: v for k, v in data.items() if k != "op"}, "")


__all__ = ["MAX_CALLS", "MAX_LOOKS", "MAX_TOKENS", "Generation", "Generator", "OpsFormat"]
