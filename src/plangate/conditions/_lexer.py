"""The lexer: expression text in, a list of tokens (each with its 0-based position) out.

It knows characters, not grammar: ``==`` is an operator and ``run-tests`` is one name here, but whether an
operator may follow a name is the parser's business. Characters that can never start a token, and operators
the language does not have (``=``, ``===``, ``<>``, a single ``&``), are rejected here with their position.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from plangate.conditions.errors import ConditionSyntaxError

# Token kinds. ``and``/``&&``, ``or``/``||`` and ``not``/``!`` share a kind: the parser never needs to know
# which spelling was used, only the text (kept on the token) for messages.
NAME = "name"
STRING = "string"
NUMBER = "number"
CONST = "const"  # true, false, null
AND = "and"
OR = "or"
NOT = "not"
OP = "op"  # one of the six comparisons
LPAREN = "("
RPAREN = ")"
DOT = "."
END = "end"

Value = str | int | float | bool | None


class Token(NamedTuple):
    """One token: its kind, its exact source text, where it starts, and its value (for literals).

    A ``NAME`` token may be a dotted path (``build.output.size``) when written without spaces.
    """

    kind: str
    text: str
    position: int
    value: Value = None


# ``Token(...)`` goes through a Python-level ``__new__``; building the tuple directly is about twice as fast,
# and the lexer makes one per word of every expression compiled. Always pass all four fields.
_token = tuple.__new__

# The lexer matches short character classes with small patterns because they are fast in CPython; the
# structure of the language is recognised by the hand-written parser, never by a pattern.
# A name, or a dotted path of names written without spaces (``run-tests.output.a``): one token instead of
# five, since references are most of every expression.
_NAME_AND_SPACE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*)[ \t\r\n]*")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
# What a malformed number swallows, so the error shows the whole bad word (``1e``, ``1.2.3``, ``3x``).
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.+-]*")

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHAR = _NAME_START | frozenset("0123456789-")
_DIGITS = frozenset("0123456789")
_SPACE = frozenset(" \t\r\n")
_COMPARISONS = frozenset({"==", "!=", "<=", ">="})
_HEX = frozenset("0123456789abcdefABCDEF")
_KEYWORDS: dict[str, tuple[str, Value]] = {
    "and": (AND, None),
    "or": (OR, None),
    "not": (NOT, None),
    "true": (CONST, True),
    "false": (CONST, False),
    "null": (CONST, None),
}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_OPERATORS = "a comparison operator (==, !=, <, <=, >, >=)"
_ANY_TOKEN = "a name, a value, an operator or a parenthesis"


def describe(text: str) -> str:
    """Quote source text for a message: ``'foo'``, ``"'foo'"`` for a string, unprintable text escaped."""
    if not text.isprintable():
        return repr(text)
    return f'"{text}"' if "'" in text and '"' not in text else f"'{text}'"


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with an ``END`` token positioned at ``len(text)``.

    Raises:
        ConditionSyntaxError: a character that starts no token, a malformed number or string, or an
            operator the language does not have.
    """
    tokens: list[Token] = []
    append = tokens.append
    # Names are most tokens; their branch uses locals and skips the whitespace after them in the same match.
    match_name, keywords, name_start, new = _NAME_AND_SPACE.match, _KEYWORDS, _NAME_START, _token
    size = len(text)
    i = 0
    while i < size and text[i] in _SPACE:
        i += 1
    while i < size:
        ch = text[i]
        if ch in name_start:
            match = match_name(text, i)
            if match is None:  # ch starts a name, so the pattern matches; refused rather than trusted
                raise ConditionSyntaxError(text, i, "a name", describe(ch))
            word = match[1]
            keyword = keywords.get(word)
            if keyword is not None:
                append(new(Token, (keyword[0], word, i, keyword[1])))
            elif "." in word and word.partition(".")[0] in keywords:
                word = word.partition(".")[0]  # ``true.x``: a keyword never starts a path
                kind, value = keywords[word]
                append(new(Token, (kind, word, i, value)))
                i += len(word)
                continue
            else:
                append(new(Token, (NAME, word, i, word)))
            i = match.end()
            continue
        elif ch in _DIGITS or (ch == "-" and text[i + 1 : i + 2] in _DIGITS):
            token = _number(text, i)
            append(token)
            i += len(token.text)
        elif ch == "'" or ch == '"':
            close = text.find(ch, i + 1)
            if close > 0 and text.find("\\", i + 1, close) < 0:  # no escapes: the common case, inline
                append(new(Token, (STRING, text[i : close + 1], i, text[i + 1 : close])))
                i = close + 1
            else:
                token = _string(text, i)
                append(token)
                i += len(token.text)
        elif ch in "=!<>&|":
            pair = text[i : i + 2]
            if pair in _COMPARISONS and text[i + 2 : i + 3] != "=":  # ``==``, ``!=``, ``<=``, ``>=``
                append(new(Token, (OP, pair, i, pair)))
                i += 2
            else:
                token = _operator(text, i)
                append(token)
                i += len(token.text)
        elif ch == "(" or ch == ")" or ch == ".":
            append(_token(Token, (ch, ch, i, None)))
            i += 1
        else:
            raise ConditionSyntaxError(text, i, _ANY_TOKEN, describe(ch))
        while i < size and text[i] in _SPACE:
            i += 1
    append(_token(Token, (END, "", size, None)))
    return tokens


