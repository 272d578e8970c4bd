"""The local model's grammars: every sentence they allow parses as a decision, plan or route.

These tests need no model: a small GBNF reader below walks the generated grammar at random, the way a
sampler could, and each sentence goes through the same decoders the runtime uses.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from plangate.decisions import (
    ACTIONS,
    PLAN_ACTIONS,
    decision_json_schema,
    parse_decision_json,
    parse_plan_json,
    parse_route_json,
    plan_json_schema,
    route_json_schema,
)
from plangate.errors import ConfigError
from plangate.models._grammar import (
    GrammarLimits,
    grammar_schema,
    schema_to_gbnf,
    seen_in,
    tool_arguments_schema,
)
from plangate.tools import ToolRegistry, tool

# --- a reader and random walker for the GBNF subset the converter writes ---------------------------------


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Cls:
    negated: bool
    ranges: tuple[tuple[int, int], ...]

    def allows(self, char: str) -> bool:
        inside = any(low <= ord(char) <= high for low, high in self.ranges)
        return inside != self.negated


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Rep:
    item: object
    low: int
    high: int


@dataclass(frozen=True)
class Alt:
    options: tuple[tuple[object, ...], ...]


_TOKEN = re.compile(
    r'\s*(?:(?P<lit>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])|(?P<name>[a-z0-9-]+)'
    r"|(?P<rep>\{\d+(?:,\d+)?\})|(?P<op>[|()?]))"
)


def _unescape(body: str) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(body):
        if body[i] == "\\":
            kind = body[i + 1]
            if kind == "x":
                out.append(int(body[i + 2 : i + 4], 16))
                i += 4
            elif kind == "u":
                out.append(int(body[i + 2 : i + 6], 16))
                i += 6
            else:
                out.append(ord({"n": "\n", "t": "\t", "r": "\r"}.get(kind, kind)))
                i += 2
        else:
            out.append(ord(body[i]))
            i += 1
    return out


def _char_class(text: str) -> Cls:
    body = text[1:-1]
    negated = body.startswith("^")
    points = _unescape(body[1:] if negated else body)
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(points):
        if i + 2 < len(points) and points[i + 1] == ord("-"):
            ranges.append((points[i], points[i + 2]))
            i += 3
        else:
            ranges.append((points[i], points[i]))
            i += 1
    return Cls(negated, tuple(ranges))


def _parse_body(text: str) -> Alt:
    tokens = [(m.lastgroup, m.group(m.lastgroup or "")) for m in _TOKEN.finditer(text)]
    assert "".join(value for _, value in tokens).replace(" ", "") == text.replace(" ", ""), text
    pos = 0

    def alternatives() -> Alt:
        nonlocal pos
        options = [sequence()]
        while pos < len(tokens) and tokens[pos] == ("op", "|"):
            pos += 1
            options.append(sequence())
        return Alt(tuple(options))

    def sequence() -> tuple[object, ...]:
        nonlocal pos
        items: list[object] = []
        while pos < len(tokens) and tokens[pos] not in (("op", "|"), ("op", ")")):
            kind, value = tokens[pos]
            pos += 1
            item: object
            if kind == "lit":
                item = Lit("".join(chr(c) for c in _unescape(value[1:-1])))
            elif kind == "cls":
                item = _char_class(value)
            elif kind == "name":
                item = Ref(value)
            elif value == "(":
                item = alternatives()
                assert tokens[pos] == ("op", ")")
                pos += 1
            else:
                raise AssertionError(f"unexpected {value!r} in {text!r}")
            while pos < len(tokens) and (tokens[pos][0] == "rep" or tokens[pos] == ("op", "?")):
                _, postfix = tokens[pos]
                pos += 1
                if postfix == "?":
                    item = Rep(item, 0, 1)
                else:
                    low, _, high = postfix[1:-1].partition(",")
                    item = Rep(item, int(low), int(high or low))
            items.append(item)
        return tuple(items)

    result = alternatives()
    assert pos == len(tokens), text
    return result


def parse_gbnf(grammar: str) -> dict[str, Alt]:
    rules: dict[str, Alt] = {}
    for line in grammar.strip().splitlines():
        name, _, body = line.partition(" ::= ")
        assert name not in rules, f"rule {name} defined twice"
        rules[name] = _parse_body(body)
    for alt in rules.values():
        for ref in _refs(alt):
            assert ref in rules, f"undefined rule {ref}"
    return rules


def _refs(node: object) -> list[str]:
    if isinstance(node, Ref):
        return [node.name]
    if isinstance(node, Rep):
        return _refs(node.item)
    if isinstance(node, Alt):
        return [name for option in node.options for item in option for name in _refs(item)]
    return []


# Characters a sampler might pick: ASCII, accented and CJK letters, Unicode spaces, an emoji.
_POOL = [chr(c) for c in range(0x20, 0x7F)] + list("\t\néß中文\u00a0\u2003\u3000😀")


def sample(rules: dict[str, Alt], rng: random.Random) -> str:
    out: list[str] = []
    allowed: dict[Cls, list[str]] = {}

    def walk(node: object) -> None:
        if isinstance(node, Lit):
            out.append(node.text)
        elif isinstance(node, Cls):
            if node not in allowed:
                allowed[node] = [c for c in _POOL if node.allows(c)]
            out.append(rng.choice(allowed[node]))
        elif isinstance(node, Ref):
            walk(rules[node.name])
        elif isinstance(node, Rep):
            # Lengths near both ends matter most: empty, one, and the bound itself.
            count = rng.choice([node.low, node.high, rng.randint(node.low, node.high)])
            count = min(count, node.low + 12) if rng.random() < 0.8 else count
            for _ in range(count):
                walk(node.item)
        elif isinstance(node, Alt):
            for item in rng.choice(node.options):
                walk(item)
        else:
            raise AssertionError(node)

    walk(rules["root"])
    return "".join(out)


def sentences(grammar: str, n: int, seed: int = 7) -> list[str]:
    rules = parse_gbnf(grammar)
    rng = random.Random(seed)
    return [sample(rules, rng) for _ in range(n)]


# --- the tests ---------------------------------------------------------------------------------------------

TOOLS = ["get_overview", "place"]


def _grammar(schema: dict[str, object], tool_names: list[str] | None = None) -> str:
    return schema_to_gbnf(grammar_schema(schema, tool_names))


def test_every_decision_the_grammar_allows_parses_and_names_an_allowed_tool() -> None:
    actions: set[str] = set()
    tools: set[str] = set()
    for text in sentences(_grammar(decision_json_schema(), TOOLS), 600):
        decision = parse_decision_json(text)
        actions.add(decision.action)
        if decision.tool_call is not None:
            tools.add(decision.tool_call.name)
    assert actions == set(ACTIONS)
    assert tools == set(TOOLS)


def test_the_schemas_own_tool_names_apply_when_the_request_gives_none() -> None:
    grammar = _grammar(decision_json_schema(tool_names=["db_query"]))
    names = {d.tool_call.name for d in map(parse_decision_json, sentences(grammar, 300)) if d.tool_call}
    assert names == {"db_query"}


def test_the_requests_tool_names_win_over_the_schemas() -> None:
    grammar = _grammar(decision_json_schema(tool_names=["db_query"]), ["place"])
    names = {d.tool_call.name for d in map(parse_decision_json, sentences(grammar, 300)) if d.tool_call}
    assert names == {"place"}


def test_with_no_tools_there_is_no_tool_call_and_no_confirm() -> None:
    decisions = [parse_decision_json(text) for text in sentences(_grammar(decision_json_schema(), []), 300)]
    assert all(decision.tool_call is None for decision in decisions)
    assert {decision.action for decision in decisions} == set(ACTIONS) - {"confirm"}


def test_a_generic_decision_schema_still_needs_a_non_blank_tool_name() -> None:
    decisions = [parse_decision_json(text) for text in sentences(_grammar(decision_json_schema()), 400)]
    names = [d.tool_call.name for d in decisions if d.tool_call is not None]
    assert names and all(name.strip() for name in names)


def test_every_plan_the_grammar_allows_parses() -> None:
    plans = [parse_plan_json(text) for text in sentences(_grammar(plan_json_schema()), 400)]
    assert {plan.action for plan in plans} == set(PLAN_ACTIONS)
    assert any(plan.context_hook is not None for plan in plans)


def test_every_route_the_grammar_allows_parses() -> None:
    routes = {parse_route_json(text).route for text in sentences(_grammar(route_json_schema()), 200)}
    assert routes == {"reply", "plan", "execute"}


def test_outputs_are_compact_json_with_bounded_strings() -> None:
    limits = GrammarLimits(text=20, note=10, name=5, open_string=3)
    grammar = schema_to_gbnf(grammar_schema(decision_json_schema(), TOOLS, limits), limits)
    for text in sentences(grammar, 200):
        value = json.loads(text)
        assert not re.search(r"(?<!\\)(?:\\\\)*\\u", text), "a \\u escape"
        assert value["speak"] is None or len(value["speak"]) <= 20
        assert all(value[field] is None or len(value[field]) <= 10 for field in ("reason", "goal_check"))
        arguments = (value["tool_call"] or {}).get("arguments", {})
        assert all(len(key) <= 5 for key in arguments)
        assert all(len(item) <= 3 for item in arguments.values() if isinstance(item, str))


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string", "pattern": "^[a-z]+$"}, "unsupported pattern"),
        ({"enum": []}, "an empty enum allows no value"),
        ({"type": "string", "minLength": 5, "maxLength": 2}, "maxLength 2 is below"),
        ({"type": "array", "items": {"type": "null"}, "minItems": 3, "maxItems": 2}, "maxItems 2 allows"),
        ({"type": "tuple"}, "unsupported schema type 'tuple'"),
    ],
)
def test_schemas_outside_the_subset_are_refused(schema: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        schema_to_gbnf(schema)


def test_other_schemas_are_used_as_they_are() -> None:
    schema: dict[str, object] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}, "tags": {"type": "array"}},
    }
    check: Callable[[dict[str, object]], bool] = lambda v: list(v) == ["n", "ok", "tags"]  # noqa: E731
    assert grammar_schema(schema) == schema
    values = [json.loads(text) for text in sentences(schema_to_gbnf(schema), 100)]
    assert all(check(value) and isinstance(value["n"], int) for value in values)


def test_plans_and_routes_get_their_bounds() -> None:
    limits = GrammarLimits(text=12, note=8, name=4, max_items=2)
    plan = schema_to_gbnf(grammar_schema(plan_json_schema(), limits=limits), limits)
    for text in sentences(plan, 200):
        value = json.loads(text)
        assert len(value["plan_steps"]) <= 2
        assert all(len(step["content"]) <= 8 for step in value["plan_steps"])
        assert value["question"] is None or len(value["question"]) <= 12
        assert value["context_hook"] is None or len(value["context_hook"]["domain"]) <= 4
    route = schema_to_gbnf(grammar_schema(route_json_schema(), limits=limits), limits)
    assert all(len(json.loads(text)["reply"] or "") <= 12 for text in sentences(route, 100))


def test_a_goal_check_comes_only_with_next_plan_and_done_and_a_question_has_text() -> None:
    for decision in map(parse_decision_json, sentences(_grammar(decision_json_schema(), TOOLS), 400)):
        if decision.action == "next_plan":
            assert decision.goal_check and decision.goal_check.strip()
        elif decision.action != "done":
            assert decision.goal_check is None
        if decision.action == "ask_user":
            assert decision.speak.strip()
        if decision.action in ("continue", "confirm"):
            assert not decision.speak  # progress remarks are off by default


def test_progress_remarks_can_be_allowed() -> None:
    limits = GrammarLimits(progress_speak=True)
    grammar = schema_to_gbnf(grammar_schema(decision_json_schema(), TOOLS, limits), limits)
    decisions = [parse_decision_json(text) for text in sentences(grammar, 300)]
    assert any(d.speak for d in decisions if d.action in ("continue", "confirm"))


def test_only_the_schemas_actions_are_offered() -> None:
    schema = decision_json_schema(TOOLS, actions=["continue", "done", "abort"])
    actions = {parse_decision_json(text).action for text in sentences(_grammar(schema), 300)}
    assert actions == {"continue", "done", "abort"}
    with pytest.raises(ConfigError, match="no action left"):
        _grammar(decision_json_schema(TOOLS, actions=[]))


# --- arguments that fit the named tool ---------------------------------------------------------------------


class Move(BaseModel):
    task: str
    day: int = Field(ge=0, le=6)


def _tools() -> ToolRegistry:
    @tool
    def overview() -> str:
        """The week."""
        return ""

    @tool(effect="write")
    def place(
        task: str, day: Annotated[int, Field(ge=0, le=6)], slot: int | str = 0, note: str | None = None
    ) -> str:
        """Place a task."""
        return ""

    @tool(effect="write")
    def batch(moves: list[Move], mode: Literal["merge", "replace"] = "merge") -> str:
        """Moves."""
        return ""

    @tool
    def lookup(ids: list[int] | None = None, limit: float = 1.5, flag: bool = False) -> str:
        """Only optional arguments."""
        return ""

    return ToolRegistry([overview, place, batch, lookup])


def test_every_tool_call_the_grammar_allows_fits_its_tools_parameters() -> None:
    registry = _tools()
    parameters = {item.name: item.parameters for item in registry}
    names = sorted(parameters)
    grammar = schema_to_gbnf(grammar_schema(decision_json_schema(), names, tool_parameters=parameters))
    seen: dict[str, set[frozenset[str]]] = {name: set() for name in names}
    for text in sentences(grammar, 1500):
        call = parse_decision_json(text).tool_call
        if call is None:
            continue
        registry.validate(call.name, call.arguments)  # raises when they do not fit
        seen[call.name].add(frozenset(call.arguments))
    assert seen["overview"] == {frozenset()}
    # Required arguments always, optional ones sometimes, in every combination over enough samples.
    assert {frozenset({"task", "day"}), frozenset({"task", "day", "slot", "note"})} <= seen["place"]
    assert all("task" in keys and "day" in keys for keys in seen["place"])
    assert frozenset({"moves"}) in seen["batch"] and frozenset({"moves", "mode"}) in seen["batch"]
    assert frozenset() in seen["lookup"] and frozenset({"limit"}) in seen["lookup"]


def test_a_small_integer_range_becomes_its_values_and_strings_get_bounded() -> None:
    limits = GrammarLimits(open_string=4)
    day = {"type": "integer", "minimum": 0, "maximum": 6}
    assert tool_arguments_schema(day, limits) == {"enum": [0, 1, 2, 3, 4, 5, 6]}
    between = {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3}
    assert tool_arguments_schema(between, limits) == {"enum": [1, 2]}
    assert tool_arguments_schema({"type": "integer", "minimum": 0}, limits) == {"type": "integer"}
    assert tool_arguments_schema({"type": "string", "maxLength": 99}, limits) == {
        "type": "string",
        "minLength": 0,
        "maxLength": 4,
    }


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}},
        {"type": "object", "properties": {"x": {"type": "string", "minLength": 500}}},
        {"type": "object", "properties": {"x": {"allOf": [{"type": "string"}, {"type": "integer"}]}}},
        {"type": "object", "properties": {"x": {"not": {"type": "string"}}}},
        {
            "type": "object",
            "properties": {"x": {"type": "object", "additionalProperties": {"type": "integer"}}},
        },
    ],
)
def test_a_tool_beyond_the_subset_keeps_open_arguments(parameters: dict[str, object]) -> None:
    assert tool_arguments_schema(parameters, GrammarLimits()) is None
    grammar = schema_to_gbnf(
        grammar_schema(decision_json_schema(), ["odd"], tool_parameters={"odd": parameters})
    )
    calls = [d.tool_call for d in map(parse_decision_json, sentences(grammar, 300)) if d.tool_call]
    assert any(call.arguments for call in calls)  # open keys, as without parameters


# --- the small model's grammar: terse decisions, arguments copied from the conversation -------------------

SMALL = GrammarLimits(terse=True, copy_arguments=True)


def _small_grammar(texts: list[str], schema: dict[str, object] | None = None) -> str:
    registry = _tools()
    parameters = {item.name: item.parameters for item in registry}
    chosen = grammar_schema(
        schema or decision_json_schema(), sorted(parameters), SMALL, parameters, seen_in(texts, SMALL)
    )
    return schema_to_gbnf(chosen, SMALL)


def test_a_terse_decision_holds_only_what_its_action_needs_and_still_parses() -> None:
    actions: set[str] = set()
    for text in sentences(_small_grammar(["place t9 on day 2"]), 600):
        value = json.loads(text)
        decision = parse_decision_json(text)
        actions.add(decision.action)
        assert None not in value.values() and "reason" not in value
        needs = {"continue": {"tool_call"}, "ask_user": {"speak"}, "next_plan": {"goal_check"}}
        needs |= {"abort": {"abort"}, "done": {"speak"}}
        assert needs[decision.action] <= set(value) <= needs[decision.action] | {"action", "goal_check"}
    # confirm only where continue is not allowed: a continue on a write asks for consent anyway
    assert actions == set(ACTIONS) - {"confirm"}
    schema = decision_json_schema(sorted(p.name for p in _tools()), actions=["confirm", "done"])
    assert {parse_decision_json(t).action for t in sentences(_small_grammar([], schema), 200)} == {
        "confirm",
        "done",
    }


def test_copied_arguments_are_only_words_and_numbers_the_conversation_wrote() -> None:
    texts = ['Place "t 9" or (t4) on 2, please.', "overview: 3 free windows"]
    seen = seen_in(texts, SMALL)
    assert {"t 9", "t4", "2", "please", "overview", "3"} <= set(seen.words)
    assert seen.numbers == (9, 2, 3)  # in order of appearance: the 9 of "t 9" is a word of its own
    registry = _tools()
    calls = [d.tool_call for d in map(parse_decision_json, sentences(_small_grammar(texts), 1500))]
    placed = [call for call in calls if call is not None and call.name == "place"]
    assert placed
    for call in placed:
        registry.validate(call.name, call.arguments)
        assert call.arguments["task"] in seen.words
        assert call.arguments["day"] in (2, 3)  # its enum (0..6) narrowed to the numbers written
        if "slot" in call.arguments:
            assert call.arguments["slot"] in (*seen.numbers, *seen.words)
    assert {call.arguments["task"] for call in placed} >= {"t4", "t 9"}
    assert {call.arguments["day"] for call in placed} == {2, 3}


def test_an_enum_is_narrowed_to_the_values_written_in_any_case_else_left_whole() -> None:
    days = {"enum": ["monday", "tuesday", "wednesday"], "examples": ["monday"]}
    told = tool_arguments_schema(days, SMALL, seen_in(["Move it to Tuesday, at 12:00."], SMALL))
    assert told == {"enum": ["tuesday"]}
    shortened = tool_arguments_schema(days, SMALL, seen_in(["Move it to Wed or to Mo."], SMALL))
    assert shortened == {"enum": ["wednesday"]}  # first letters, three at least
    assert tool_arguments_schema(days, SMALL, seen_in(["Move it."], SMALL)) == {"enum": days["enum"]}


def test_an_argument_with_nothing_seen_to_copy_stays_open() -> None:
    node = tool_arguments_schema({"type": "string", "maxLength": 9}, SMALL, seen_in([], SMALL))
    assert node == {"type": "string", "minLength": 0, "maxLength": 9}
    node = tool_arguments_schema({"type": "integer"}, SMALL, seen_in(["no numbers here"], SMALL))
    assert node == {"type": "integer"}


def test_a_long_enum_becomes_a_tree_that_allows_exactly_its_values() -> None:
    values = [f"{hour:02d}:00" for hour in range(24)] + ["t1", "t10", "t100", "t2"]
    grammar = schema_to_gbnf({"enum": values})
    assert grammar.count('"1') < 10  # shared prefixes written once, not a flat list of 28 literals
    got = {json.loads(text) for text in sentences(grammar, 2000)}
    assert got == set(values)


def test_a_value_written_after_a_parameters_name_is_the_one_that_parameter_copies() -> None:
    texts = ['Put the task "review" (the 2026-06 numbers) in a free slot, for example task "review", '
             'day "wed", slot "09:00". Or place task t9 at 12:00.', "t1 t2 09:00-12:00"]
    seen = seen_in(texts, SMALL)
    assert ("task", "review") in seen.named and ("task", "t9") in seen.named and ("day", "wed") in seen.named
    parameters = {
        "type": "object",
        "properties": {
            "task": {"type": "string"},
            "day": {"enum": ["monday", "wednesday"]},
            "note": {"type": "string"},
        },
        "required": ["task", "day"],
    }
    copied = tool_arguments_schema(parameters, SMALL, seen)
    assert copied is not None
    assert copied["properties"]["task"] == {"enum": ["review", "t9"]}
    assert copied["properties"]["day"] == {"enum": ["wednesday"]}
    assert "t1" in copied["properties"]["note"]["enum"]  # no value named for it: any word written


def test_an_optional_argument_with_nothing_written_to_copy_is_left_out() -> None:
    parameters = {
        "type": "object",
        "properties": {
            "day": {"anyOf": [{"enum": ["monday", "tuesday"]}, {"type": "null"}]},
            "duration": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 12}, {"type": "null"}]},
        },
    }
    copied = tool_arguments_schema(parameters, SMALL, seen_in(["What is free on Monday?"], SMALL))
    assert copied is not None and list(copied["properties"]) == ["day"]
    assert copied["properties"]["day"] == {"anyOf": [{"enum": ["monday"]}, {"type": "null"}]}
    copied = tool_arguments_schema(parameters, SMALL, seen_in(["A 2-slot window on any day?", "2"], SMALL))
    assert copied is not None and list(copied["properties"]) == ["duration"]
