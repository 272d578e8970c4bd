"""Choosing a model from a spec: ``openai:gpt-4o-mini``, ``anthropic:<id>``, ``local``, ``scripted:<file>``.

A hosted provider's spec may end with options, as a URL query: ``openai:qwen2.5:7b?format=json_object``
(the structured-output format, see ``plangate.models.openai``) and ``?timeout=30`` (seconds a request may
wait for the server; default ``$PLANGATE_MODEL_TIMEOUT``, else 120), for ``openai`` and ``anthropic``.
The model's name keeps them, so a resumed run rebuilds the same model.

What it is for: ``resolve_model`` and the registry ``PROVIDERS`` (provider name → factory of the model id),
so a run can store only the spec and rebuild its model on resume. Providers are imported only when chosen,
so a missing SDK is a ``ConfigError`` naming the extra to install, not an import failure at start-up.
What it is not for: configuring a provider beyond its environment (build the model yourself and pass the
instance for that).

Adding a provider is one line: ``PROVIDERS["name"] = factory``. The ``local`` entry looks for a module
``plangate.models.local`` that defines ``create_model(model_id: str) -> Model``.

The default model (``resolve_model(None)``), first rule that applies:

1. ``PLANGATE_MODEL``, when set;
2. ``openai:gpt-4o-mini`` when ``OPENAI_API_KEY`` is set (checked first when both keys are);
3. ``anthropic:claude-haiku-4-5`` when ``ANTHROPIC_API_KEY`` is set;
4. ``local``: the small model that runs offline, so a machine with no key still works.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import parse_qsl

from plangate.errors import ConfigError
from plangate.models.base import Model

ProviderFactory = Callable[[str], Model]
"""Builds a model from the id after ``provider:`` (``""`` when the spec has none)."""

ENV_VAR = "PLANGATE_MODEL"

DEFAULT_OPENAI_MODEL = "openai:gpt-4o-mini"
"""The default when only ``OPENAI_API_KEY`` is set: small, cheap, with structured outputs."""

DEFAULT_ANTHROPIC_MODEL = "anthropic:claude-haiku-4-5"
"""The default when only ``ANTHROPIC_API_KEY`` is set: Anthropic's small, fast current model."""

# Keys whose presence picks a hosted default; checked in this order.
_KEYED_DEFAULTS = (("OPENAI_API_KEY", DEFAULT_OPENAI_MODEL), ("ANTHROPIC_API_KEY", DEFAULT_ANTHROPIC_MODEL))

_LOCAL_MODULE = "plangate.models.local"


def _needs_id(provider: str, model_id: str, example: str) -> str:
    if not model_id:
        raise ConfigError(f"expected a model id after '{provider}:' (e.g. '{provider}:{example}')")
    return model_id


