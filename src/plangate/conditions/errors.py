"""The one error the condition language raises: an expression that cannot be compiled.

For parse-time problems only (bad characters, bad grammar, exceeded limits). Evaluation never raises: a
problem found while evaluating becomes an unsatisfied result with a reason instead.
"""

from __future__ import annotations

from plangate.errors import UserError

# How much of a long expression ``render`` shows on each side of the caret.
_WINDOW = 60


class ConditionSyntaxError(UserError):
    """A condition expression does not lex, parse or fit the limits.

    The message says what was expected, what was found and where, for example
    ``expected a value after '==' at column 16, found end of input``. Columns in messages count from 1, as
    editors do; ``position`` is the 0-based index into ``expression``.

    Attributes:
        expression: the full expression text.
        position: 0-based index of the offending character (``len(expression)`` at the end of input).
        expected: what the parser was looking for, in words (``a value after '=='``).
        found: what it found instead, in words (``'foo'``, ``end of input``).
        message: the full message; ``hint`` (a keyword argument) is appended to it in parentheses.
    """

    def __init__(
        self,
        expression: str,
        position: int,
        expected: str,
        found: str,
        *,
        hint: str = "",
        message: str | None = None,
    ) -> None:
        self.expression = expression
        self.position = position
        self.expected = expected
        self.found = found
        if message is None:
            message = f"expected {expected} at column {position + 1}, found {found}"
            if hint:
                message += f" ({hint})"
        self.message = message
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only ``message`` would otherwise be lost when the error crosses a process boundary.
        return (_rebuild, (self.expression, self.position, self.expected, self.found, self.message))

    def render(self) -> str:
        """Return the expression with a caret under the offending column, then the message.

        Long expressions are cut to a window around the column; tabs, line breaks and other unprintable
        characters are shown as spaces so the caret stays aligned.
        """
        return f"{caret_lines(self.expression, self.position)}\n{self.message}"


def _rebuild(expression: str, position: int, expected: str, found: str, message: str) -> ConditionSyntaxError:
    return ConditionSyntaxError(expression, position, expected, found, message=message)


def caret_lines(expression: str, position: int) -> str:
    """Return two lines: ``expression`` (or a window of it) and a caret under ``position``.

    Args:
        expression: the source text.
        position: 0-based index to point at; clamped to the text (the end of input is one past the last
            character).
    """
    position = max(0, min(position, len(expression)))
    start = max(0, position - _WINDOW)
    end = min(len(expression), position + _WINDOW)
    prefix = "..." if start > 0 else ""
    suffix = "..." if end < len(expression) else ""
    # Unprintable characters (tabs, line breaks, controls) become spaces so the caret stays in its column.
    shown = "".join(ch if ch.isprintable() else " " for ch in expression[start:end])
    caret = " " * (len(prefix) + position - start) + "^"
    return f"{prefix}{shown}{suffix}\n{caret}"


__all__ = ["ConditionSyntaxError", "caret_lines"]
