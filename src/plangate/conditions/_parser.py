"""The parser: tokens in, a typed syntax tree (``plangate.conditions.ast``) out, within fixed limits.

Recursive descent with one small function per precedence level (``or`` < ``and`` < ``not`` < comparison <
operand). Names are resolved here into the node they stand for (``build.status`` becomes a ``StepField``,
``steps.complete`` a ``StatusCount``), so the compiler never sees raw dotted names. Nothing is evaluated here.

Limits are enforced while parsing, before the recursion they guard can happen, so hostile input ends in a
``ConditionSyntaxError`` naming the limit and never in ``RecursionError``.
"""

from __future__ import annotations

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

_STEP_FIELDS = "'.status', '.id' or '.output'"
_AGGREGATE_KINDS = ("all", "any", "count")
_COMPARISONS: dict[str, ast.CompareOp] = {op: op for op in ("==", "!=", "<", "<=", ">", ">=")}
_FIELDS: dict[str, ast.StepFieldName] = {"status": "status", "id": "id", "output": "output"}
_KINDS: dict[str, ast.AggregateKind] = {"all": "all", "any": "any", "count": "count"}
_SCOPES: dict[str, ast.AggregateScope] = {"children": "children", "descendants": "descendants"}
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
    __slots__ = ("_depth", "_heights", "_nodes", "_pos", "_text", "_tokens")

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = tokenize(text)
        self._pos = 0
        self._depth = 0  # open parentheses, ``not``s and aggregate predicates around the current token
        self._nodes = 0
        self._heights: dict[int, int] = {}  # id(node) -> height of its subtree; leaves are absent (1)

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
        return self._chain(OR, ast.Or, self._and)

    def _and(self) -> ast.Expr:
        return self._chain(AND, ast.And, self._not)

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
        return self._composite(node, left, right)

    def _operand(self) -> ast.Expr:
        token = self._tokens[self._pos]
        handler = _OPERANDS.get(token.kind)
        if handler is None:
            self._fail(self._value_expected(), token)
        self._pos += 1
        return handler(self, token)

    def _chain(
        self, kind: str, node_type: type[ast.And | ast.Or], tighter: Callable[[], ast.Expr]
    ) -> ast.Expr:
        first = tighter()
        tokens = self._tokens
        if tokens[self._pos].kind != kind:
            return first
        operands = [first]
        while tokens[self._pos].kind == kind:
            self._pos += 1
            operands.append(tighter())
        return self._composite(node_type(tuple(operands), position=first.position), *operands)

    # -- operands --------------------------------------------------------------------------------------------

    def _literal(self, token: Token) -> ast.Expr:
        return self._leaf(ast.Literal(token.value, position=token.position))

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
        special = _NAMES.get(token.text)
        if special is not None:
            return special(self, token)
        self._expect(DOT, "{} after step '{}'", _STEP_FIELDS, token.text)
        return self._step_field(token.text, token)

    def _focus_field(self, token: Token) -> ast.Expr:
        # ``status``, ``id`` and ``output...`` on their own: fields of the step in focus.
        field = _FIELDS[token.text]
        path = self._keys() if field == "output" else ()
        return self._leaf(ast.StepField(None, field, path, position=token.position))

    def _step(self, token: Token) -> ast.Expr:
        self._expect(DOT, "{} after 'step'", _STEP_FIELDS)
        return self._step_field(None, token)

    def _step_field(self, step: str | None, start: Token) -> ast.Expr:
        token = self._tokens[self._pos]
        field = _FIELDS.get(token.text) if token.kind == NAME else None
        if field is None:
            self._fail(f"'status', 'id' or 'output' after '{start.text}.'", token)
        self._pos += 1
        path = self._keys() if field == "output" else ()
        return self._leaf(ast.StepField(step, field, path, position=start.position))

    def _keys(self) -> tuple[str, ...]:
        tokens = self._tokens
        if tokens[self._pos].kind != DOT:
            return ()
        keys: list[str] = []
        while tokens[self._pos].kind == DOT:
            self._pos += 1
            token = tokens[self._pos]
            if token.kind not in _KEY_KINDS or (not token.text[0].isalpha() and token.text[0] != "_"):
                self._fail(f"an output key after '{tokens[self._pos - 2].text}.'", token)
            keys.append(token.text)
            self._pos += 1
            if len(keys) > MAX_DEPTH:
                self._too_deep(token.position)
        return tuple(keys)

    def _vars(self, token: Token) -> ast.Expr:
        return self._leaf(ast.VarRef(self._single_name(token, "a variable name"), position=token.position))

    def _env(self, token: Token) -> ast.Expr:
        name = self._single_name(token, "an environment variable name")
        return self._leaf(ast.EnvRef(name, position=token.position))

    def _single_name(self, start: Token, what: str) -> str:
        self._expect(DOT, "'.' and {} after '{}'", what, start.text)
        return self._expect(NAME, "{} after '{}.'", what, start.text).text

    def _file(self, token: Token) -> ast.Expr:
        self._expect(DOT, "'.exists(' after 'file'")
        word = self._tokens[self._pos]
        if word.kind != NAME or word.text != "exists":
            self._fail("'exists' after 'file.'", word)
        self._pos += 1
        self._expect(LPAREN, "'(' after 'file.exists'")
        path = self._expect(STRING, "a quoted path after 'file.exists('")
        self._expect(RPAREN, "')' after the path of file.exists")
        return self._leaf(ast.FileExists(str(path.value), position=token.position))

    def _steps(self, token: Token) -> ast.Expr:
        self._expect(DOT, "'.all(', '.any(', '.count(' or '.<status>' after 'steps'")
        word = self._tokens[self._pos]
        if word.kind == NAME and word.text in ast.STATUSES:
            self._pos += 1
            return self._leaf(ast.StatusCount(word.text, position=token.position))
        if word.kind != NAME or word.text not in _AGGREGATE_KINDS:
            statuses = ", ".join(ast.STATUSES)
            self._fail(f"all, any, count or a step status ({statuses}) after 'steps.'", word)
        return self._aggregate("steps", None, token)

    def _scoped(self, token: Token) -> ast.Expr:
        # ``children(x)`` / ``descendants(x)``; ``step`` as x means the step in focus.
        name = token.text
        self._expect(LPAREN, "'(' after '{}'", name)
        parent = self._expect(NAME, "a step id after '{}('", name).text
        self._expect(RPAREN, "')' after '{}({}'", name, parent)
        self._expect(DOT, "'.all(', '.any(' or '.count(' after '{}({})'", name, parent)
        word = self._tokens[self._pos]
        if word.kind != NAME or word.text not in _AGGREGATE_KINDS:
            self._fail(f"all, any or count after '{name}({parent}).'", word)
        return self._aggregate(_SCOPES[name], None if parent == "step" else parent, token)

    def _aggregate(self, scope: ast.AggregateScope, step: str | None, start: Token) -> ast.Expr:
        word = self._tokens[self._pos]
        self._pos += 1
        opening = self._expect(LPAREN, "'(' after '{}'", word.text)
        self._enter(opening)
        predicate = self._or()
        if self._tokens[self._pos].kind != RPAREN:
            hint = f"the '{word.text}(' at column {opening.position + 1} is not closed"
            self._fail("')'", self._tokens[self._pos], hint)
        self._pos += 1
        self._depth -= 1
        node = ast.Aggregate(_KINDS[word.text], scope, step, predicate, position=start.position)
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


_Handler = Callable[[_Parser, Token], ast.Expr]

# What a token means where an operand is expected.
_OPERANDS: dict[str, _Handler] = {
    STRING: _Parser._literal,
    NUMBER: _Parser._literal,
    CONST: _Parser._literal,
    LPAREN: _Parser._group,
    NAME: _Parser._name,
}

# Names with a meaning of their own at the start of a reference; any other name is a step id.
_NAMES: dict[str, _Handler] = {
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
}

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "MAX_NODES", "parse"]
