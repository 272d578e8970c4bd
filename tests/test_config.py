"""plangate.toml: where it is found, what it holds, and how each mistake is reported at its path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import plangate.config
from plangate.config import (
    CONFIG_ENV,
    Config,
    ConfigFileError,
    ConfigIssue,
    McpServerConfig,
    format_path,
    load_config,
    parse_config,
)
from plangate.errors import ConfigError

FULL = """
model = "openai:gpt-4o-mini"
store = "sqlite:///.plangate/plangate.db"
tools = ["myapp.tools:registry", "other:make_tools"]

[[mcp]]
name = "files"
command = "npx"
args = ["-y", "server-filesystem", "."]
env = { ROOT = "/srv" }
[mcp.effects]
read_file = "read"

[[mcp]]
name = "search"
command = "search-server"
effect_default = "read"
domain = "web"
timeout = 20
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problem(text: str) -> ConfigFileError:
    with pytest.raises(ConfigFileError) as caught:
        parse_config(textwrap.dedent(text))
    assert isinstance(caught.value, ConfigError)
    # A message for a person: no chained exception, so no traceback of pydantic or tomllib internals.
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None or caught.value.__suppress_context__
    return caught.value


# -- finding the file ----------------------------------------------------------------------------------------


def test_a_file_given_by_path_is_read_whole(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "custom.toml", FULL), environ={})
    assert (config.model, config.store) == ("openai:gpt-4o-mini", "sqlite:///.plangate/plangate.db")
    assert config.tools == ["myapp.tools:registry", "other:make_tools"]
    files, search = config.mcp
    assert (files.name, files.command, files.args, files.env) == (
        "files",
        "npx",
        ["-y", "server-filesystem", "."],
        {"ROOT": "/srv"},
    )
    assert (files.effect_default, files.tool_domain, files.timeout) == ("write", "files", None)
    assert (files.effect_for("read_file"), files.effect_for("write_file")) == ("read", "write")
    assert (search.effect_for("anything"), search.tool_domain, search.timeout) == ("read", "web", 20.0)
    assert config.source == tmp_path / "custom.toml"


def test_the_environment_names_the_file_when_no_path_is_given(tmp_path: Path) -> None:
    named = write(tmp_path / "from-env.toml", 'model = "local"')
    assert load_config(environ={CONFIG_ENV: str(named)}).model == "local"
    given = write(tmp_path / "given.toml", 'model = "scripted"')
    assert load_config(given, environ={CONFIG_ENV: str(named)}).model == "scripted"


def test_plangate_toml_in_the_working_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(environ={}) == Config()
    assert load_config(environ={}).source is None
    write(tmp_path / "plangate.toml", 'store = ":memory:"')
    config = load_config(environ={CONFIG_ENV: ""})
    assert (config.store, config.source) == (":memory:", Path("plangate.toml"))


def test_a_named_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigFileError) as caught:
        load_config(missing, environ={})
    assert str(caught.value) == f"{missing}: expected a plangate.toml config file, found nothing there"
    with pytest.raises(ConfigFileError) as via_env:
        load_config(environ={CONFIG_ENV: str(missing)})
    assert str(via_env.value) == (
        f"{missing} ({CONFIG_ENV}={missing}): expected a plangate.toml config file, found nothing there"
    )
    with pytest.raises(ConfigFileError, match="found a directory there"):
        load_config(tmp_path, environ={})


def test_a_file_that_is_not_text_cannot_be_read(tmp_path: Path) -> None:
    binary = tmp_path / "plangate.toml"
    binary.write_bytes(b"model = '\xff\xfe'")
    with pytest.raises(ConfigFileError, match=r"plangate.toml: cannot be read: 'utf-8' codec can't decode"):
        load_config(binary, environ={})


def test_the_module_example_is_a_valid_file() -> None:
    doc = plangate.config.__doc__ or ""
    example = textwrap.dedent(doc.split("Example file::\n", 1)[1])
    config = parse_config(example)
    assert [server.name for server in config.mcp] == ["files"]
    assert config.mcp[0].effect_for("list_directory") == "read"


# -- reporting mistakes --------------------------------------------------------------------------------------


