"""Errors raised by the tool registry when a tool is defined or called wrongly.

These are the exceptions of ``plangate.tools``; a tool that fails while running is not an exception here but a
``failed`` :class:`~plangate.tools.result.ToolResult`, so the agent loop never crashes on a tool.
"""

from __future__ import annotations

from dataclasses import dataclass

from plangate.errors import ConfigError, UserError


@dataclass(frozen=True, slots=True)
class ArgumentIssue:
    """One problem with a tool call's arguments.

    Attributes:
        path: where the problem is, starting at ``arguments`` (``arguments.moves[1].slot``).
        message: what was expected and what was found (``expected an integer, got 'nine'``).
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ToolArgumentsError(UserError):
    """A tool call's arguments do not match the tool's parameter schema.

    Attributes:
        tool: the tool's name.
        issues: every problem found, in the order the validator reported them.
    """

    def __init__(self, tool: str, issues: list[ArgumentIssue]) -> None:
        self.tool = tool
        self.issues = issues
        super().__init__("; ".join(str(issue) for issue in issues))


class UnknownToolError(UserError):
    """No tool of that name is registered.

    Attributes:
        name: the name that was asked for.
        suggestion: the closest registered name, when one is close enough.
    """

    def __init__(self, name: str, suggestion: str | None) -> None:
        self.name = name
        self.suggestion = suggestion
        hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
        super().__init__(f"unknown tool {name!r}{hint}")


class ToolDefinitionError(ConfigError):
    """A tool cannot be built from what was given (a bad name, an unsupported parameter, a bad effect)."""


__all__ = ["ArgumentIssue", "ToolArgumentsError", "ToolDefinitionError", "UnknownToolError"]
