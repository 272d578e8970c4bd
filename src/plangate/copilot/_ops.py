"""The copilot's ops: reading them from a model's newline-delimited JSON, and applying them to a draft
formula.

For: turning streamed text into ops tolerantly (blank lines, code fences, prose, lines without ``op``
are skipped; an object written over several lines is read whole; an array of ops counts as its ops) and
building an ordinary ``Formula`` from them (``add_step``, ``update_step`` with a field merge where ``null``
deletes, ``remove_step``). In a repair round a model very often sends its whole corrected workflow again:
there, an ``add_step`` of an id that exists replaces that step, and a ``plan`` op starts the workflow over.
Not for: deciding what the ops mean for the turn (``_generate``, ``policy``) or checking the formula
(``_check``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from pydantic import JsonValue

from plangate.formulas import Formula, FormulaSchemaError
from plangate.formulas.loader import validate_formula

OP_NAMES = ("plan", "look", "add_step", "update_step", "remove_step", "done", "reply", "ask")
"""The ops a model may emit (``final`` is the copilot's own, after the check)."""

_MAX_BUFFER_LINES = 60
_MAX_BUFFER_CHARS = 40_000
_FENCE = re.compile(r"^\s*(```|~~~)")
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Op:
    """One op as the model wrote it: ``name`` (``add_step``, …), its fields, and the line it came from."""

    name: str
    fields: dict[str, JsonValue]
    line: str

    def as_json(self) -> dict[str, JsonValue]:
        """The op as an object, ``op`` first."""
        return {"op": self.name, **{k: v for k, v in self.fields.items() if k != "op"}}


@dataclass
class OpReader:
    """Reads ops out of text that arrives in pieces; keeps what it skipped and why.

    Attributes:
        skipped: a short note per line that was not an op (for the correction after an empty generation).
        text: every character fed so far.
        read: the complete lines read so far (what the model is known to have written when reading stops
            at an op, such as ``look``).
    """

    skipped: list[str] = field(default_factory=list)
    text: str = ""
    read: str = ""
    _pending: str = ""
    _buffer: list[str] = field(default_factory=list)

    def feed(self, chunk: str) -> Iterator[Op]:
        """The ops completed by ``chunk`` (a line is complete at its newline)."""
        self.text += chunk
        self._pending += chunk
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self.read += line + "\n"
            yield from self._line(line)

    def close(self) -> Iterator[Op]:
        """The ops in what is left once the stream ended (a last line without its newline)."""
        rest, self._pending = self._pending, ""
        if rest.strip():
            self.read += rest
            yield from self._line(rest)
        if self._buffer:
            self.skipped.append(f"an unfinished JSON object: {_short(' '.join(self._buffer))}")
            self._buffer.clear()

    def _line(self, raw: str) -> Iterator[Op]:
        line = raw.strip()
        if self._buffer:
            self._buffer.append(line)
            joined = "\n".join(self._buffer)
            value = _loads(joined)
            if value is not None:
                self._buffer.clear()
                yield from self._ops(value, joined)
            elif len(self._buffer) > _MAX_BUFFER_LINES or len(joined) > _MAX_BUFFER_CHARS:
                self.skipped.append(f"an object that never closed: {_short(joined)}")
                self._buffer.clear()
            return
        if not line:
            return
        if _FENCE.match(line):
            return  # a code fence around the ops: the lines inside are read as any others
        value = _loads(line)
        if value is None:
            value = _embedded(line)
        if value is None:
            if line.startswith(("{", "[")) and line.count("{") > line.count("}"):
                self._buffer.append(line)
            else:
                self.skipped.append(f"not JSON: {_short(line)}")
            return
        yield from self._ops(value, line)

    def _ops(self, value: JsonValue, line: str) -> Iterator[Op]:
        items = value if isinstance(value, list) else [value]
        noted = False
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("op"), str):
                if not noted:
                    self.skipped.append(f"JSON without an op: {_short(line)}")
                    noted = True
                continue
            name = str(item["op"]).strip().lower()
            if name not in OP_NAMES:
                self.skipped.append(f"unknown op {name!r}")
                continue
            yield Op(name, {k: v for k, v in item.items() if k != "op"}, line)


def _loads(text: str) -> JsonValue | None:
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict | list) else None


def _embedded(line: str) -> JsonValue | None:
    """The JSON object inside a line of prose (``op 1: {"op": ...}``), when there is exactly one."""
    start = line.find("{")
    end = line.rfind("}")
    if start <= 0 or end <= start:
        return None
    return _loads(line[start : end + 1])


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def slug(text: str, fallback: str = "ask") -> str:
    """A formula name made of the question's words: ``which-3-regions-had-the-highest-revenue``."""
    words = _SLUG.sub("-", text.lower()).strip("-")
    cut = words[:48].rsplit("-", 1)[0] if len(words) > 48 else words
    return cut or fallback


