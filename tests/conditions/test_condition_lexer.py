"""The lexer: token kinds, exact texts, positions and literal values."""

from __future__ import annotations

import pytest

from plangate.conditions import ConditionSyntaxError
from plangate.conditions._lexer import tokenize


def _triples(text: str) -> list[tuple[str, str, int]]:
    return [(token.kind, token.text, token.position) for token in tokenize(text)]


def test_every_token_carries_its_position() -> None:
    assert _triples("run-tests.status == 'complete' && !x.output.ok") == [
        ("name", "run-tests.status", 0),
        ("op", "==", 17),
        ("string", "'complete'", 20),
        ("and", "&&", 31),
        ("not", "!", 34),
        ("name", "x.output.ok", 35),
        ("end", "", 46),
    ]


def test_a_path_written_with_spaces_or_ending_in_a_dot_is_separate_tokens() -> None:
    assert _triples("x . output.\tok") == [
        ("name", "x", 0),
        (".", ".", 2),
        ("name", "output", 4),
        (".", ".", 10),
        ("name", "ok", 12),
        ("end", "", 14),
    ]
    assert _triples("children(a).all") == [
        ("name", "children", 0),
        ("(", "(", 8),
        ("name", "a", 9),
        (")", ")", 10),
        (".", ".", 11),
        ("name", "all", 12),
        ("end", "", 15),
    ]
    assert _triples("true.x")[:3] == [("const", "true", 0), (".", ".", 4), ("name", "x", 5)]


def test_keywords_and_their_symbol_spellings_share_a_kind() -> None:
    kinds = [token.kind for token in tokenize("and && or || not ! true false null")]
    assert kinds == ["and", "and", "or", "or", "not", "not", "const", "const", "const", "end"]
    assert [token.value for token in tokenize("true false null")][:3] == [True, False, None]


def test_a_hyphen_inside_a_name_is_part_of_the_name() -> None:
    assert [token.text for token in tokenize("a-b deploy-staging-2 x_y-")][:3] == [
        "a-b",
        "deploy-staging-2",
        "x_y-",
    ]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("007", 7),
        ("1.5", 1.5),
        ("1e6", 1_000_000.0),
        ("1E-3", 0.001),
        ("2.5e+2", 250.0),
        ("-1", -1),
        ("-0.5e2", -50.0),
        ("123456789012345678901234567890", 123456789012345678901234567890),
    ],
)
def test_numbers(text: str, value: int | float) -> None:
    token = tokenize(text)[0]
    assert (token.kind, token.text, token.value) == ("number", text, value)
    assert type(token.value) is type(value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("'plain'", "plain"),
        ('"double"', "double"),
        ("'it\\'s'", "it's"),
        ('"say \\"hi\\""', 'say "hi"'),
        ("'a\\\\b'", "a\\b"),
        ("'tab\\tnew\\nret\\rnul\\0'", "tab\tnew\nret\rnul\0"),
        ("'\\u00e9t\\u00E9'", "été"),
        ("'mixed \" quotes'", 'mixed " quotes'),
        ("''", ""),
        ("'{{repo_root}}/go.mod'", "{{repo_root}}/go.mod"),
    ],
)
def test_strings_and_escapes(text: str, value: str) -> None:
    token = tokenize(text)[0]
    assert (token.kind, token.text, token.value, token.position) == ("string", text, value, 0)


def test_whitespace_of_every_kind_separates_tokens() -> None:
    assert _triples("a\t.\nstatus\r\n==  'x'") == [
        ("name", "a", 0),
        (".", ".", 2),
        ("name", "status", 4),
        ("op", "==", 12),
        ("string", "'x'", 16),
        ("end", "", 19),
    ]


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_the_six_comparisons(op: str) -> None:
    assert _triples(f"a{op}b")[1] == ("op", op, 1)


@pytest.mark.parametrize(
    ("text", "position", "found"),
    [
        ("a = b", 2, "'='"),
        ("a === b", 2, "'==='"),
        ("a ==== b", 2, "'===='"),
        ("a <> b", 2, "'<>'"),
        ("a !== b", 2, "'!=='"),
        ("a & b", 2, "'&'"),
        ("a | b", 2, "'|'"),
        ("a ~ b", 2, "'~'"),
        ("a\x00b", 1, "'\\x00'"),
        ("é", 0, "'é'"),
    ],
)
def test_characters_and_operators_the_language_does_not_have(text: str, position: int, found: str) -> None:
    with pytest.raises(ConditionSyntaxError) as caught:
        tokenize(text)
    assert (caught.value.position, caught.value.found) == (position, found)
