"""The tagged wire, parsed while streaming: visible text, plain replies, unclosed tags, any split."""

from __future__ import annotations

import pytest

from plangate.decisions import (
    PLAIN_REPLY_WINDOW,
    Decision,
    DecisionParseError,
    PlanOutput,
    RouteDecision,
    TaggedResult,
    TaggedStreamParser,
    ToolCallIntent,
    decode_plan,
    decode_route,
    parse_tagged,
)

TAGGED = (
    '<decision>{"action": "continue", "reason": "need the week", '
    '"tool_call": {"name": "get_overview", '
    '"arguments": {"note": "a } and a \\" and </decision>"}}}</decision>\n'
    "Let me look at your week first."
)


def stream(chunks: list[str]) -> tuple[list[str], TaggedResult[Decision]]:
    parser = TaggedStreamParser()
    shown = [parser.feed(chunk) for chunk in chunks]
    return shown, parser.finish()


def outcome(chunks: list[str]) -> tuple[str, TaggedResult[Decision] | None, str | None]:
    """What a consumer sees: the visible text in order, then the result or the error."""
    try:
        shown, result = stream(chunks)
    except DecisionParseError as exc:
        return "", None, str(exc)
    return "".join(shown) + result.tail, result, None


def test_decision_then_visible_reply() -> None:
    shown, result = stream([TAGGED])
    assert result.decision == Decision(
        action="continue",
        reason="need the week",
        tool_call=ToolCallIntent(name="get_overview", arguments={"note": 'a } and a " and </decision>'}),
    )
    assert result.reply == "Let me look at your week first."
    assert "".join(shown) + result.tail == result.reply
    assert not result.plain


def test_visible_text_streams_as_soon_as_the_decision_is_closed() -> None:
    parser = TaggedStreamParser()
    assert parser.feed('<decision>{"action": "ask_user"}') == ""
    assert parser.feed("</decision>\n\nWhich ") == "Which"
    assert parser.feed("day suits you?  ") == " day suits you?"
    assert parser.feed("\n") == ""
    result = parser.finish()
    assert result.reply == "Which day suits you?"
    assert result.tail == ""


@pytest.mark.parametrize(
    "text",
    [
        TAGGED,
        '  Sure.\n<DECISION>```json\n{"action": "done", "speak": "{{\\\\"}\n```</Decision>  Done!  \n',
        "<decision>" + '{"action": "done"}' + "</decision>",
        "A plain answer with a < sign and {braces}.",
        '<decision>{"action": "done"',
        '<decision>{"action": "done"}</decisio',
        "<decision></decision>Hello",
        '<decision>{"action": "done"</decision>',
        '<decision>{"action": "finish"}</decision>hi',
        "x" * (PLAIN_REPLY_WINDOW - 1) + '<decision>{"action": "done"}</decision>ok',
        "x" * PLAIN_REPLY_WINDOW + '<decision>{"action": "done"}</decision>ok',
    ],
)
def test_splitting_at_every_position_gives_the_same_outcome(text: str) -> None:
    whole = outcome([text])
    for cut in range(len(text) + 1):
        assert outcome([text[:cut], text[cut:]]) == whole, cut
    assert outcome(list(text)) == whole


def test_text_without_a_tag_in_the_window_is_a_plain_reply() -> None:
    text = "y" * PLAIN_REPLY_WINDOW + '<decision>{"action": "done"}</decision>'
    shown, result = stream([text[:300], text[300:]])
    assert result.plain
    assert result.decision is None
    assert result.reply == text
    # The window is passed once the tag could no longer start inside it: the text is released then.
    assert shown[0] == ""
    assert shown[1] == text


def test_a_tag_starting_inside_the_window_counts() -> None:
    text = "z" * (PLAIN_REPLY_WINDOW - 1) + '<decision>{"action": "done"}</decision>ok'
    _, result = stream([text])
    assert result.decision == Decision(action="done")
    assert result.preamble == "z" * (PLAIN_REPLY_WINDOW - 1)
    assert result.reply == "ok"


def test_short_plain_reply_is_released_at_the_end() -> None:
    shown, result = stream(["Hello ", "there."])
    assert shown == ["", ""]
    assert result.plain
    assert result.tail == result.reply == "Hello there."


def test_preamble_is_kept_but_never_shown() -> None:
    shown, result = stream(['Thinking aloud.\n<decision>{"action": "done"}</decision>Bye.'])
    assert result.preamble == "Thinking aloud."
    assert "".join(shown) + result.tail == "Bye."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '<decision>{"action": "done"}',
            "decision: missing </decision> after the JSON object (the output ended)",
        ),
        (
            '<decision>{"action": "done"}\nAll done.',
            "decision: missing </decision> after the JSON object (the output ended)",
        ),
        (
            '<decision>{"action": "do',
            "decision: the JSON object inside <decision> is not closed (the output ended)",
        ),
        (
            "<decision>",
            "decision: the <decision> tag is not closed and holds no JSON object (the output ended)",
        ),
        ("<decision></decision>Hello", "decision: no JSON object inside <decision>…</decision>"),
        (
            '<decision>{"action": "done"</decision>',
            "decision: the JSON object is not closed before </decision>",
        ),
        (
            '<decision>{"action": "done",}</decision>',
            "decision: invalid JSON at line 1 column 19: Expecting property name enclosed in double quotes",
        ),
        (
            '<decision>{"tool_call": "x", "action": "continue"}</decision>',
            "tool_call: expected an object, got a string",
        ),
    ],
)
def test_unusable_tags_are_corrections_not_empty_replies(text: str, message: str) -> None:
    with pytest.raises(DecisionParseError) as info:
        parse_tagged(text)
    assert str(info.value) == message


def test_an_error_is_raised_again_and_no_reply_text_leaks() -> None:
    parser = TaggedStreamParser()
    assert parser.feed('<decision>{"action": "done", "tool_call": ') == ""
    with pytest.raises(DecisionParseError):
        parser.feed('{"name": "place"}}</decision>Placed!')
    with pytest.raises(DecisionParseError, match="tool_call: not allowed when action is 'done'"):
        parser.feed("more")
    with pytest.raises(DecisionParseError):
        parser.finish()


def test_a_finished_parser_refuses_more_input() -> None:
    parser = TaggedStreamParser()
    parser.feed("hi")
    parser.finish()
    with pytest.raises(RuntimeError, match="already finished"):
        parser.feed("more")


def test_other_outputs_use_the_same_format() -> None:
    route = parse_tagged(['<decision>{"route": "reply"}', "</decision>Hi!"], decode_route)
    assert route.decision == RouteDecision(route="reply")
    assert route.reply == "Hi!"
    plan: TaggedResult[PlanOutput] = parse_tagged(
        '<decision>{"action": "ask_user", "question": "Which week?"}</decision>', decode_plan
    )
    assert plan.decision is not None
    assert plan.decision.question == "Which week?"
