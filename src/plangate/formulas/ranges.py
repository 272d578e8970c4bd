"""The arithmetic of loop ranges: ``"1..10"``, ``"2..(n*2)+1"``, ``"0..2^3-1"``.

For: turning the text of ``loop.range`` (after its ``{{var}}`` placeholders are rendered) into two whole
numbers. Not for: anything else; it is a small calculator with ``+ - * / ^`` and parentheses, exact (it works
on fractions, so ``7/2*2`` is 7) and bounded (the text, the nesting and every intermediate value have limits).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import NoReturn

from plangate.errors import FormulaError

MAX_TEXT = 200
MAX_DEPTH = 32
MAX_MAGNITUDE = 10**15
MAX_EXPONENT = 64

_TOKEN = re.compile(r"\s*(?:(?P<num>[0-9]+(?:\.[0-9]+)?)|(?P<op>\.\.|[-+*/^()]))")


@dataclass(frozen=True)
class _Token:
    kind: str  # "num", "op" or "end"
    text: str
    column: int  # 1-based


def parse_range(text: str, *, path: str = "") -> tuple[int, int]:
    """Evaluate ``"<start>..<end>"`` into its two whole-number bounds (both included).

    Raises:
        FormulaError: the text is not a range, a bound is not a whole number, or a value is too large.
    """
    tokens = _tokenize(text, path)
    separators = [i for i, tok in enumerate(tokens) if tok.text == ".."]
    if not separators:
        raise FormulaError(f"expected a range like '1..10', got {text!r}", path=path)
    if len(separators) > 1:
        col = tokens[separators[1]].column
        raise FormulaError(f"expected one '..' in range {text!r}, found another at column {col}", path=path)
    cut = separators[0]
    start = _Parser(text, [*tokens[:cut], _Token("end", "", tokens[cut].column)], path).parse()
    end = _Parser(text, tokens[cut + 1 :], path).parse()
    return _whole(start, "start", text, path), _whole(end, "end", text, path)


def evaluate_arithmetic(text: str, *, path: str = "") -> Fraction:
    """Evaluate one arithmetic expression exactly (``+ - * / ^``, parentheses, unary minus).

    Raises:
        FormulaError: a syntax error (with its column), a division by zero, or a value past the limits.
    """
    tokens = _tokenize(text, path)
    for tok in tokens:
        if tok.text == "..":
            raise FormulaError(f"unexpected '..' at column {tok.column} in {text!r}", path=path)
    return _Parser(text, tokens, path).parse()


def _whole(value: Fraction, which: str, text: str, path: str) -> int:
    if value.denominator != 1:
        raise FormulaError(f"the range {which} of {text!r} is {value}, expected a whole number", path=path)
    return value.numerator


def _tokenize(text: str, path: str) -> list[_Token]:
    if len(text) > MAX_TEXT:
        raise FormulaError(f"range expression is longer than {MAX_TEXT} characters", path=path)
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            col = pos + 1 + len(text[pos:]) - len(text[pos:].lstrip())
            raise FormulaError(f"unexpected {text[col - 1]!r} at column {col} in {text!r}", path=path)
        kind = "num" if match.group("num") is not None else "op"
        value = match.group(kind)
        tokens.append(_Token(kind, value, match.start(kind) + 1))
        pos = match.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


class _Parser:
    """Precedence climbing, one method per level: sum, product, unary, power, atom."""

    def __init__(self, text: str, tokens: list[_Token], path: str) -> None:
        self._text = text
        self._tokens = tokens
        self._pos = 0
        self._path = path
        self._depth = 0

    def parse(self) -> Fraction:
        value = self._sum()
        tok = self._peek()
        if tok.kind != "end":
            self._fail(f"unexpected {tok.text!r} at column {tok.column}")
        return value

    def _peek(self) -> _Token:
        return self._tokens[self._pos]

    def _take(self) -> _Token:
        tok = self._tokens[self._pos]
        self._pos += 1
        return tok

    def _sum(self) -> Fraction:
        value = self._product()
        while self._peek().text in ("+", "-"):
            op = self._take().text
            right = self._product()
            value = self._bounded(value + right if op == "+" else value - right)
        return value

    def _product(self) -> Fraction:
        value = self._unary()
        while self._peek().text in ("*", "/"):
            tok = self._take()
            right = self._unary()
            if tok.text == "*":
                value = self._bounded(value * right)
            elif right == 0:
                self._fail(f"division by zero at column {tok.column}")
            else:
                value = self._bounded(value / right)
        return value

    def _unary(self) -> Fraction:
        if self._peek().text in ("-", "+"):
            op = self._take().text
            self._enter()
            value = self._unary()
            self._depth -= 1
            return -value if op == "-" else value
        return self._power()

    def _power(self) -> Fraction:
        base = self._atom()
        if self._peek().text != "^":
            return base
        tok = self._take()
        self._enter()
        exponent = self._unary()  # right-associative: 2^3^2 is 2^9
        self._depth -= 1
        if exponent.denominator != 1:
            self._fail(f"the exponent at column {tok.column} is {exponent}, expected a whole number")
        if abs(exponent) > MAX_EXPONENT:
            self._fail(f"the exponent at column {tok.column} is larger than {MAX_EXPONENT}")
        if base == 0 and exponent < 0:
            self._fail(f"division by zero: 0 to a negative power at column {tok.column}")
        return self._bounded(base ** int(exponent))

    def _atom(self) -> Fraction:
        tok = self._take()
        if tok.kind == "num":
            if len(tok.text) > 18:
                self._fail(f"the number at column {tok.column} is too long")
            return self._bounded(Fraction(tok.text))
        if tok.text == "(":
            self._enter()
            value = self._sum()
            self._depth -= 1
            close = self._take()
            if close.text != ")":
                found = "the end" if close.kind == "end" else repr(close.text)
                self._fail(f"expected ')' at column {close.column}, found {found}")
            return value
        found = "the end of the expression" if tok.kind == "end" else repr(tok.text)
        self._fail(f"expected a number or '(' at column {tok.column}, found {found}")

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            self._fail(f"expression nests deeper than {MAX_DEPTH} levels")

    def _bounded(self, value: Fraction) -> Fraction:
        if (
            abs(value.numerator) > MAX_MAGNITUDE**2
            or value.denominator > MAX_MAGNITUDE**2
            or (abs(value) > MAX_MAGNITUDE)
        ):
            self._fail(f"a value is larger than {MAX_MAGNITUDE:.0e}")
        return value

    def _fail(self, message: str) -> NoReturn:
        raise FormulaError(f"{message} in {self._text!r}", path=self._path)


__all__ = ["evaluate_arithmetic", "parse_range"]
