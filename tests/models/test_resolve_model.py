"""resolve_model: provider specs, PLANGATE_MODEL, the local and scripted entries, and clear config errors."""

from __future__ import annotations

import sys
import types

import pytest

from plangate.errors import ConfigError
from plangate.models import PROVIDERS, Model, ScriptedModel, resolve_model
from plangate.models.registry import default_model_spec


def test_a_model_instance_is_returned_as_is() -> None:
    model = ScriptedModel([])
    assert resolve_model(model) is model


def test_openai_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    model = resolve_model("openai:gpt-4o-mini")
    assert (model.name, model.wire) == ("openai:gpt-4o-mini", "json")
    # Ollama-style ids keep their own colon.
    assert resolve_model(" OpenAI:qwen2.5:7b ").name == "openai:qwen2.5:7b"


def test_anthropic_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-123456")
    model = resolve_model("anthropic:claude-sonnet-4-5")
    assert (model.name, model.wire) == ("anthropic:claude-sonnet-4-5", "tagged")


def test_plangate_model_is_read_when_no_spec_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    monkeypatch.setenv("PLANGATE_MODEL", "openai:gpt-4o-mini")
    assert resolve_model().name == "openai:gpt-4o-mini"
    assert resolve_model(None).name == "openai:gpt-4o-mini"


def test_no_spec_and_no_key_defaults_to_the_offline_local_model() -> None:
    assert default_model_spec()[0] == "local"


def test_unknown_provider_lists_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_model("gemini:pro")
    assert str(info.value) == (
        "'gemini:pro': unknown model provider 'gemini', expected one of anthropic, local, openai, scripted"
    )
    monkeypatch.setenv("PLANGATE_MODEL", "gpt-4o")
    with pytest.raises(ConfigError, match=r"^PLANGATE_MODEL='gpt-4o': unknown model provider 'gpt-4o'"):
        resolve_model()


def test_a_missing_model_id_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError, match=r"expected a model id after 'openai:' \(e.g. 'openai:gpt-4o-mini'\)"
    ):
        resolve_model("openai")
    with pytest.raises(ConfigError, match="expected a model id after 'anthropic:'"):
        resolve_model("anthropic:")


def test_errors_from_the_environment_say_where_the_spec_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANGATE_MODEL", "openai:gpt-4o-mini")
    with pytest.raises(ConfigError) as info:
        resolve_model()
    assert str(info.value) == (
        "PLANGATE_MODEL='openai:gpt-4o-mini': openai:gpt-4o-mini needs an API key: "
        "set OPENAI_API_KEY or pass api_key="
    )


def test_scripted_needs_its_responses_in_code() -> None:
    with pytest.raises(ConfigError, match=r"build ScriptedModel\(\[\.\.\.\]\)"):
        resolve_model("scripted")


def test_local_without_its_module_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plangate.models.local", None)
    with pytest.raises(ConfigError) as info:
        resolve_model("local")
    assert str(info.value) == 'the local model needs pip install "plangate[local]"'


def test_local_uses_the_module_when_it_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("plangate.models.local")
    module.create_model = lambda model_id: ScriptedModel([], name=f"local:{model_id or 'default'}")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "plangate.models.local", module)
    assert resolve_model("local").name == "local:default"
    assert resolve_model("local:smollm2").name == "local:smollm2"


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "plangate.models.openai", raising=False)
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigError) as info:
        resolve_model("openai:gpt-4o-mini")
    assert str(info.value) == 'the openai provider needs the OpenAI SDK: pip install "plangate[openai]"'
    monkeypatch.delitem(sys.modules, "plangate.models.anthropic", raising=False)
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ConfigError, match=r'pip install "plangate\[anthropic\]"'):
        resolve_model("anthropic:claude-sonnet-4-5")


def test_a_provider_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    def echo(model_id: str) -> Model:
        return ScriptedModel(lambda request: request.messages[-1].content, name=f"echo:{model_id}")

    monkeypatch.setitem(PROVIDERS, "echo", echo)
    assert resolve_model("echo:v1").name == "echo:v1"


def test_a_spec_of_the_wrong_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="expected a spec such as 'openai:gpt-4o-mini' or a Model, got int"):
        resolve_model(42)  # type: ignore[arg-type]