def spec_options(provider: str, model_id: str, allowed: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """Split ``model?key=value&…`` into the model id and its options.

    Raises:
        ConfigError: an option that is not in ``allowed``, given twice, or without a value.
    """
    model, sep, query = model_id.partition("?")
    if not sep:
        return model, {}
    where = f"{provider}:{model_id}"
    options: dict[str, str] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ConfigError(f"{where}: expected options as key=value&key=value after '?'") from None
    for key, value in pairs:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown option {key!r} (expected {', '.join(allowed)})")
        if key in options:
            raise ConfigError(f"{where}: the option {key!r} is given twice")
        if not value.strip():
            raise ConfigError(f"{where}: the option {key!r} needs a value")
        options[key] = value.strip()
    return model, options


def _seconds(where: str, raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{where}: timeout: expected a number of seconds, got {raw!r}") from None


def _openai(model_id: str) -> Model:
    from plangate.models.openai import OpenAIModel, format_choice

    model, options = spec_options("openai", model_id, ("format", "timeout"))
    where = f"openai:{model_id}"
    chosen = format_choice(options["format"], where=f"{where}: format") if "format" in options else None
    return OpenAIModel(
        _needs_id("openai", model, "gpt-4o-mini"),
        format=chosen,
        timeout=_seconds(where, options.get("timeout")),
        name=f"openai:{model_id}",
    )


def _anthropic(model_id: str) -> Model:
    from plangate.models.anthropic import AnthropicModel

    model, options = spec_options("anthropic", model_id, ("timeout",))
    return AnthropicModel(
        _needs_id("anthropic", model, "claude-sonnet-4-5"),
        timeout=_seconds(f"anthropic:{model_id}", options.get("timeout")),
        name=f"anthropic:{model_id}",
    )


def _scripted(model_id: str) -> Model:
    if not model_id:
        raise ConfigError(
            "the scripted model replays responses written in code: build ScriptedModel([...]) "
            "(from plangate.models) and pass the instance instead of the name 'scripted', or name a JSON "
            "file of responses: 'scripted:path/to/responses.json'"
        )
    return _scripted_file(model_id)


def _scripted_file(path: str) -> Model:
    """``scripted:<file>``: a JSON list of responses, or ``{"wire": "json" | "tagged", "responses": [...]}``.

    For the command line and offline demos; the model is named after the file. A new run replays it from
    the first response; a stored run that started with it, resumed with it again (``plangate approve`` in
    another process), goes on from the run's next unused response (``follows_runs``).
    """
    from plangate.models.scripted import ScriptedModel

    where = f"scripted:{path}"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the responses file: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{where}: expected a JSON list of response strings; {exc}") from None
    wire: object = "json"
    if isinstance(data, dict):
        wire, data = data.get("wire", "json"), data.get("responses")
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise ConfigError(f'{where}: expected a JSON list of response strings (or {{"responses": [...]}})')
    if wire not in ("json", "tagged"):
        raise ConfigError(f"{where}: wire: expected 'json' or 'tagged', got {wire!r}")
    return ScriptedModel(data, wire="tagged" if wire == "tagged" else "json", name=where, follows_runs=True)


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


def default_model_spec(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The spec ``resolve_model(None)`` uses, and why (the module docstring gives the rule).

    Args:
        environ: the environment to read; default the process environment.

    Returns:
        ``(spec, origin)``: the spec, and where it came from (``PLANGATE_MODEL``, ``OPENAI_API_KEY``,
        ``ANTHROPIC_API_KEY``, or ``no API key`` for the local model).
    """
    env = os.environ if environ is None else environ
    chosen = env.get(ENV_VAR, "")
    if chosen.strip():
        return chosen, ENV_VAR
    for key, spec in _KEYED_DEFAULTS:
        if env.get(key, "").strip():
            return spec, key
    return "local", "no API key"


def describe_model(model: Model) -> str:
    """A one-line, human description of ``model``, for the CLI and logs.

    A model may describe itself with a ``description`` string attribute (the local model says
    ``local (SmolLM2-135M-Instruct, Q4_1, offline)``); otherwise its name is used.
    """
    description = getattr(model, "description", None)
    if isinstance(description, str) and description.strip():
        return description
    return model.name


def resolve_model(spec: str | Model | None = None) -> Model:
    """The model a spec names.

    Args:
        spec: a ``Model`` (returned as is), a spec string ``provider[:model-id]`` (``openai:gpt-4o-mini``,
            ``openai:qwen2.5:7b``, ``local``), or ``None`` for the default model (``PLANGATE_MODEL``, else
            a hosted model whose API key is set, else ``local``; see ``default_model_spec``).

    Raises:
        ConfigError: an unknown provider (the message lists the known ones), a missing model id, a missing
            SDK or model package, or a missing API key. An error for a default model says where it came
            from (``PLANGATE_MODEL='…': …``).
    """
    if isinstance(spec, Model):
        return spec
    origin = ""
    if spec is None:
        spec, source = default_model_spec()
        origin = f"{ENV_VAR}=" if source == ENV_VAR else f"default model ({source}) "
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


__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "ENV_VAR",
    "PROVIDERS",
    "ProviderFactory",
    "default_model_spec",
    "describe_model",
    "resolve_model",
    "spec_options",
]