def _merge(target: dict[str, JsonValue], changes: dict[str, JsonValue]) -> None:
    """Merge ``changes`` into ``target`` in place: objects merge key by key, ``null`` deletes, the rest
    replaces."""
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(inner := target.get(key), dict):
            _merge(inner, value)
        else:
            target[key] = value


@dataclass
class Draft:
    """A formula being built by ops; ``formula()`` validates it as any formula file would be.

    Attributes:
        name: the formula's name.
        steps: the steps as JSON objects, in order.
        problems: ops that could not be applied, each with why (they become check issues).
        summary: the ``plan`` op's summary.
        explanation: the ``done`` op's explanation.
        run: the ``done`` op's ``run``.
        repairing: a repair round is under way (``start_repair``).
    """

    name: str
    description: str = ""
    steps: list[dict[str, JsonValue]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    summary: str = ""
    explanation: str = ""
    run: bool = True
    repairing: bool = False

    def reset(self) -> None:
        """Forget every step (a rebuilt workflow starts from nothing)."""
        self.steps.clear()
        self.problems.clear()

    def start_repair(self) -> None:
        """A repair round begins: the ops that could not be applied were reported (they are forgotten, or
        the check would report them for ever), an ``add_step`` of an existing id now replaces that step and
        a ``plan`` op starts the workflow over."""
        self.problems.clear()
        self.repairing = True

    def apply(self, op: Op) -> str | None:
        """Apply a building op (``plan``, ``add_step``, ``update_step``, ``remove_step``, ``done``); returns
        why it could not be applied, or None."""
        fields = op.fields
        if op.name == "plan":
            self.summary = _text(fields.get("summary"))
            if self.repairing:
                self.steps.clear()  # the corrected workflow follows, whole
            return None
        if op.name == "done":
            self.explanation = _text(fields.get("explanation"))
            self.run = fields.get("run") is not False
            return None
        if op.name == "add_step":
            return self._note(self._add(fields.get("step")))
        if op.name == "update_step":
            return self._note(self._update(fields))
        if op.name == "remove_step":
            return self._note(self._remove(fields.get("id")))
        return None

    def _note(self, problem: str | None) -> str | None:
        if problem is not None:
            self.problems.append(problem)
        return problem

    def _index(self, step_id: object) -> int | None:
        return next((i for i, step in enumerate(self.steps) if step.get("id") == step_id), None)

    def _add(self, step: JsonValue) -> str | None:
        if not isinstance(step, dict):
            return f"add_step: expected a step object in 'step', got {type(step).__name__}"
        step_id = step.get("id")
        if not isinstance(step_id, str) or not step_id.strip():
            return "add_step: the step has no 'id'"
        index = self._index(step_id)
        if index is not None and self.repairing:
            self.steps[index] = json.loads(json.dumps(step))  # the corrected step, sent whole
            return None
        if index is not None:
            return f"add_step: a step {step_id!r} exists already; change it with update_step"
        self.steps.append(json.loads(json.dumps(step)))
        return None

    def _update(self, fields: dict[str, JsonValue]) -> str | None:
        step_id = fields.get("id")
        index = self._index(step_id)
        if index is None:
            known = ", ".join(str(step.get("id")) for step in self.steps) or "none yet"
            return f"update_step: no step {step_id!r} (steps: {known})"
        changes = {k: v for k, v in fields.items() if k != "id"}
        if isinstance(nested := changes.get("step"), dict) and len(changes) == 1:
            changes = {k: v for k, v in nested.items() if k != "id"}  # {"id", "step": {...}} is meant too
        _merge(self.steps[index], changes)
        return None

    def _remove(self, step_id: JsonValue) -> str | None:
        index = self._index(step_id)
        if index is None:
            return f"remove_step: no step {step_id!r}"
        del self.steps[index]
        return None

    def data(self) -> dict[str, JsonValue]:
        """The formula as JSON, as a ``.formula.json`` file would hold it."""
        steps: list[JsonValue] = [dict(step) for step in self.steps]
        data: dict[str, JsonValue] = {"formula": self.name, "steps": steps}
        description = self.description or self.summary or self.explanation
        if description:
            data["description"] = description
        return data

    def formula(self) -> Formula:
        """The draft as a validated formula.

        Raises:
            FormulaSchemaError: a step does not fit the schema (each problem with its path).
        """
        return validate_formula(self.data(), source="<copilot>")


def schema_problems(draft: Draft) -> list[tuple[str, str]] | None:
    """The draft's schema problems (path, message), or None when it validates."""
    try:
        draft.formula()
    except FormulaSchemaError as exc:
        return list(exc.problems)
    return None


def ops_text(formula: Formula) -> str:
    """A formula as the ``add_step`` lines that build it (what a retry hands back to the model)."""
    lines = []
    dumped = formula.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    for step in dumped.get("steps", []):
        lines.append(json.dumps({"op": "add_step", "step": step}, ensure_ascii=False))
    return "\n".join(lines)


def _text(value: JsonValue) -> str:
    return value.strip() if isinstance(value, str) else ""


__all__ = ["OP_NAMES", "Draft", "Op", "OpReader", "ops_text", "schema_problems", "slug"]
