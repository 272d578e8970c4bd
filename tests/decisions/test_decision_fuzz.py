"""Property tests: whatever a model writes, the parsers answer with a value or a ``DecisionParseError``.

The inputs are real-shaped model outputs (decisions, plans, routes; json and tagged) with values swapped for
other JSON types and characters deleted, inserted or cut off, plus random text and tag soup; and hostile ones
(nesting past the depth limit, NaN / Infinity, numbers out of range, a key written twice), which are refused.
Every choice is read off one flat draw of bytes, so that the CI profile's 10,000 examples stay cheap to
generate.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.decisions import (
    DecisionParseError,
    TaggedStreamParser,
    decode_decision,
    decode_plan,
    decode_route,
    flatten_goal_check,
    parse_decision_json,
    parse_plan_json,
    parse_route_json,
    parse_tagged,
)

OUTPUTS: list[dict[str, object]] = [
    {"action": "continue", "reason": "need data", "tool_call": {"name": "get_overview", "arguments": {}}},
    {"action": "continue", "tool_call": {"name": "db_query", "parameters": {"sql": "SELECT 1", "limit": 5}}},
    {
        "action": "confirm",
        "speak": "Move it?",
        "tool_call": {"name": "move", "arguments": {"task": "gym", "to": [2, 3]}},
    },
    {"action": "ask_user", "speak": "Which week?", "tool_call": None, "abort": ""},
    {
        "action": "next_plan",
        "goal_check": {"done_when": "overview read", "evidence": ["3 free slots"], "k": 1},
    },
    {"action": "done", "speak": "All set.", "goal_check": "satisfied evidence: placed"},
    {
        "action": "abort",
        "abort": {"code": "out_of_scope", "user_message": "I only plan weeks.", "internal_reason": None},
    },
    {
        "action": "plan_done",
        "reason": "two steps",
        "plan_steps": [
            {"content": "Read the week", "done_when": "overview read"},
            {"content": "Place", "done_when": ""},
        ],
        "context_hook": {"domain": "schedule", "packs": ["core"]},
    },
    {"action": "ask_user", "question": "Which week?", "plan_steps": []},
    {"route": "reply", "reply": "Hello!"},
    {"route": "plan", "reply": None},
]

REPLACEMENTS: list[object] = [None, "", " ", "x", "{}", 0, -1.5, True, [], {}, ["a", 1], {"a": {"b": None}}]
INSERTS = ['"', "{", "}", "[", "]", "\\", ",", ":", "<", "</decision>", "<decision>", "```", "\n", "é", "x"]
SOUP = [
    "<decision>",
    "</decision>",
    "<DECISION>",
    "{",
    "}",
    '"',
    "\\",
    "a",
    " ",
    "<",
    "/",
    "```",
    '"action":"done"',
]
REPLY = "\nHere is what I found."


def paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every place inside a JSON value, including the value itself."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


PATHS = [paths(output) for output in OUTPUTS]


def swapped(index: int, where: int, replacement: int) -> object:
    """Output ``index`` with the value at one of its paths replaced by a value of another JSON type."""
    output: object = copy.deepcopy(OUTPUTS[index])
    path = PATHS[index][where % len(PATHS[index])]
    value = REPLACEMENTS[replacement % len(REPLACEMENTS)]
    if not path:
        return value
    parent = output
    for step in path[:-1]:
        parent = parent[step]  # type: ignore[index]
    parent[path[-1]] = value  # type: ignore[index]
    return output


class Bytes:
    """Reads choices off hypothesis's bytes; once they run out it answers 0, which hypothesis shrinks to."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1] if self.pos <= len(self.data) else 0

    def word(self) -> int:
        return self.byte() << 8 | self.byte()

    def rest(self) -> bytes:
        rest, self.pos = self.data[self.pos :], len(self.data)
        return rest


# Bytes become characters through this table beyond ASCII: accents, CJK, a line separator, an emoji and a
# lone surrogate (which a JSON escape can also produce).
WIDE = ["é", "中", "\u2028", "😀", "\udc80", "\x00", "\ufeff"]


def model_output(source: Bytes) -> str:
    """A real-shaped output (maybe with a swapped value, maybe tagged), random text, or tag soup."""
    kind = source.byte() % 8
    if kind < 6:
        index = source.byte() % len(OUTPUTS)
        flags = source.byte()
        output = swapped(index, source.word(), source.byte()) if flags & 1 else OUTPUTS[index]
        text = json.dumps(output, ensure_ascii=bool(flags & 4))
        return f"<decision>{text}</decision>{REPLY}" if flags & 2 else text
    length = source.byte() % 48
    picks = [source.byte() for _ in range(length)]
    if kind == 6:
        return "".join(chr(pick) if pick < 0x80 else WIDE[pick % len(WIDE)] for pick in picks)
    return "".join(SOUP[pick % len(SOUP)] for pick in picks)


