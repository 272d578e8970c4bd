"""Choosing a model from a spec: ``openai:gpt-4o-mini``, ``anthropic:<model>``, ``local``, ``scripted``.

What it is for: ``resolve_model`` and the registry ``PROVIDERS`` (provider name → factory of the model id),
so a run can store only the spec and rebuild its model on resume. Providers are imported only when chosen,
so a missing SDK is a ``ConfigError`` naming the extra to install, not an import failure at start-up.
What it is not for: configuring a provider beyond its environment (build the model yourself and pass the
instance for that).

Adding a provider is one line: ``PROVIDERS["name"] = factory``. The ``local`` entry looks for a module
``plangate.models.local`` that defines ``create_model(model_id: str) -> Model``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from plangate.errors import ConfigError
from plangate.models.base import Model

ProviderFactory = Callable[[str], Model]
"""Builds a model from the id after ``provider:`` (``""`` when the spec has none)."""

ENV_VAR = "PLANGATE_MODEL"

_LOCAL_MODULE = "plangate.models.local"


def _needs_id(provider: str, model_id: str, example: str) -> str:
    if not model_id:
        raise ConfigError(f"expected a model id after '{provider}:' (e.g. '{provider}:{example}')")
    return model_id


def _openai(model_id: str) -> Model:
    from plangate.models.openai import OpenAIModel

    return OpenAIModel(_needs_id("openai", model_id, "gpt-4o-mini"))


def _anthropic(model_id: str) -> Model:
    from plangate.models.anthropic import AnthropicModel

    return AnthropicModel(_needs_id("anthropic", model_id, "claude-sonnet-4-5"))


def _scripted(model_id: str) -> Model:
    raise ConfigError(
        "the scripted model replays responses written in code: build ScriptedModel([...]) "
        "(from plangate.models) and pass the instance instead of the name 'scripted'"
    )


def _local(model_id: str) -> Model:
    try:
        module = importlib.import_module(_LOCAL_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != _LOCAL_MODULE:
            raise
        raise ConfigError('the local model needs pip install "plangate[local]"') from None
    create = getattr(module, "create_model", None)
    if not callable(create):
        raise ConfigError(f"{_LOCAL_MODULE} defines no create_model(model_id) function")
    model = create(model_id)
    if not isinstance(model, Model):
        raise ConfigError(f"{_LOCAL_MODULE}.create_model returned {type(model).__name__}, not a Model")
    return model


PROVIDERS: dict[str, ProviderFactory] = {
    "anthropic": _anthropic,
    "local": _local,
    "openai": _openai,
    "scripted": _scripted,
}
"""Provider name → factory. ``resolve_model`` reads it at each call, so entries added later count."""


def resolve_model(spec: str | Model | None = None) -> Model:
    """The model a spec names.

    Args:
        spec: a ``Model`` (returned as is), a spec string ``provider[:model-id]`` (``openai:gpt-4o-mini``,
            ``openai:qwen2.5:7b``, ``local``), or ``None`` to read ``PLANGATE_MODEL``.

    Raises:
        ConfigError: no spec and no ``PLANGATE_MODEL``, an unknown provider (the message lists the known
            ones), a missing model id, a missing SDK, or a missing API key.
    """
    if isinstance(spec, Model):
        return spec
    origin = ""
    if spec is None:
        spec = os.environ.get(ENV_VAR, "")
        if not spec.strip():
            raise ConfigError(f"no model given: pass a model or set {ENV_VAR} (e.g. openai:gpt-4o-mini)")
        origin = f"{ENV_VAR}="
    if not isinstance(spec, str):
        found = type(spec).__name__
        raise ConfigError(f"model: expected a spec such as 'openai:gpt-4o-mini' or a Model, got {found}")
    provider, _, model_id = spec.strip().partition(":")
    factory = PROVIDERS.get(provider.strip().lower())
    if factory is None:
        known = ", ".join(sorted(PROVIDERS))
        raise ConfigError(f"{origin}{spec!r}: unknown model provider {provider!r}, expected one of {known}")
    try:
        return factory(model_id.strip())
    except ConfigError as exc:
        if not origin:
            raise
        raise ConfigError(f"{origin}{spec!r}: {exc}") from None


__all__ = ["ENV_VAR", "PROVIDERS", "ProviderFactory", "resolve_model"]
