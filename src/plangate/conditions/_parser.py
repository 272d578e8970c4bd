"""The parser: tokens in, a typed syntax tree (``plangate.conditions.ast``) out, within fixed limits.

Recursive descent with one small function per precedence level (``or`` < ``and`` < ``not`` < comparison <
operand). Names are resolved here into the node they stand for (``build.status`` becomes a ``StepField``,
``steps.complete`` a ``StatusCount``), so the compiler never sees raw dotted names. Nothing is evaluated here.

Limits are enforced while parsing, before the recursion they guard can happen, so hostile input ends in a
``ConditionSyntaxError`` naming the limit and never in ``RecursionError``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import NoReturn

from plangate.conditions import ast
from plangate.conditions._lexer import (
    AND,
    CONST,
    DOT,
    END,
    LPAREN,
    NAME,
    NOT,
    NUMBER,
    OP,
    OR,
    RPAREN,
    STRING,
    Token,
    describe,
    tokenize,
)
from plangate.conditions.errors import ConditionSyntaxError

MAX_LENGTH = 4096
MAX_DEPTH = 64
MAX_NODES = 1000

_FIELD_NAMES = "'status', 'id' or 'output'"
_RECEIPT_NAMES = "tool, success, step, source or output"
_RECEIPTS_HINT = "receipt fields are read inside receipts.any(...), receipts.all(...) or receipts.count(...)"
_STEPS_WORDS = "all, any, count or a step status (" + ", ".join(ast.STATUSES) + ")"
# The precedence table, loosest first: or < and < not < comparison < operand. Each level is one method
# below; these map a level's operator tokens to what they build.
_CHAINS: dict[str, type[ast.Or | ast.And]] = {OR: ast.Or, AND: ast.And}
_COMPARISONS: dict[str, ast.CompareOp] = {op: op for op in ("==", "!=", "<", "<=", ">", ">=")}
_FIELDS: dict[str, ast.StepFieldName] = {"status": "status", "id": "id", "output": "output"}
_KINDS: dict[str, ast.AggregateKind] = {"all": "all", "any": "any", "count": "count"}
_SCOPES: dict[str, ast.AggregateScope] = {"children": "children", "descendants": "descendants"}
_RECEIPT_FIELDS: dict[str, ast.ReceiptFieldName] = {name: name for name in ast.RECEIPT_FIELDS}
# Tokens that may name an output key after a dot: names, and words the lexer took for keywords.
_KEY_KINDS = frozenset({NAME, CONST, AND, OR, NOT})


def parse(expression: str) -> ast.Expr:
    """Parse ``expression`` into a syntax tree.

    Raises:
        ConditionSyntaxError: the text does not lex or parse, or exceeds a limit (``MAX_LENGTH`` characters,
            ``MAX_DEPTH`` levels of nesting, ``MAX_NODES`` nodes).
    """
    if len(expression) > MAX_LENGTH:
        raise ConditionSyntaxError(
            expression,
            MAX_LENGTH,
            f"at most {MAX_LENGTH} characters",
            f"{len(expression)} characters",
            message=f"expression is too long: {len(expression)} characters, the limit is {MAX_LENGTH}",
        )
    try:
        return _Parser(expression).parse()
    except RecursionError:
        # The nesting limit keeps the parser's own recursion small; this only fires when the caller's stack
        # was already nearly full.
        raise ConditionSyntaxError(
            expression,
            0,
            f"at most {MAX_DEPTH} levels of nesting",
            "an expression too deep for the remaining stack",
            message="expression is nested too deeply to parse here (Python's stack is exhausted)",
        ) from None


class _Parser:
    __slots__ = ("_depth", "_heights", "_in_receipts", "_nodes", "_pos", "_spaced", "_text", "_tokens")

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = tokenize(text)
        self._pos = 0
        self._depth = 0  # open parentheses, ``not``s and aggregate predicates around the current token
        self._nodes = 0
        self._heights: dict[int, int] = {}  # id(node) -> height of its subtree; leaves are absent (1)
        # For the reference being read: where its names that came as separate tokens are, by index.
        self._spaced: dict[int, tuple[int, int]] | None = None
        # Inside the predicate of ``receipts.…(p)`` (and not of a step set nested in it): bare names are the
        # fields of the receipt being tested.
        self._in_receipts = False

    def parse(self) -> ast.Expr:
        node = self._or()
        token = self._tokens[self._pos]
        if token.kind != END:
            found = describe(token.text)
            raise ConditionSyntaxError(
                self._text,
                token.position,
                "an operator or the end of the expression",
                found,
                message=f"unexpected {found} after the expression at column {token.position + 1}",
            )
        return node

    # -- precedence levels, loosest first --------------------------------------------------------------------

    def _or(self) -> ast.Expr:
        first = self._and()
        if self._tokens[self._pos].kind != OR:
            return first
        return self._chain(first, OR, self._and)

    def _and(self) -> ast.Expr:
        first = self._not()
        if self._tokens[self._pos].kind != AND:
            return first
        return self._chain(first, AND, self._not)

    def _not(self) -> ast.Expr:
        token = self._tokens[self._pos]
        if token.kind != NOT:
            return self._comparison()
        self._pos += 1
        self._enter(token)
        operand = self._not()
        self._depth -= 1
        return self._composite(ast.Not(operand, position=token.position), operand)

    def _comparison(self) -> ast.Expr:
        left = self._operand()
        token = self._tokens[self._pos]
        if token.kind != OP:
            return left
        self._pos += 1
        right = self._operand()
        node = ast.Compare(_COMPARISONS[token.text], left, right, position=left.position)
        self._nodes += 1
        if self._nodes > MAX_NODES:
            self._too_large(node)
        heights = self._heights
        height = 1 + max(heights.get(id(left), 1), heights.get(id(right), 1))
        if height > MAX_DEPTH:
            self._too_deep(node.position)
        heights[id(node)] = height
        return node

    def _operand(self) -> ast.Expr:
        token = self._tokens[self._pos]
        handler = _OPERANDS.get(token.kind)
        if handler is None:
            self._fail(self._value_expected(), token)
        self._pos += 1
        return handler(self, token)

    def _chain(self, first: ast.Expr, kind: str, tighter: Callable[[], ast.Expr]) -> ast.Expr:
        """The rest of ``first and b and ...`` (or ``or``): one node for the whole chain."""
        tokens = self._tokens
        operands = [first]
        while tokens[self._pos].kind == kind:
            self._pos += 1
            operands.append(tighter())
        node = _CHAINS[kind](tuple(operands), position=first.position)
        return self._composite(node, *operands)

    # -- operands --------------------------------------------------------------------------------------------

    def _literal(self, token: Token) -> ast.Expr:
        node = ast.Literal(token.value, position=token.position)
        self._nodes += 1
        if self._nodes > MAX_NODES:
            self._too_large(node)
        return node

    def _group(self, token: Token) -> ast.Expr:
        self._enter(token)
        node = self._or()
        if self._tokens[self._pos].kind != RPAREN:
            hint = f"the '(' at column {token.position + 1} is not closed"
            self._fail("')'", self._tokens[self._pos], hint)
        self._pos += 1
        self._depth -= 1
        return node

    def _name(self, token: Token) -> ast.Expr:
        parts = self._path(token)
        if self._in_receipts:
            found = self._receipt_name(token, parts)
            if found is not None:
                return found
        special = _NAMES.get(parts[0])
        if special is not None:
            return special(self, token, parts)
        return self._step_field(parts[0], token, parts)

    def _path(self, token: Token) -> list[str]:
        """The names of a dotted reference: ``build.output.a`` or, written with spaces, ``build . output``."""
        parts = token.text.split(".")
        self._spaced = None
        tokens = self._tokens
        if tokens[self._pos].kind == DOT and _is_key(tokens[self._pos + 1]):
            spaced = self._spaced = {}
            while tokens[self._pos].kind == DOT and _is_key(tokens[self._pos + 1]):
                word = tokens[self._pos + 1]
                spaced[len(parts)] = (word.position, tokens[self._pos].position)
                parts.append(word.text)
                self._pos += 2
        return parts

    def _where(self, token: Token, parts: list[str], index: int) -> tuple[int, int]:
        """Where name ``index`` of the path just read starts, and where the dot before it is.

        Worked out only for messages, so that reading a reference stays cheap.
        """
        if self._spaced is not None and index in self._spaced:
            return self._spaced[index]
        position = token.position + sum(len(name) + 1 for name in parts[:index])
        return position, position - 1

    def _receipt_name(self, token: Token, parts: list[str]) -> ast.Expr | None:
        """A name inside a receipts predicate: a field of the receipt, an error, or None for the usual
        meaning (``vars.x``, ``env.X``, a named step's field, a nested set)."""
        name = parts[0]
        field = _RECEIPT_FIELDS.get(name)
        if field is not None:
            if field != "output":
                self._end_of_path(token, parts, 1)
                return self._leaf(ast.ReceiptField(field, position=token.position))
            keys = tuple(parts[1:])
            if len(keys) > MAX_DEPTH:
                self._too_deep(self._where(token, parts, 1 + MAX_DEPTH)[0])
            if self._tokens[self._pos].kind == DOT:
                self._fail(f"an output key after '{parts[-1]}.'", self._tokens[self._pos + 1])
            return self._leaf(ast.ReceiptField("output", keys, position=token.position))
        if len(parts) == 1 and name not in _OWN_MEANING:
            close = difflib.get_close_matches(name, ast.RECEIPT_FIELDS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else ""
            if name == "status":
                hint = "a receipt says how its call went in 'success'"
            raise ConditionSyntaxError(
                self._text,
                token.position,
                f"a receipt field ({_RECEIPT_NAMES})",
                describe(name),
                hint=hint,
                message=f"unknown receipt field {describe(name)} at column {token.position + 1}; expected "
                f"{_RECEIPT_NAMES}" + (f" ({hint})" if hint else ""),
            )
        return None

    def _receipts(self, token: Token, parts: list[str]) -> ast.Expr:
        word = self._part(parts, 1, "all, any or count")
        self._end_of_path(token, parts, 2)
        kind = _KINDS.get(word)
        if kind is None:
            where = self._where(token, parts, 1)[0]
            self._fail_at(where, "all, any or count after 'receipts.'", describe(word))
        return self._aggregate("receipts", None, kind, token)

    def _focus_field(self, token: Token, parts: list[str]) -> ast.Expr:
        # ``status``, ``id`` and ``output...`` on their own: fields of the step in focus.
        field = _FIELDS[parts[0]]
        return self._field(None, field, token, parts, 1)

    def _step(self, token: Token, parts: list[str]) -> ast.Expr:
        return self._step_field(None, token, parts)

    def _step_field(self, step: str | None, token: Token, parts: list[str]) -> ast.Expr:
        if len(parts) == 1 and parts[0] in _RECEIPT_FIELDS:
            self._fail(f"'.' and {_FIELD_NAMES} after '{parts[0]}'", self._tokens[self._pos], _RECEIPTS_HINT)
        name = parts[1] if len(parts) > 1 else self._part(parts, 1, _FIELD_NAMES)
        field = _FIELDS.get(name)
        if field is None:
            where = self._where(token, parts, 1)[0]
            self._fail_at(where, f"{_FIELD_NAMES} after '{parts[0]}.'", describe(name))
        return self._field(step, field, token, parts, 2)

    def _field(
        self, step: str | None, field: ast.StepFieldName, token: Token, parts: list[str], used: int
    ) -> ast.Expr:
        if field != "output":
            if len(parts) > used:
                self._end_of_path(token, parts, used)
            return self._leaf(ast.StepField(step, field, position=token.position))
        keys = tuple(parts[used:])
        if len(keys) > MAX_DEPTH:
            self._too_deep(self._where(token, parts, used + MAX_DEPTH)[0])
        if self._tokens[self._pos].kind == DOT:  # a dot not followed by a name
            self._fail(f"an output key after '{parts[-1]}.'", self._tokens[self._pos + 1])
        return self._leaf(ast.StepField(step, field, keys, position=token.position))

    def _vars(self, token: Token, parts: list[str]) -> ast.Expr:
        name = self._part(parts, 1, "a variable name")
        self._end_of_path(token, parts, 2)
        return self._leaf(ast.VarRef(name, position=token.position))

    def _env(self, token: Token, parts: list[str]) -> ast.Expr:
        name = self._part(parts, 1, "an environment variable name")
        self._end_of_path(token, parts, 2)
        return self._leaf(ast.EnvRef(name, position=token.position))

    def _file(self, token: Token, parts: list[str]) -> ast.Expr:
        if self._part(parts, 1, "'exists'") != "exists":
            self._fail_at(self._where(token, parts, 1)[0], "'exists' after 'file.'", describe(parts[1]))
        self._end_of_path(token, parts, 2)
        self._expect(LPAREN, "'(' after 'file.exists'")
        path = self._expect(STRING, "a quoted path after 'file.exists('")
        self._expect(RPAREN, "')' after the path of file.exists")
        return self._leaf(ast.FileExists(str(path.value), position=token.position))

    def _steps(self, token: Token, parts: list[str]) -> ast.Expr:
        word = self._part(parts, 1, _STEPS_WORDS)
        self._end_of_path(token, parts, 2)
        if word in ast.STATUSES:
            return self._leaf(ast.StatusCount(word, position=token.position))
        kind = _KINDS.get(word)
        if kind is None:
            self._fail_at(self._where(token, parts, 1)[0], f"{_STEPS_WORDS} after 'steps.'", describe(word))
        return self._aggregate("steps", None, kind, token)

    def _scoped(self, token: Token, parts: list[str]) -> ast.Expr:
        # ``children(x)`` / ``descendants(x)``; ``step`` as x means the step in focus.
        name = parts[0]
        if len(parts) > 1:
            self._fail_at(self._where(token, parts, 1)[1], f"'(' after '{name}'", describe(f".{parts[1]}"))
        self._expect(LPAREN, "'(' after '{}'", name)
        parent = self._tokens[self._pos]
        if parent.kind != NAME or "." in parent.text:
            self._fail(f"a step id after '{name}('", parent)
        if parent.text == "step" and self._in_receipts:
            hint = "inside a receipts predicate the element in focus is a receipt, not a step"
            self._fail(f"a step id after '{name}('", parent, hint)
        self._pos += 1
        self._expect(RPAREN, "')' after '{}({}'", name, parent.text)
        self._expect(DOT, "'.all(', '.any(' or '.count(' after '{}({})'", name, parent.text)
        word = self._tokens[self._pos]
        kind = _KINDS.get(word.text) if word.kind == NAME else None
        if kind is None:
            self._fail(f"all, any or count after '{name}({parent.text}).'", word)
        self._pos += 1
        step = None if parent.text == "step" else parent.text
        return self._aggregate(_SCOPES[name], step, kind, token)

    def _part(self, parts: list[str], index: int, what: str) -> str:
        """The name at ``index`` of a path, or a failure saying ``what`` was expected there."""
        if index < len(parts):
            return parts[index]
        prefix = ".".join(parts)
        token = self._tokens[self._pos]
        if token.kind == DOT:  # a dot followed by something that is not a name
            self._fail(f"{what} after '{prefix}.'", self._tokens[self._pos + 1])
        self._fail(f"'.' and {what} after '{prefix}'", token)

    def _end_of_path(self, token: Token, parts: list[str], used: int) -> None:
        """Fail when a path goes on after the names its reference takes (``build.status.x``)."""
        if len(parts) > used:
            dot = self._where(token, parts, used)[1]
            consumed = ".".join(parts[:used])
            self._fail_at(dot, f"an operator after '{consumed}'", describe(f".{parts[used]}"))

    def _aggregate(
        self, scope: ast.AggregateScope, step: str | None, kind: ast.AggregateKind, start: Token
    ) -> ast.Expr:
        opening = self._expect(LPAREN, "'(' after '{}'", kind)
        self._enter(opening)
        outer, self._in_receipts = self._in_receipts, scope == "receipts"
        predicate = self._or()
        if self._tokens[self._pos].kind != RPAREN:
            hint = f"the '{kind}(' at column {opening.position + 1} is not closed"
            self._fail("')'", self._tokens[self._pos], hint)
        self._in_receipts = outer
        self._pos += 1
        self._depth -= 1
        node = ast.Aggregate(kind, scope, step, predicate, position=start.position)
        return self._composite(node, predicate)

    # -- bookkeeping -----------------------------------------------------------------------------------------

    def _expect(self, kind: str, expected: str, *details: str) -> Token:
        """Take a token of ``kind``, or fail with ``expected.format(*details)`` (formatted only then)."""
        token = self._tokens[self._pos]
        if token.kind != kind:
            self._fail(expected.format(*details), token)
        self._pos += 1
        return token

    def _value_expected(self) -> str:
        if self._pos == 0:
            return "an expression"
        return f"a value after {describe(self._tokens[self._pos - 1].text)}"

    def _fail(self, expected: str, token: Token, hint: str = "") -> NoReturn:
        found = "end of input" if token.kind == END else describe(token.text)
        raise ConditionSyntaxError(self._text, token.position, expected, found, hint=hint)

    def _fail_at(self, position: int, expected: str, found: str) -> NoReturn:
        raise ConditionSyntaxError(self._text, position, expected, found)

    def _enter(self, token: Token) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            self._too_deep(token.position)

    def _too_deep(self, position: int) -> NoReturn:
        raise ConditionSyntaxError(
            self._text,
            position,
            f"at most {MAX_DEPTH} levels of nesting",
            "a deeper expression",
            message=f"expression is nested more than {MAX_DEPTH} levels deep at column {position + 1}",
        )

    def _leaf(self, node: ast.Expr) -> ast.Expr:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            self._too_large(node)
        return node

    def _composite(self, node: ast.Expr, *children: ast.Expr) -> ast.Expr:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            self._too_large(node)
        heights = self._heights
        height = 1
        for child in children:
            below = heights.get(id(child), 1)
            if below >= height:
                height = below + 1
        if height > MAX_DEPTH:
            self._too_deep(node.position)
        heights[id(node)] = height
        return node

    def _too_large(self, node: ast.Expr) -> NoReturn:
        raise ConditionSyntaxError(
            self._text,
            node.position,
            f"at most {MAX_NODES} nodes",
            "a larger expression",
            message=f"expression is too large: more than {MAX_NODES} nodes at column {node.position + 1}",
        )


def _is_key(token: Token) -> bool:
    # Names, and words the lexer took for keywords (``output.true``), but not ``&&`` or ``!``.
    return token.kind in _KEY_KINDS and (token.text[0].isalpha() or token.text[0] == "_")


_Handler = Callable[[_Parser, Token], ast.Expr]
_NameHandler = Callable[[_Parser, Token, list[str]], ast.Expr]

# What a token means where an operand is expected.
_OPERANDS: dict[str, _Handler] = {
    STRING: _Parser._literal,
    NUMBER: _Parser._literal,
    CONST: _Parser._literal,
    LPAREN: _Parser._group,
    NAME: _Parser._name,
}

# Names with a meaning of their own at the start of a reference; any other name is a step id.
_NAMES: dict[str, _NameHandler] = {
    "status": _Parser._focus_field,
    "id": _Parser._focus_field,
    "output": _Parser._focus_field,
    "step": _Parser._step,
    "vars": _Parser._vars,
    "env": _Parser._env,
    "file": _Parser._file,
    "steps": _Parser._steps,
    "children": _Parser._scoped,
    "descendants": _Parser._scoped,
    "receipts": _Parser._receipts,
}

# Names that keep their meaning inside a receipts predicate (``status`` and ``id`` belong to steps only).
_OWN_MEANING = frozenset(_NAMES) - {"status", "id"}

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "MAX_NODES", "parse"]