def mutated(text: str, source: Bytes) -> str:
    """Delete a few characters, insert a token, or cut the text off, up to three times."""
    for _ in range(source.byte() % 4):
        # Cutting off is one choice in five: it hides everything after the cut from the decoder.
        kind, at, what = source.byte() % 5, source.word() % (len(text) + 1), source.byte()
        if kind < 2:
            text = text[:at] + text[at + 1 + what % 4 :]
        elif kind < 4:
            text = text[:at] + INSERTS[what % len(INSERTS)] + text[at:]
        else:
            text = text[:at]
    return text


def only_parse_errors(parse: Callable[[str], object], text: str) -> None:
    try:
        parse(text)
    except DecisionParseError:
        pass


def stream_outcome(chunks: list[str]) -> tuple[str, object, str | None]:
    """What a consumer of the stream sees: visible text in order, then the decision or the error."""
    parser = TaggedStreamParser()
    try:
        shown = "".join(parser.feed(chunk) for chunk in chunks)
        result = parser.finish()
    except DecisionParseError as exc:
        return "", None, str(exc)
    return shown + result.tail, result.decision, None


def split(text: str, cuts: bytes) -> list[str]:
    points = sorted(cut * len(text) // 255 for cut in cuts[:6])
    return [text[start:end] for start, end in zip([0, *points], [*points, len(text)], strict=True)]


# One flat draw of bytes per example: structured strategies cost several times more to generate, and the CI
# profile runs 10,000 examples.
@given(st.binary(max_size=96))
def test_any_model_output_gives_a_value_or_a_parse_error(data: bytes) -> None:
    source = Bytes(data)
    text = mutated(model_output(source), source)
    for parse in (parse_decision_json, parse_plan_json, parse_route_json):
        only_parse_errors(parse, text)
    only_parse_errors(lambda tagged: parse_tagged(tagged, decode_plan), text)
    only_parse_errors(lambda tagged: parse_tagged(tagged, decode_route), text)
    # The streaming parser sees the same text however it is split, and only ever raises parse errors.
    assert stream_outcome(split(text, source.rest())) == stream_outcome([text])


PARSERS: dict[str, Callable[[str], object]] = {
    "decision": parse_decision_json,
    "plan": parse_plan_json,
    "route": parse_route_json,
}


@pytest.mark.parametrize("index", range(len(OUTPUTS)))
def test_the_unmutated_outputs_are_valid(index: int) -> None:
    output = OUTPUTS[index]
    kind = (
        "route"
        if "route" in output
        else "plan"
        if output["action"] in ("plan_done",) or "question" in output
        else "decision"
    )
    PARSERS[kind](json.dumps(output))


# Hostile shapes: valid JSON syntax (or Python's JSON extensions) that must be refused, never crash a caller.
HOSTILE_VALUES = ["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "1" + "0" * 400, "9" * 5000]


def nested(depth: int, kind: int) -> str:
    """A value nested ``depth`` levels deep: arrays, objects, or both in turn."""
    opens = ["[", '{"k":', '[{"k":'][kind % 3]
    closes = ["]", "}", "}]"][kind % 3]
    inner = "1" if kind % 2 else '"x"'
    count = depth // (2 if kind % 3 == 2 else 1)
    return opens * count + inner + closes * count


def hostile_output(source: Bytes) -> tuple[str, str]:
    """A real-shaped output with one value replaced by a hostile one; returns the text and what it holds."""
    index = source.byte() % len(OUTPUTS)
    placeholder = "__HOSTILE__"
    output = copy.deepcopy(OUTPUTS[index])
    path = PATHS[index][source.word() % len(PATHS[index])] or ("action",)
    parent: object = output
    for step in path[:-1]:
        parent = parent[step]  # type: ignore[index]
    parent[path[-1]] = placeholder  # type: ignore[index]
    text = json.dumps(output)
    kind = source.byte() % 3
    if kind == 0:
        value, what = nested(65 + source.word() % 3000, source.byte()), "deep"
    elif kind == 1:
        value, what = HOSTILE_VALUES[source.byte() % len(HOSTILE_VALUES)], "number"
    else:
        # The same key twice in the object that holds the replaced value.
        key = str(path[-1]) if isinstance(path[-1], str) else "action"
        value, what = f'1, "{key}": 2' if isinstance(path[-1], str) else f'{{"{key}": 1, "{key}": 2}}', "dup"
    text = text.replace(f'"{placeholder}"', value, 1)
    return (f"<decision>{text}</decision>{REPLY}" if source.byte() & 1 else text), what


@given(st.binary(min_size=4, max_size=24))
def test_hostile_json_is_refused_with_a_parse_error(data: bytes) -> None:
    text, what = hostile_output(Bytes(data))
    # Refused by the loader, before any field is read: the message names the whole output and the reason.
    reason = {"deep": "nests deeper than 64 levels", "number": "finite number", "dup": "appears twice"}[what]
    for parse in (parse_decision_json, parse_plan_json, parse_route_json):
        with pytest.raises(DecisionParseError, match=reason):
            parse(text)
    tagged = text if text.startswith("<decision>") else f"<decision>{text}</decision>"
    for decode in (decode_plan, decode_route, None):
        with pytest.raises(DecisionParseError, match=reason):
            parse_tagged(tagged) if decode is None else parse_tagged(tagged, decode)


@pytest.mark.parametrize("depth", [65, 250, 1000, 100_000])
@pytest.mark.parametrize("kind", range(6))
def test_deep_nesting_anywhere_is_a_parse_error(depth: int, kind: int) -> None:
    value = nested(depth, kind)
    texts = [
        f'{{"action":"done","goal_check":{value}}}',
        f'{{"action":"continue","tool_call":{{"name":"t","arguments":{{"a":{value}}}}}}}',
        f'{{"action":"plan_done","plan_steps":[{{"content":"a","done_when":{value}}}]}}',
        f'{{"route":"reply","reply":{value}}}',
    ]
    for text in texts:
        for parse in (parse_decision_json, parse_plan_json, parse_route_json):
            with pytest.raises(DecisionParseError, match=r"deeper than 64 levels|expected|required"):
                parse(text)
        with pytest.raises(DecisionParseError):
            parse_tagged(f"<decision>{text}</decision> hi")


def test_the_goal_check_of_the_issue_is_a_parse_error_on_both_wires() -> None:
    text = '{"action":"done","goal_check":' + "[" * 250 + "]" * 250 + "}"
    with pytest.raises(DecisionParseError, match=r"^decision: the JSON nests deeper than 64 levels$"):
        parse_decision_json(text)
    with pytest.raises(DecisionParseError, match="deeper than 64 levels"):
        parse_tagged(f"<decision>{text}</decision>")
    # Handed a decoded value directly (a provider that decodes itself), the decoders refuse it too.
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(DecisionParseError, match="goal_check: the JSON nests deeper than 64 levels"):
        flatten_goal_check(deep)
    with pytest.raises(DecisionParseError, match="decision: the JSON nests deeper than 64 levels"):
        decode_decision({"action": "done", "goal_check": deep})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NaN", "NaN is not a JSON number"),
        ("Infinity", "Infinity is not a JSON number"),
        ("-Infinity", "-Infinity is not a JSON number"),
        ("1e999", "the number 1e999 is too large"),
        ("1" + "0" * 400, "(401 digits) is too large"),
        ("-" + "9" * 5000, "(5000 digits) is too large"),
    ],
)
def test_non_finite_and_huge_numbers_are_refused(value: str, message: str) -> None:
    for text in (
        f'{{"action":"done","goal_check":{value}}}',
        f'{{"action":"continue","tool_call":{{"name":"t","arguments":{{"n":[{value}]}}}}}}',
    ):
        with pytest.raises(DecisionParseError, match=re.escape(message)):
            parse_decision_json(text)
        with pytest.raises(DecisionParseError, match=re.escape(message)):
            parse_tagged(f"<decision>{text}</decision>")
    with pytest.raises(DecisionParseError, match="expected a finite number"):
        decode_decision({"action": "done", "goal_check": {"n": float("nan")}})


def test_big_but_finite_numbers_are_kept() -> None:
    decision = parse_decision_json('{"action":"done","goal_check":{"n":1e308,"m":' + "9" * 300 + "}}")
    assert decision.goal_check is not None and "n=1e+308" in decision.goal_check


@pytest.mark.parametrize(
    "text",
    [
        '{"action":"done","action":"abort"}',
        '{"action":"continue","tool_call":{"name":"a","name":"b"}}',
        '{"action":"continue","tool_call":{"name":"a","arguments":{"x":1,"x":2}}}',
        '{"route":"reply","reply":"a","route":"plan"}',
        '{"action":"plan_done","plan_steps":[{"content":"a","content":"b"}]}',
    ],
)
def test_a_key_written_twice_is_refused(text: str) -> None:
    parse = parse_route_json if '"route"' in text else parse_plan_json if "plan_steps" in text else None
    with pytest.raises(DecisionParseError, match="appears twice in one object"):
        (parse or parse_decision_json)(text)
    with pytest.raises(DecisionParseError, match="appears twice in one object"):
        parse_tagged(f"<decision>{text}</decision>", decode_route if '"route"' in text else decode_plan)