def test_a_misspelt_field_is_named_with_the_likely_one() -> None:
    found = problem(
        """
        [[mcp]]
        name = "files"
        command = "npx"
        efect_default = "read"
        """
    )
    assert str(found) == "plangate.toml: mcp[0].efect_default: unknown field (did you mean 'effect_default'?)"
    assert found.issues == [
        ConfigIssue("mcp[0].efect_default", "unknown field (did you mean 'effect_default'?)")
    ]
    assert found.source == "plangate.toml"


def test_an_unknown_field_with_no_likely_match_lists_the_known_ones() -> None:
    assert str(problem("colour = 'blue'")) == (
        "plangate.toml: colour: unknown field (expected one of: model, store, tools, model_timeout, "
        "mcp_timeout, mcp, data, sources, prices, budget, telemetry, retention, schedules, limits, webhooks)"
    )


def test_every_problem_is_listed_at_its_path() -> None:
    found = problem(
        """
        model = 3
        tools = ["not a spec"]
        [[mcp]]
        name = "my server"
        effect_default = "raed"
        timeout = 0
        [mcp.effects]
        "tool.with.dots" = "writ"
        """
    )
    assert str(found).splitlines() == [
        "plangate.toml: 7 problems:",
        "  model: expected a string, got 3",
        "  tools[0]: expected 'module:attribute' or 'file.py:attribute' (e.g. 'myapp.tools:registry'), "
        "got 'not a spec'",
        "  mcp[0].name: expected 1-32 letters, digits, '_' or '-', got 'my server'",
        "  mcp[0].command: required, but missing",
        "  mcp[0].effect_default: expected 'read' or 'write', got 'raed'",
        "  mcp[0].effects.\"tool.with.dots\": expected 'read' or 'write', got 'writ'",
        "  mcp[0].timeout: expected greater than 0, got 0",
    ]


def test_environment_values_are_never_repeated_in_messages() -> None:
    found = problem(
        """
        [[mcp]]
        name = "api"
        command = "api-server"
        env = { API_TOKEN = 123456789, OTHER = ["sk-secret"] }
        """
    )
    assert str(found).splitlines()[1:] == [
        "  mcp[0].env.API_TOKEN: expected a string",
        "  mcp[0].env.OTHER: expected a string",
    ]
    assert "123456789" not in str(found) and "sk-secret" not in str(found)
    server = McpServerConfig(name="api", command="x", env={"API_TOKEN": "sk-secret"})
    assert "sk-secret" not in repr(server)


def test_a_single_mcp_table_asks_for_double_brackets() -> None:
    assert str(problem('[mcp]\nname = "x"\ncommand = "y"')) == (
        "plangate.toml: mcp: expected an array, got a table "
        "(write [[mcp]], with two brackets, before each server)"
    )


def test_server_names_must_be_unique() -> None:
    found = problem(
        """
        [[mcp]]
        name = "files"
        command = "a"
        [[mcp]]
        name = "files"
        command = "b"
        """
    )
    assert str(found) == (
        "plangate.toml: mcp[1].name: the server name 'files' is taken by mcp[0]; names must be unique "
        "(they prefix the tool names)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model = ", r"plangate.toml: not valid TOML: Invalid value \(at end of document\)"),
        (
            "model = 'a'\nstore = nope",
            r"plangate.toml: not valid TOML: Invalid value \(at line 2, column 9\)",
        ),
        ('store = ""', "plangate.toml: store: expected a non-empty string"),
        ("mcp = [1]", "plangate.toml: mcp\\[0\\]: expected a table, got 1"),
    ],
)
def test_malformed_files(text: str, message: str) -> None:
    with pytest.raises(ConfigFileError, match=f"^{message}$"):
        parse_config(text)


def test_paths_quote_keys_that_are_not_bare() -> None:
    assert format_path(("mcp", 0, "effects", "a.b")) == 'mcp[0].effects."a.b"'
    assert format_path(("tools", 2)) == "tools[2]"
    assert format_path(()) == ""


