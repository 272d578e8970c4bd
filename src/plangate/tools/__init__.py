"""Tools: definitions (``@tool``), the registry, per-run toolsets, results and the built-in toolkits.

The runtime asks this package three things about a call: does the tool exist and is it active (``Toolset``),
are its arguments valid (``Tool.validate``), and does it need consent (``needs_consent``). Running a call
always yields a ``ToolResult``; a failing tool never raises into the agent loop.
"""

from __future__ import annotations

from plangate.tools.context import DepsT, RunContext, deps_scope
from plangate.tools.errors import ArgumentIssue, ToolArgumentsError, ToolDefinitionError, UnknownToolError
from plangate.tools.registry import ToolRegistry, canonical_json, digest_json, needs_consent
from plangate.tools.result import (
    OUTCOME_UNKNOWN,
    SUMMARY_LIMIT,
    ToolResult,
    ToolStatus,
    clip_summary,
    result_from_value,
)
from plangate.tools.tool import Effect, Reconciler, Tool, ToolCallContext, current_call, tool
from plangate.tools.toolset import ADD_TOOL, REMOVE_TOOL, PackRef, Toolset, ToolsetState

__all__ = [
    "ADD_TOOL",
    "OUTCOME_UNKNOWN",
    "REMOVE_TOOL",
    "SUMMARY_LIMIT",
    "ArgumentIssue",
    "DepsT",
    "Effect",
    "PackRef",
    "Reconciler",
    "RunContext",
    "Tool",
    "ToolArgumentsError",
    "ToolCallContext",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "ToolStatus",
    "Toolset",
    "ToolsetState",
    "UnknownToolError",
    "canonical_json",
    "clip_summary",
    "current_call",
    "deps_scope",
    "digest_json",
    "needs_consent",
    "result_from_value",
    "tool",
]
