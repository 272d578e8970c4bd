"""A GBNF grammar from a wire schema, so a local model can only write output that parses.

The local model (llama.cpp) samples under a grammar. This module turns the JSON schemas of
``plangate.decisions.schema`` into one, and tightens them first where the schema alone would still let a
small model write something the decoders refuse:

- a decision's action is paired with the intents it needs (``confirm`` carries a tool call, ``abort`` an
  abort with a message, the others neither; only ``next_plan`` and ``done`` carry a goal check, which
  ``next_plan`` must), the tool name is one of the request's tools, and, when the request gives their
  parameter schemas, a call's arguments fit the named tool's (``tool_arguments_schema``);
- a plan with ``plan_done`` has at least one step, and ``ask_user`` has a question;
- text the decoders require (a tool name, an abort message, a step's content, a domain) starts with a
  character that is not whitespace, since the decoders trim it;
- strings are bounded in length and written without ``\\u`` escapes (no lone surrogates), numbers have a
  bounded number of digits, and the open ``tool_call.arguments`` object is bounded in keys and depth, so the
  whole output is finite and a token limit can be chosen that it never reaches in practice; an open object
  holds one key (a grammar cannot keep two keys apart, and the decoders refuse a repeated one);
- for a small model (``GrammarLimits.terse`` and ``copy_arguments``), a decision holds only the fields its
  action needs, and a call's arguments are values the conversation wrote (``seen_in``: its words, quoted
  phrases and numbers; an enum's values it named; the value written after a parameter's name), with the
  optional ones nobody gave left out.

The converter reads the portable subset the schema module documents (``type``, ``enum``, ``properties``,
``items``, ``anyOf``) plus ``minLength``, ``maxLength``, ``minItems``, ``maxItems``, ``pattern: "\\S"``
(at least one character that is not whitespace) and ``pattern: DATE_BOUND`` (a year, a month or a day:
``2025``, ``2025-03``, ``2025-03-14``). A root of the form ``{"x-lines": [schema, ...]}`` is a sequence of
lines, one JSON text per schema, each ended by a newline: what a stream of newline-delimited JSON (the
copilot's ops) must look like. Objects are written with their properties in order: every
one when the node has no ``required`` list, else the required ones followed by any of the others; a closed
object without properties is ``{}``.

Why not llama.cpp's own converter (``llama_cpp.llama_grammar.json_schema_to_gbnf``): it compiles a schema as
written, one JSON text per grammar, and what it leaves open is unbounded: a string's characters include
``\\u`` escapes (so lone surrogates the decoders refuse), an open object or ``value`` nests to any depth with
any number of keys, so no token limit is sure to end the output. It has no form for the copilot's lines
(``x-lines``), and none of the tightening above, which needs the request (its tools and their parameters).

What it is for: building grammars. What it is not for: running the model (``local``) or validating output
(the decoders in ``plangate.decisions``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plangate.decisions.outputs import PLAN_ACTIONS
from plangate.decisions.protocol import ACTIONS
from plangate.decisions.schema import JsonSchema, decision_json_schema, plan_json_schema, route_json_schema
from plangate.errors import ConfigError, Signal

_Node = dict[str, Any]

NOT_BLANK = r"\S"
"""A ``pattern`` the converter understands: at least one character that is not whitespace."""

DATE_BOUND = r"^[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?$"
"""A ``pattern`` the converter understands: a year, a year and month, or a day (``2025``, ``2025-03``)."""

LINES = "x-lines"
"""The key of a root schema that is a sequence of newline-ended JSON lines, one per listed schema."""

# What Python's str.strip() removes beyond ASCII controls and space: a first character from this set would
# let a required text trim to nothing.
_UNICODE_SPACES = r"\x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"

_PRIMITIVES = {
    "ws": '" "?',
    "char": r'[^"\\\x00-\x1F\x7F] | "\\" ["\\/bfnrt]',
    "head-char": rf'[^"\\\x00-\x20\x7F{_UNICODE_SPACES}] | "\\" ["\\/]',
    "null": '"null"',
    "boolean": '"true" | "false"',
    "integer": '"-"? ("0" | [1-9] [0-9]{0,15})',
    "number": 'integer ("." [0-9]{1,8})?',
}


@dataclass(frozen=True, slots=True)
class GrammarLimits:
    """The bounds a grammar puts on what the schema leaves open.

    A small model that starts repeating itself inside a string goes on until the grammar stops it, so these
    bounds, more than the model, decide how long an output can get.

    Attributes:
        text: characters in text a person reads (``speak``, an abort's ``user_message``, a plan's
            ``question``, a route's ``reply``), and in any string of another schema that sets no bound.
        note: characters in other text (``reason``, ``goal_check``, ``internal_reason``, a step's
            ``content`` and ``done_when``).
        name: characters in an identifier (a tool name, an abort ``code``, a ``domain``, a pack) and in a
            key of the tool arguments.
        max_items: items in an array the schema does not bound itself (plan steps, packs).
        open_keys: keys in an object whose properties the schema leaves open (``tool_call.arguments``).
            One by default: a grammar cannot tell two keys apart, and the decoders refuse a key written
            twice; above one, a repeated key is possible (and is a correction).
        open_depth: how deep values nest inside such an object (1: scalars only).
        open_string: characters in a string value inside such an object.
        progress_speak: whether a ``continue`` or ``confirm`` decision may say something to the person
            (``speak``). Off, it is ``null``: a small model's progress remarks are rarely worth reading, cost
            output tokens, and, as new turns early in the conversation, make the model evaluate most of the
            next prompt again instead of reusing it. Questions, answers and aborts always speak.
        terse: a decision holds only the fields its action needs, and no ``null`` for the others (the
            decoders read a missing field as absent): ``continue`` is a tool call (``confirm`` is left out,
            since a ``continue`` on a write asks for consent anyway), ``ask_user`` and ``done`` speak,
            ``next_plan`` has its goal check, ``abort`` its message; no ``reason``. A small model then
            generates a third of the tokens per decision, and has fewer ways to go wrong.
        copy_arguments: a tool call's text and whole-number arguments (those without an enum of their own)
            are copied from the conversation, when the request gives its words (``Seen``): one of its words
            or quoted phrases, one of its numbers. A small model then cannot invent an id or misspell a day
            it was told (``review,`` for ``review``); a value nobody wrote cannot be passed at all.
    """

    text: int = 300
    note: int = 160
    name: int = 40
    max_items: int = 6
    open_keys: int = 1
    open_depth: int = 3
    open_string: int = 80
    progress_speak: bool = False
    terse: bool = False
    copy_arguments: bool = False


class _Builder:
    """Collects rules while walking a schema; equal rule bodies share one name."""

    def __init__(self, limits: GrammarLimits) -> None:
        self.limits = limits
        self.rules: dict[str, str] = {}
        self._by_body: dict[str, str] = {}
        self._used_primitives: set[str] = set()

    def primitive(self, name: str) -> str:
        self._used_primitives.add(name)
        if name == "number":
            self._used_primitives.add("integer")
        if name == "head-char":
            self._used_primitives.add("char")
        return name

    def rule(self, hint: str, body: str) -> str:
        """The name of a rule with ``body``, added under a name derived from ``hint`` if new."""
        if body in self._by_body:
            return self._by_body[body]
        base = "".join(c if c.isalnum() else "-" for c in hint.lower()).strip("-") or "r"
        name, n = base, 1
        while name in self.rules or name in _PRIMITIVES or name == "root":
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        self._by_body[body] = name
        return name

    def text(self, hint: str, *, min_length: int, max_length: int, not_blank: bool) -> str:
        if max_length < max(min_length, 1 if not_blank else 0):
            raise ConfigError(f"{hint}: maxLength {max_length} is below what the string needs")
        char = self.primitive("char")
        if not_blank:
            head = self.primitive("head-char")
            rest = _repeat(char, max(min_length - 1, 0), max_length - 1)
            return self.rule(f"{hint}-text", f'"\\"" {head} {rest} "\\""'.replace("  ", " "))
        return self.rule(f"{hint}-str", f'"\\"" {_repeat(char, min_length, max_length)} "\\""')

    def grammar(self, root: str) -> str:
        lines = [f"root ::= {root}"]
        lines += [f"{name} ::= {body}" for name, body in self.rules.items()]
        lines += [f"{name} ::= {_PRIMITIVES[name]}" for name in _PRIMITIVES if name in self._used_primitives]
        return "\n".join(lines) + "\n"


def _repeat(item: str, low: int, high: int) -> str:
    if high == 0:
        return ""
    if low == high:
        return f"{item}{{{low}}}"
    return f"{item}{{{low},{high}}}"


def _literal(value: object) -> str:
    """A GBNF literal matching the JSON text of ``value``."""
    encoded = json.dumps(value, ensure_ascii=True)
    return '"' + encoded.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Enums longer than this are written as a tree of shared prefixes: llama.cpp's sampler follows every
# alternative of a rule at once, so a flat list of hundreds of words would cost it as many stacks per token.
_FLAT_ENUM = 16


def _gbnf_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _prefix_tree(texts: Sequence[str]) -> str:
    """One GBNF expression matching exactly ``texts`` (distinct, non-empty), common prefixes written once."""
    groups: dict[str, list[str]] = {}
    for text in texts:
        groups.setdefault(text[0], []).append(text[1:])
    options = []
    for head, rests in groups.items():
        # A run that every text of the group continues with is one literal, not a group per character.
        while all(rests) and len({rest[0] for rest in rests}) == 1:
            head, rests = head + rests[0][0], [rest[1:] for rest in rests]
        tails = [rest for rest in rests if rest]
        if not tails:
            options.append(_gbnf_text(head))
        else:
            optional = "?" if len(tails) < len(rests) else ""
            options.append(f"{_gbnf_text(head)} ({_prefix_tree(tails)}){optional}")
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _visit(node: Mapping[str, Any], hint: str, b: _Builder) -> str:
    """The rule (name or inline expression) for one schema node."""
    if "enum" in node:
        values = list(node["enum"])
        if not values:
            raise ConfigError(f"{hint}: an empty enum allows no value")
        if len(values) > _FLAT_ENUM:
            texts = list(dict.fromkeys(json.dumps(value, ensure_ascii=True) for value in values))
            return b.rule(f"{hint}-enum", _prefix_tree(texts))
        return b.rule(f"{hint}-enum", " | ".join(_literal(value) for value in values))
    if "anyOf" in node:
        options = [_visit(option, f"{hint}-{i}", b) for i, option in enumerate(node["anyOf"])]
        return b.rule(hint, " | ".join(options))
    kind = node.get("type")
    if isinstance(kind, list):
        if not kind:
            raise ConfigError(f"{hint}: an empty type list allows no value")
        options = [_visit({**node, "type": one}, f"{hint}-{one}", b) for one in kind]
        return b.rule(hint, " | ".join(options))
    if kind == "object":
        return _object(node, hint, b)
    if kind == "array":
        items = _visit(node.get("items", {}), f"{hint}-item", b)
        return _array(items, node, hint, b)
    if kind == "string":
        pattern = node.get("pattern")
        if pattern == DATE_BOUND:
            return b.rule("date-bound", '"\\"" [0-9]{4} ("-" [0-9]{2} ("-" [0-9]{2})?)? "\\""')
        if pattern not in (None, NOT_BLANK):
            raise ConfigError(f"{hint}: unsupported pattern {pattern!r} (only {NOT_BLANK!r} or DATE_BOUND)")
        return b.text(
            hint,
            min_length=int(node.get("minLength", 0)),
            max_length=int(node.get("maxLength", b.limits.text)),
            not_blank=pattern == NOT_BLANK,
        )
    if kind in ("integer", "number", "boolean", "null"):
        return b.primitive(str(kind))
    if kind is None and not node:
        return _open_value(b.limits.open_depth, b)
    raise ConfigError(f"{hint}: unsupported schema type {kind!r}")


def _object(node: Mapping[str, Any], hint: str, b: _Builder) -> str:
    properties: Mapping[str, Any] = node.get("properties") or {}
    if not properties:
        if node.get("additionalProperties") is False:
            return b.rule("empty-object", '"{" "}"')
        return _open_object(b.limits.open_depth, b)
    ws = b.primitive("ws")
    listed = node.get("required")
    required = set(properties) if listed is None else set(listed)
    pairs = {
        name: f'{_literal(name)} ":" {ws} {_visit(sub, f"{hint}-{name}", b)}'
        for name, sub in properties.items()
    }
    first = [pairs[name] for name in properties if name in required]
    optional = [pairs[name] for name in properties if name not in required]
    if first:
        body = f'"{{" {ws} ' + f' "," {ws} '.join(first)
        body += "".join(f' ("," {ws} {pair})?' for pair in optional)
    else:
        # Any subset of the optional properties, in order: each alternative starts with a different first one.
        starts = [
            pair + "".join(f' ("," {ws} {later})?' for later in optional[index + 1 :])
            for index, pair in enumerate(optional)
        ]
        body = f'"{{" {ws} (' + " | ".join(starts) + ")?"
    return b.rule(hint or "object", body + ' "}"')


def _array(items: str, node: Mapping[str, Any], hint: str, b: _Builder) -> str:
    low = int(node.get("minItems", 0))
    high = int(node.get("maxItems", b.limits.max_items))
    if high < max(low, 0) or high < 1:
        raise ConfigError(f"{hint}: maxItems {high} allows no array that satisfies minItems {low}")
    ws = b.primitive("ws")
    more = _repeat(f'("," {ws} {items})', max(low - 1, 0), high - 1)
    body = f'"[" {ws} {items} {more} "]"'.replace("  ", " ")
    if low == 0:
        body = f'"[" "]" | {body}'
    return b.rule(f"{hint}-array", body)


def _open_value(depth: int, b: _Builder) -> str:
    limit = b.limits.open_string
    scalars = [b.text("open", min_length=0, max_length=limit, not_blank=False)]
    scalars += [b.primitive("number"), b.primitive("boolean"), b.primitive("null")]
    if depth > 1:
        scalars += [_open_object(depth - 1, b), _open_array(depth - 1, b)]
    return b.rule(f"value-{depth}", " | ".join(scalars))


def _open_object(depth: int, b: _Builder) -> str:
    key = b.text("key", min_length=1, max_length=b.limits.name, not_blank=True)
    ws = b.primitive("ws")
    pair = b.rule(f"pair-{depth}", f'{key} ":" {ws} {_open_value(depth, b)}')
    more = _repeat(f'("," {ws} {pair})', 0, b.limits.open_keys - 1)
    return b.rule(f"object-{depth}", f'"{{" "}}" | "{{" {ws} {pair} {more} "}}"'.replace("  ", " "))


def _open_array(depth: int, b: _Builder) -> str:
    ws = b.primitive("ws")
    value = _open_value(depth, b)
    more = _repeat(f'("," {ws} {value})', 0, b.limits.max_items - 1)
    return b.rule(f"array-{depth}", f'"[" "]" | "[" {ws} {value} {more} "]"'.replace("  ", " "))


def schema_to_gbnf(schema: Mapping[str, object], limits: GrammarLimits | None = None) -> str:
    """A GBNF grammar whose sentences are JSON texts valid under ``schema`` (compact, bounded).

    Args:
        schema: a schema in the subset described in the module docstring.
        limits: bounds for what the schema leaves open.

    Raises:
        ConfigError: the schema uses something outside the subset, or allows no value at all.
    """
    builder = _Builder(limits or GrammarLimits())
    lines = schema.get(LINES)
    if isinstance(lines, list):
        if not lines:
            raise ConfigError(f"{LINES}: expected at least one line schema")
        rules = [_visit(line, f"line-{index + 1}", builder) for index, line in enumerate(lines)]
        return builder.grammar(" ".join(f'{rule} "\\n"' for rule in rules))
    root = _visit(schema, "value", builder)
    return builder.grammar(root)


# --- tightening the wire schemas ---------------------------------------------------------------------------


# Which bound of ``GrammarLimits`` applies to the strings of a field of the decision, plan and route schemas.
_FIELD_BOUNDS = {
    "speak": "text",
    "user_message": "text",
    "question": "text",
    "reply": "text",
    "reason": "note",
    "goal_check": "note",
    "internal_reason": "note",
    "content": "note",
    "done_when": "note",
    "name": "name",
    "code": "name",
    "domain": "name",
    "packs": "name",
}


def _bound_fields(node: _Node, limits: GrammarLimits, bound: str | None = None) -> None:
    """Give the strings of the known fields under ``node`` their ``maxLength``, in place."""
    kind = node.get("type")
    if bound is not None and (kind == "string" or (isinstance(kind, list) and "string" in kind)):
        node["maxLength"] = min(int(node.get("maxLength", getattr(limits, bound))), getattr(limits, bound))
    for field, sub in (node.get("properties") or {}).items():
        _bound_fields(sub, limits, _FIELD_BOUNDS.get(field))
    for option in node.get("anyOf", ()):
        _bound_fields(option, limits, bound)
    if isinstance(node.get("items"), dict):
        _bound_fields(node["items"], limits, bound)


class _Unportable(Signal):
    """A tool's parameter schema uses something the grammar's subset cannot express."""


# Integer ranges at most this wide become an enum of their values, which the grammar enforces exactly.
_SMALL_RANGE = 32

_MAX_REF_DEPTH = 8


@dataclass(frozen=True, slots=True)
class Seen:
    """What a tool call's arguments may copy from the conversation (``GrammarLimits.copy_arguments``).

    Attributes:
        words: its words, stripped of the punctuation around them (``(t4)`` → ``t4``, ``09:00.`` →
            ``09:00``), and its phrases in double quotes, in order of first appearance.
        numbers: the whole numbers written as words of their own.
        named: ``(name, value)`` for a value written right after a word that may name a parameter, in
            lower case: a phrase in double quotes (``task "review"``) or a word with a digit in it
            (``task t9``, ``slot 09:00``). A parameter of that name copies only these when one fits.
    """

    words: tuple[str, ...] = ()
    numbers: tuple[int, ...] = ()
    named: tuple[tuple[str, str], ...] = ()

    def for_name(self, name: str) -> Seen | None:
        """What a parameter called ``name`` copies when the conversation named values for it, else None."""
        values = tuple(dict.fromkeys(value for key, value in self.named if key == name.casefold()))
        if not values:
            return None
        numbers = tuple(int(value) for value in values if _WHOLE_NUMBER.fullmatch(value))
        return Seen(values, numbers)


_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>«»“”‘’·…*_"

_QUOTED = re.compile(r'"([^"\n]{1,80})"|“([^”\n]{1,80})”')

_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,15}")

# A word that may name a parameter, then its value: a quoted phrase, or a word with a digit in it.
_NAMED = re.compile(
    r'(?<![\w"])([A-Za-z][A-Za-z_]{0,30})\s*[:=]?\s+(?:"([^"\n]{1,80})"|“([^”\n]{1,80})”|([^\s"“]*\d[^\s"”]*))'
)

# An enum value may be written as its first letters (``wed`` for ``wednesday``), from this many on.
_ABBREVIATION = 3

MAX_SEEN_WORDS = 600
"""Distinct words a grammar offers at most; past it, the earliest are kept (the request comes first)."""


def seen_in(texts: Iterable[str], limits: GrammarLimits | None = None) -> Seen:
    """The words, quoted phrases and whole numbers of ``texts``, for arguments copied from them.

    Args:
        texts: the conversation's text as a tool call may quote it (the request, observations, answers).
        limits: ``open_string`` bounds the length of a word kept.
    """
    longest = (limits or GrammarLimits()).open_string
    words: dict[str, None] = {}
    numbers: dict[int, None] = {}
    named: dict[tuple[str, str], None] = {}
    for text in texts:
        for name, quoted, curly, word in _NAMED.findall(text):
            value = (quoted or curly).strip() or word.strip(_EDGE_PUNCTUATION)
            if value and len(value) <= longest:
                named.setdefault((name.casefold(), value))
        found = [a or b for a, b in _QUOTED.findall(text)]
        found += [raw.strip(_EDGE_PUNCTUATION) for raw in text.split()]
        for word in found:
            word = word.strip()
            if not word or len(word) > longest or not word.isprintable() or len(words) >= MAX_SEEN_WORDS:
                continue
            words.setdefault(word)
            if _WHOLE_NUMBER.fullmatch(word):
                numbers.setdefault(int(word))
    return Seen(tuple(words), tuple(numbers), tuple(named))


def _enum_matches(value: object, words: set[str], seen: Seen) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value in seen.numbers
    if not isinstance(value, str):
        return False
    text = value.casefold()
    return text in words or any(
        len(word) >= _ABBREVIATION and word.isalpha() and text.startswith(word) for word in words
    )


def _copied(node: _Node, seen: Seen) -> tuple[_Node, str]:
    """``node`` (a portable schema) with its open strings and integers limited to what was ``seen``, and its
    enums to the values that were seen (text compared without case, ``Tuesday`` is ``tuesday``, and by its
    first letters, ``wed`` is ``wednesday``), when any was: a model offered the whole enum copies the one
    its example shows instead of the one it was told. A property whose name the conversation wrote a value
    for (``Seen.named``) copies that value, when it fits; an optional one with nothing seen to copy is left
    out (the tool's default applies: a value nobody wrote is not passed).

    Returns the node and what became of it: ``copied`` (limited), ``open`` (a string or integer left open,
    nothing seen fitting it), ``unseen`` (an enum none of whose values was seen, left whole) or ``fixed``
    (anything else).
    """
    if "enum" in node:
        words = {word.casefold() for word in seen.words}
        kept = [value for value in node["enum"] if _enum_matches(value, words, seen)]
        return ({**node, "enum": kept}, "copied") if kept else (node, "unseen")
    if "anyOf" in node:
        options = [_copied(option, seen) for option in node["anyOf"]]
        if any(state == "copied" for _, state in options):
            # A day written as a word leaves no room for an invented number, and the other way round.
            options = [(option, state) for option, state in options if state not in ("open", "unseen")]
        states = {state for option, state in options if option.get("type") != "null"}
        state = "copied" if "copied" in states else "fixed" if "fixed" in states or not states else "unseen"
        return {"anyOf": [option for option, _ in options]}, state
    kind = node.get("type")
    if kind == "object" and "properties" in node:
        required = set(node.get("required", ()))
        properties = {}
        for name, sub in node["properties"].items():
            copied, state = _property(name, sub, seen)
            if name in required or state not in ("open", "unseen"):
                properties[name] = copied
        return {**node, "properties": properties}, "fixed"
    if kind == "array":
        return {**node, "items": _copied(node["items"], seen)[0]}, "fixed"
    if kind == "string" and "enum" not in node:
        low, high = int(node.get("minLength", 0)), int(node.get("maxLength", MAX_SEEN_WORDS))
        fitting = [word for word in seen.words if low <= len(word) <= high]
        return ({"enum": fitting}, "copied") if fitting else (node, "open")
    if kind == "integer":
        return ({"enum": list(seen.numbers)}, "copied") if seen.numbers else (node, "open")
    return node, "fixed"


def _property(name: str, node: _Node, seen: Seen) -> tuple[_Node, str]:
    named = seen.for_name(name)
    if named is not None:
        copied, state = _copied(node, named)
        if state == "copied":
            return copied, state
    return _copied(node, seen)


def tool_arguments_schema(
    parameters: Mapping[str, Any], limits: GrammarLimits, seen: Seen | None = None
) -> _Node | None:
    """A tool's parameter schema (as pydantic writes it) in the grammar's subset, or None beyond it.

    Kept: types, enums and consts, properties with ``required`` (others may be left out), arrays with their
    bounds, ``anyOf``/``oneOf``, ``$ref`` to ``$defs``, and closed empty objects (a tool without
    parameters takes exactly ``{}``). Integer ranges no wider than 32 values become enums; strings are
    bounded by ``limits.open_string``. Dropped: what the grammar cannot enforce (patterns, formats, wide
    numeric bounds) and text for people (titles, descriptions, defaults); the tool's own validation still
    checks those. With ``seen``, open strings and integers are limited to its words and numbers
    (``GrammarLimits.copy_arguments``); one left without a fitting value stays open, unless another type
    the parameter accepts was limited.
    """
    try:
        portable = _portable(parameters, parameters.get("$defs") or {}, limits, 0)
    except _Unportable:
        return None
    if seen is None:
        return portable
    copied = _copied(portable, seen)[0]
    _with_defaults(copied, parameters)
    return copied


def _with_defaults(copied: _Node, parameters: Mapping[str, Any]) -> None:
    """Let a copied text parameter take its own default too (``filter = "all"``), in place."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping) or "properties" not in copied:
        return
    for name, schema in properties.items():
        default = schema.get("default") if isinstance(schema, Mapping) else None
        node = copied["properties"].get(name)
        if not isinstance(default, str) or not default or not isinstance(node, dict):
            continue
        for option in [node, *node.get("anyOf", ())]:
            values = option.get("enum")
            if values and all(isinstance(value, str) for value in values) and default not in values:
                values.append(default)


def _portable(node: Mapping[str, Any], defs: Mapping[str, Any], limits: GrammarLimits, depth: int) -> _Node:
    if depth > _MAX_REF_DEPTH or not isinstance(node, Mapping):
        raise _Unportable
    ref = node.get("$ref")
    if ref is not None:
        name = str(ref).removeprefix("#/$defs/")
        if name not in defs:
            raise _Unportable
        return _portable(defs[name], defs, limits, depth + 1)
    if "const" in node:
        return {"enum": [node["const"]]}
    if "enum" in node:
        return {"enum": list(node["enum"])}
    for key in ("anyOf", "oneOf"):
        if key in node:
            return {"anyOf": [_portable(option, defs, limits, depth + 1) for option in node[key]]}
    if "allOf" in node:
        if len(node["allOf"]) != 1:
            raise _Unportable
        return _portable(node["allOf"][0], defs, limits, depth + 1)
    kind = node.get("type")
    if isinstance(kind, list):
        return {"anyOf": [_portable({**node, "type": one}, defs, limits, depth) for one in kind]}
    if kind == "object":
        return _portable_object(node, defs, limits, depth)
    if kind == "array":
        array: _Node = {"type": "array", "items": _portable(node.get("items") or {}, defs, limits, depth + 1)}
        return array | {key: node[key] for key in ("minItems", "maxItems") if key in node}
    if kind is None and not set(node) - {"title", "description", "default", "examples"}:
        return {}
    return _portable_scalar(node, limits)


def _portable_object(
    node: Mapping[str, Any], defs: Mapping[str, Any], limits: GrammarLimits, depth: int
) -> _Node:
    properties: Mapping[str, Any] = node.get("properties") or {}
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping) and extra:
        raise _Unportable  # a map with typed values: the open object would let any value in
    if not properties and extra is not False:
        return {"type": "object"}  # open: any keys
    return {
        "type": "object",
        "properties": {name: _portable(sub, defs, limits, depth + 1) for name, sub in properties.items()},
        "required": [name for name in node.get("required", ()) if name in properties],
        "additionalProperties": False,
    }


def _portable_scalar(node: Mapping[str, Any], limits: GrammarLimits) -> _Node:
    kind = node.get("type")
    if kind == "string":
        low = int(node.get("minLength", 0))
        if low > limits.open_string:
            raise _Unportable
        high = min(int(node.get("maxLength", limits.open_string)), limits.open_string)
        return {"type": "string", "minLength": low, "maxLength": high}
    if kind == "integer":
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        if isinstance(low, int) and isinstance(high, int):
            low += int("minimum" not in node)
            high -= int("maximum" not in node)
            if 0 <= high - low < _SMALL_RANGE:
                return {"enum": list(range(low, high + 1))}
        return {"type": "integer"}
    if kind in ("number", "boolean", "null"):
        return {"type": kind}
    raise _Unportable


def _required_text(node: Mapping[str, Any]) -> _Node:
    kept = {key: value for key, value in node.items() if key in ("description", "maxLength")}
    return {**kept, "type": "string", "minLength": 1, "pattern": NOT_BLANK}


def _is_like(schema: Mapping[str, Any], reference: Mapping[str, Any]) -> bool:
    """Whether ``schema`` has the top-level properties, in order, of ``reference``."""
    props = schema.get("properties")
    return isinstance(props, Mapping) and list(props) == list(reference["properties"])


def _tool_names(schema: Mapping[str, Any], tool_names: Sequence[str] | None) -> list[str] | None:
    """The names a decision's tool call may use: the request's, else the schema's enum, else any."""
    if tool_names is not None:
        return sorted(set(tool_names))
    tool_call = schema["properties"].get("tool_call", {})
    for option in tool_call.get("anyOf", [tool_call]):
        name = option.get("properties", {}).get("name", {})
        if "enum" in name:
            return [str(value) for value in name["enum"]]
    if tool_call.get("type") == "null":
        return []
    return None


def _tool_calls(
    call: _Node,
    names: Sequence[str],
    parameters: Mapping[str, Mapping[str, Any]],
    limits: GrammarLimits,
    seen: Seen | None,
) -> _Node:
    """A tool call whose arguments fit the named tool's parameters, one option per tool."""
    options: list[_Node] = []
    for name in names:
        arguments = tool_arguments_schema(parameters[name], limits, seen) if name in parameters else None
        fields = {**call["properties"], "name": {"enum": [name]}}
        if arguments is not None:
            fields["arguments"] = arguments
        options.append({**call, "properties": fields})
    return {"anyOf": options}


def _terse_variants(props: _Node, call: _Node | None, abort: _Node, allowed: set[str]) -> list[_Node]:
    """One variant per action with only the fields it needs (``GrammarLimits.terse``)."""

    def variant(action: str, *, required: Sequence[str] | None = None, **fields: _Node) -> _Node:
        node: _Node = {
            "type": "object",
            "properties": {"action": {"enum": [action]}, **fields},
            "additionalProperties": False,
        }
        if required is not None:
            node["required"] = ["action", *required]
        return node

    speak = _required_text(props["speak"])
    message = {
        "type": "object",
        "properties": {"user_message": abort["properties"]["user_message"]},
        "additionalProperties": False,
    }
    options = [
        variant("continue", tool_call=call) if call is not None else variant("continue"),
        variant("ask_user", speak=speak),
        variant("next_plan", goal_check=_required_text(props["goal_check"])),
        # Under a plan, done needs a goal check too; without one it is noise, so it may be left out.
        variant("done", required=["speak"], speak=speak, goal_check=_required_text(props["goal_check"])),
        variant("abort", abort=message),
    ]
    if call is not None and "continue" not in allowed:
        options.insert(1, variant("confirm", tool_call=call))
    return options


def _decision_variants(
    schema: Mapping[str, Any],
    tool_names: Sequence[str] | None,
    limits: GrammarLimits,
    tool_parameters: Mapping[str, Mapping[str, Any]] | None = None,
    seen: Seen | None = None,
) -> _Node:
    names = _tool_names(schema, tool_names)
    base: _Node = copy.deepcopy(decision_json_schema(tool_names=names))
    _bound_fields(base, limits)
    props: _Node = base["properties"]
    call: _Node | None = None
    for option in props["tool_call"].get("anyOf", []):
        if option.get("type") == "object":
            call = option
    abort = next(option for option in props["abort"]["anyOf"] if option.get("type") == "object")
    abort["properties"]["user_message"] = _required_text(abort["properties"]["user_message"])
    if call is not None and names is None:
        call["properties"]["name"] = _required_text(call["properties"]["name"])
    if call is not None and names and tool_parameters:
        call = _tool_calls(call, names, tool_parameters, limits, seen if limits.copy_arguments else None)
    null: _Node = {"type": "null"}
    goal_check = _required_text(props["goal_check"])

    allowed = set(schema["properties"]["action"].get("enum", ACTIONS))
    if limits.terse:
        terse = _terse_variants(props, call, abort, allowed)
        kept = [option for option in terse if option["properties"]["action"]["enum"][0] in allowed]
        if not kept:
            raise ConfigError(f"decision: no action left to take (the schema allows {sorted(allowed)})")
        return {"anyOf": kept}

    def variant(
        actions: Iterable[str],
        tool: _Node,
        abort_node: _Node,
        check: _Node = null,
        speak: _Node | None = None,
    ) -> _Node:
        fields = {
            **props,
            "action": {"enum": list(actions)},
            "speak": props["speak"] if speak is None else speak,
            "goal_check": check,
            "tool_call": tool,
            "abort": abort_node,
        }
        return {**base, "properties": fields}

    # A goal check is read only when a step or the request is declared complete; a question needs its text.
    options = [
        variant(["ask_user"], null, null, speak=_required_text(props["speak"])),
        variant(["next_plan"], null, null, goal_check),
        variant(["done"], null, null, props["goal_check"]),
        variant(["abort"], null, abort),
    ]
    quiet = None if limits.progress_speak else null
    if call is None:
        options.insert(0, variant(["continue"], null, null, speak=quiet))
    else:
        options.insert(0, variant(["continue"], {"anyOf": [call, null]}, null, speak=quiet))
        options.insert(1, variant(["confirm"], call, null, speak=quiet))
    kept = [option for option in options if option["properties"]["action"]["enum"][0] in allowed]
    if not kept:
        raise ConfigError(f"decision: no action left to take (the schema allows {sorted(allowed)})")
    return {"anyOf": kept}


def _plan_variants(schema: Mapping[str, Any], limits: GrammarLimits) -> _Node:
    base = copy.deepcopy(dict(schema))
    _bound_fields(base, limits)
    props: _Node = base["properties"]
    step = props["plan_steps"]["items"]
    step["properties"]["content"] = _required_text(step["properties"]["content"])
    for option in props["context_hook"].get("anyOf", []):
        if option.get("type") == "object":
            option["properties"]["domain"] = _required_text(option["properties"]["domain"])
    question = props["question"]

    def variant(action: str, **fields: _Node) -> _Node:
        return {**base, "properties": {**props, "action": {"enum": [action]}, **fields}}

    done_steps = {**props["plan_steps"], "minItems": 1}
    by_action = {
        "continue": variant("continue"),
        "ask_user": variant("ask_user", question=_required_text(question)),
        "plan_done": variant("plan_done", plan_steps=done_steps),
    }
    return {"anyOf": [by_action[action] for action in PLAN_ACTIONS]}


def grammar_schema(
    schema: Mapping[str, object],
    tool_names: Sequence[str] | None = None,
    limits: GrammarLimits | None = None,
    tool_parameters: Mapping[str, Mapping[str, Any]] | None = None,
    seen: Seen | None = None,
) -> JsonSchema:
    """The schema the grammar enforces for a request's ``response_schema``.

    A decision schema (recognised by its properties, as ``decision_json_schema`` writes them) becomes one
    variant per kind of action, with the tool name limited to ``tool_names`` when they are given, otherwise
    to the schema's own enum of names (if any). A plan schema becomes one variant per plan action. These
    and the route schema get the string bounds of ``limits`` field by field. Any other schema is used as it
    is (its unbounded strings get ``limits.text`` when the grammar is built).

    Args:
        schema: the request's response schema.
        tool_names: the tools the model may name (``ModelRequest.tool_names``).
        limits: the bounds for text fields.
        tool_parameters: the named tools' parameter schemas (``ModelRequest.tool_parameters``): a tool call's
            arguments then fit its tool's schema wherever ``tool_arguments_schema`` can express it.
        seen: what the conversation wrote, for the arguments that ``limits.copy_arguments`` copies from it.
    """
    node: Mapping[str, Any] = schema
    bounds = limits or GrammarLimits()
    if _is_like(node, decision_json_schema()):
        return _decision_variants(node, tool_names, bounds, tool_parameters, seen)
    if _is_like(node, plan_json_schema()):
        return _plan_variants(node, bounds)
    if _is_like(node, route_json_schema()):
        route: _Node = copy.deepcopy(dict(node))
        _bound_fields(route, bounds)
        return route
    return dict(schema)


__all__ = [
    "DATE_BOUND",
    "LINES",
    "MAX_SEEN_WORDS",
    "NOT_BLANK",
    "GrammarLimits",
    "Seen",
    "grammar_schema",
    "schema_to_gbnf",
    "seen_in",
    "tool_arguments_schema",
]
