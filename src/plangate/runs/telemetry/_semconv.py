"""The names of the OpenTelemetry GenAI semantic conventions plangate's spans use, and plangate's own, in one
place (the conventions are still "Development": a rename is one edit here).

``OTEL_SEMCONV_STABILITY_OPT_IN`` containing ``gen_ai_latest_experimental`` switches to the latest names
(``gen_ai.provider.name`` instead of ``gen_ai.system``); without it the names of v1.36 and before are kept, as
the conventions ask of instrumentations.
"""

from __future__ import annotations

import os

OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST = "gen_ai_latest_experimental"

OPERATION = "gen_ai.operation.name"
SYSTEM = "gen_ai.system"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

CHAT = "chat"
INVOKE_AGENT = "invoke_agent"
INVOKE_WORKFLOW = "invoke_workflow"
EXECUTE_TOOL = "execute_tool"

# plangate's own facts, under one prefix.
PREFIX = "plangate."
RUN_ID = "plangate.run.id"
RUN_KIND = "plangate.run.kind"
PURPOSE = "plangate.model.purpose"
ROUND = "plangate.round"
DECISION_ACTION = "plangate.decision.action"
VALIDATION = "plangate.validation.verdict"
TOOL_STATUS = "plangate.tool.status"
TOOL_SUCCESS = "plangate.tool.success"
TOOL_EFFECT_SUMMARY = "plangate.tool.summary"
WAIT_KIND = "plangate.wait.kind"
WAIT_RESOLUTION = "plangate.wait.resolution"
CONSENT_BY = "plangate.consent.by"
CONSENT_AT = "plangate.consent.at"
CONSENT_DIGEST = "plangate.consent.arguments_digest"
RECEIPT_STEP = "plangate.receipt.step_index"
OUTCOME_STATUS = "plangate.outcome.status"
OUTCOME_CODE = "plangate.outcome.code"
COST = "plangate.usage.cost"
STEP_ID = "plangate.step.id"
STEP_STATUS = "plangate.step.status"
COPILOT_PHASE = "plangate.copilot.phase"
COPILOT_ATTEMPT = "plangate.copilot.attempt"
COPILOT_STATUS = "plangate.copilot.status"
COPILOT_DETAIL = "plangate.copilot.detail"

WAIT_SPAN = "plangate.wait"
STEP_SPAN = "plangate.step"
COPILOT_SPAN = "plangate.copilot"


def latest() -> bool:
    """Whether the operator asked for the latest experimental GenAI names."""
    chosen = {part.strip() for part in os.environ.get(OPT_IN, "").split(",")}
    return LATEST in chosen


def provider_key() -> str:
    """The attribute that names the model's provider, by the chosen version of the conventions."""
    return PROVIDER if latest() else SYSTEM