def test_sources_and_the_data_perimeter_are_read_with_their_defaults() -> None:
    config = parse_config(
        """
        [data]
        dirs = ["data"]
        allow_client_urls = true
        allowed_hosts = ["db.internal", "10.0.0.0/8"]

        [[sources]]
        name = "warehouse"
        url_env = "WAREHOUSE_URL"
        schemas = ["sales"]

        [[sources]]
        name = "local"
        url = "data/local.db"
        allow_privileged = true
        """
    )
    assert config.data.allow_client_urls and config.data.allowed_hosts == ["db.internal", "10.0.0.0/8"]
    warehouse, local = config.sources
    assert warehouse.target({"WAREHOUSE_URL": "postgresql://r@db/w"}) == "postgresql://r@db/w"
    assert (warehouse.schemas, warehouse.allow_privileged) == (["sales"], False)
    assert (local.target({}), local.allow_privileged) == ("data/local.db", True)
    assert parse_config("").data.allow_client_urls is False and parse_config("").sources == []
    with pytest.raises(ConfigError, match=r"^data source 'warehouse': \$WAREHOUSE_URL is not set"):
        warehouse.target({})


def test_a_source_needs_exactly_one_of_url_and_url_env_and_a_unique_name() -> None:
    found = problem(
        """
        [[sources]]
        name = "a"
        [[sources]]
        name = "a"
        url = "postgresql://reader:s3cret@db/w"
        url_env = "W"
        """
    )
    assert str(found).splitlines()[1:] == [
        "  sources[1].name: the source name 'a' is taken by sources[0]; names must be unique (questions "
        "name a source by it)",
        "  sources[0]: expected exactly one of 'url' and 'url_env'",
        "  sources[1]: expected exactly one of 'url' and 'url_env'",
    ]
    bad = problem('[[sources]]\nname = "a"\nurl = 5')
    assert "s3cret" not in str(found) and str(bad).endswith("sources[0].url: expected a string")


def test_a_source_declares_its_semantic_layer_inline_or_as_a_file_beside_the_config(tmp_path: Path) -> None:
    from plangate.copilot._scope import open_scope
    from plangate.tools.data import DataSources

    shop = Path(__file__).resolve().parents[1] / "examples" / "data" / "shop.db"
    (tmp_path / "plangate.toml").write_text(
        f"""
[[sources]]
name = "inline"
url = "{shop}"
[sources.semantic.metrics]
units = "sum(order_items.quantity) where orders.status != 'cancelled'"

[[sources]]
name = "filed"
url = "{shop}"
semantic = "defs/shop.semantic.toml"
"""
    )
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "shop.semantic.toml").write_text('[metrics]\norders = "count(orders.order_id)"\n')
    config = load_config(tmp_path / "plangate.toml")
    inline, filed = config.sources
    assert config.semantic_of(filed) == tmp_path / "defs" / "shop.semantic.toml"
    for entry, metric in ((inline, "units"), (filed, "orders")):
        sources = DataSources()
        sources.register(entry.name, entry.target(), semantic=config.semantic_of(entry))
        scope = open_scope(entry.name, sources=sources)
        assert scope.semantic is not None and list(scope.semantic.metrics) == [metric]


def test_prices_budget_and_telemetry_are_read_with_their_defaults() -> None:
    config = parse_config(
        textwrap.dedent(
            """
            [prices."openai:gpt-4o-mini"]
            input = 0.15
            output = 0.6
            [budget]
            max_tokens = 5000
            [telemetry]
            traces = "otlp"
            endpoint = "http://127.0.0.1:6006"
            """
        )
    )
    price = config.prices["openai:gpt-4o-mini"]
    assert (price.input, price.output, price.cached_input) == (0.15, 0.6, None)
    assert (config.budget.max_tokens, config.budget.max_cost) == (5000, None)
    assert (config.telemetry.traces, config.telemetry.endpoint) == ("otlp", "http://127.0.0.1:6006")
    assert parse_config("").telemetry.traces == "none"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[prices.m]\ninput = -1\noutput = 1", "prices.m.input"),
        ("[prices.m]\ninput = 1", "prices.m.output"),
        ("[budget]\nmax_tokens = 0", "budget.max_tokens"),
        ('[telemetry]\ntraces = "jaeger"', "telemetry.traces"),
    ],
)
def test_a_bad_price_budget_or_telemetry_names_its_path(text: str, message: str) -> None:
    assert message in str(problem(text))
