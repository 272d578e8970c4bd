"""Model providers behind one protocol: stream a chat, with an optional response schema.

What it is for: the ``Model`` protocol and its request and chunk types (``base``), ``complete`` to drain a
stream, the test doubles ``ScriptedModel`` (replays answers, for tests and offline demos), ``TestModel``
(derives its answers from the tools' schemas) and ``FunctionModel`` (a function of the request), the
provider errors, and ``resolve_model`` to pick a provider from a spec such as ``openai:gpt-4o-mini``. The
``openai`` and ``anthropic`` providers live in their own modules and need their extras
(``pip install "plangate[openai]"``); import them from ``plangate.models.openai`` /
``plangate.models.anthropic`` or let ``resolve_model`` do it.
What it is not for: prompts, decisions or retries of a bad answer (the agent runtime).
"""

from __future__ import annotations

from plangate.models.base import (
    Completion,
    Message,
    Model,
    ModelChunk,
    ModelRequest,
    ModelWrapper,
    Purpose,
    ReasoningDelta,
    ResponseSchema,
    Role,
    TextDelta,
    Usage,
    Wire,
    complete,
    wants_compact_prompts,
)
from plangate.models.errors import (
    ModelAuthenticationError,
    ModelProviderError,
    ModelRateLimitError,
    ModelRequestError,
    ModelTimeoutError,
    ModelUnavailableError,
    ScriptExhaustedError,
)
from plangate.models.registry import PROVIDERS, ProviderFactory, resolve_model
from plangate.models.scripted import Script, ScriptedModel
from plangate.models.testing import FunctionModel, ModelFunction, TestModel, arguments_for

__all__ = [
    "PROVIDERS",
    "Completion",
    "FunctionModel",
    "Message",
    "Model",
    "ModelAuthenticationError",
    "ModelChunk",
    "ModelFunction",
    "ModelProviderError",
    "ModelRateLimitError",
    "ModelRequest",
    "ModelRequestError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "ModelWrapper",
    "ProviderFactory",
    "Purpose",
    "ReasoningDelta",
    "ResponseSchema",
    "Role",
    "Script",
    "ScriptExhaustedError",
    "ScriptedModel",
    "TestModel",
    "TextDelta",
    "Usage",
    "Wire",
    "arguments_for",
    "complete",
    "resolve_model",
    "wants_compact_prompts",
]