def _number(text: str, start: int) -> Token:
    match = _NUMBER.match(text, start)
    if match is None:  # the caller saw a digit (or '-' and a digit), so the pattern matches
        raise ConditionSyntaxError(text, start, "a number", describe(text[start]))
    end = match.end()
    if end < len(text) and (text[end] in _NAME_CHAR or text[end] == "."):
        tail = _NUMBER_TAIL.match(text, end)
        bad = text[start : tail.end() if tail else end]
        raise ConditionSyntaxError(text, start, "a number", describe(bad))
    word = match.group()
    value: int | float = float(word) if match.group(1) or match.group(2) else int(word)
    return _token(Token, (NUMBER, word, start, value))


def _string(text: str, start: int) -> Token:
    quote = text[start]
    parts: list[str] = []
    i = start + 1
    size = len(text)
    while True:
        close = text.find(quote, i)
        slash = text.find("\\", i, close if close >= 0 else size)
        if slash < 0:
            if close < 0:
                hint = f"the string at column {start + 1} is not closed"
                raise ConditionSyntaxError(text, size, f"a closing {quote}", "end of input", hint=hint)
            parts.append(text[i:close])
            return _token(Token, (STRING, text[start : close + 1], start, "".join(parts)))
        parts.append(text[i:slash])
        parts.append(_escape(text, slash))
        i = slash + (6 if text[slash + 1 : slash + 2] == "u" else 2)


def _escape(text: str, slash: int) -> str:
    code = text[slash + 1 : slash + 2]
    if code in _ESCAPES:
        return _ESCAPES[code]
    if code == "u":
        digits = text[slash + 2 : slash + 6]
        valid = 0
        while valid < len(digits) and digits[valid] in _HEX:
            valid += 1
        if valid == 4:
            return chr(int(digits, 16))
        return _bad_escape(text, slash, text[slash : slash + 2 + valid])
    return _bad_escape(text, slash, text[slash : slash + 2] if code else "\\")


def _bad_escape(text: str, slash: int, found: str) -> str:
    expected = "an escape (\\\\, \\', \\\", \\n, \\t, \\r, \\0 or \\uXXXX)"
    raise ConditionSyntaxError(text, slash, expected, describe(found) if found != "\\" else "end of input")


def _operator(text: str, start: int) -> Token:
    ch = text[start]
    nxt = text[start + 1 : start + 2]
    if ch == "=":
        end = start
        while end < len(text) and text[end] == "=":
            end += 1
        word = text[start:end]
        if word == "==":
            return _token(Token, (OP, word, start, word))
        if word == "=" and nxt in ("<", ">"):
            word += nxt
        hint = "use '==' to compare" if word != "=>" and word != "=<" else f"use '{word[::-1]}'"
        raise ConditionSyntaxError(text, start, _OPERATORS, describe(word), hint=hint)
    if ch == "!":
        if nxt != "=":
            return _token(Token, (NOT, ch, start, None))
        if text[start + 2 : start + 3] == "=":
            raise ConditionSyntaxError(text, start, _OPERATORS, describe("!=="), hint="use '!='")
        return _token(Token, (OP, "!=", start, "!="))
    if ch == "<" or ch == ">":
        if nxt == "=":
            return _token(Token, (OP, ch + nxt, start, ch + nxt))
        if ch == "<" and nxt == ">":
            raise ConditionSyntaxError(text, start, _OPERATORS, describe("<>"), hint="use '!='")
        return _token(Token, (OP, ch, start, ch))
    # '&' or '|': only the doubled forms exist.
    if nxt == ch:
        return _token(Token, (AND if ch == "&" else OR, ch + ch, start, None))
    spelled = "'&&' or 'and'" if ch == "&" else "'||' or 'or'"
    raise ConditionSyntaxError(text, start, spelled, describe(ch))


__all__ = [
    "AND",
    "CONST",
    "DOT",
    "END",
    "LPAREN",
    "NAME",
    "NOT",
    "NUMBER",
    "OP",
    "OR",
    "RPAREN",
    "STRING",
    "Token",
    "Value",
    "describe",
    "tokenize",
]
