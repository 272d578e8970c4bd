"""plangate's configuration file, ``plangate.toml``: the model, the store, extra tools and MCP servers.

For: finding the file (a path given, else ``$PLANGATE_CONFIG``, else ``./plangate.toml``), parsing it and
validating it into a typed :class:`Config`, with every problem reported at its path
(``mcp[0].efect_default: unknown field (did you mean 'effect_default'?)``) as a ``ConfigError``, never as a
traceback. Not for: acting on the settings (the command line applies them in ``cli/_loading.py``; the MCP
servers start in ``tools/mcp.py``; stores open in ``store/url.py``; models resolve in ``plangate.models``).

Relative paths in a file (a SQLite store, a ``tools`` file, an MCP server's working directory) are relative
to the file's folder. Example file::

    model = "openai:gpt-4o-mini"
    store = "sqlite:///.plangate/plangate.db"
    tools = ["myapp.tools:registry", "tools/local.py:registry"]
    model_timeout = 120                  # seconds a model request may wait for the server
    mcp_timeout = 60                     # seconds an MCP tool call may take (each server may say otherwise)

    [[mcp]]
    name = "files"
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    effect_default = "write"
    [mcp.effects]
    read_file = "read"
    list_directory = "read"

    [data]                               # what a server's clients may register (POST /v1/sources)
    dirs = ["data"]                      # SQLite files under these folders (plangate serve --data-dir)
    allow_client_urls = false            # postgresql:// URLs from clients: off unless turned on here
    allowed_hosts = ["db.internal"]      # and then only to these hosts (names, globs, host:port, networks)

    [[sources]]                          # a source the operator offers every owner, asked about by name
    name = "warehouse"
    url_env = "WAREHOUSE_URL"            # or url = "postgresql://reader@db.internal/warehouse"
    schemas = ["public"]                 # the schemas questions read (default: every one the role may use)
    allow_privileged = false             # true: query it even if its role can do more than read
    semantic = "warehouse.semantic.toml" # its semantic layer: a file, or a [sources.semantic] table

    [prices."openai:gpt-4o-mini"]        # USD per million tokens, by model name, for a run's cost
    input = 0.15
    output = 0.60
    cached_input = 0.075                 # prompt tokens read from the provider's cache (default: input)

    [budget]                             # the budget of each run of any kind (agent, formula, copilot turn)
    max_tokens = 200000                  # input + output tokens, checked before each model call
    max_cost = 0.50                      # with a price for each model the run calls
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, ValidationError
from pydantic_core import ErrorDetails

from plangate.errors import ConfigError, number_too_long

CONFIG_ENV = "PLANGATE_CONFIG"
"""The environment variable naming the config file when no path is given."""

CONFIG_FILE = "plangate.toml"
"""The file looked for in the working directory when neither a path nor ``$PLANGATE_CONFIG`` is given."""

Effect = Literal["read", "write"]

ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,32}$")]
_TOOL_SPEC = r"^(?:[A-Za-z_][\w.]*|[^:]+\.py):[A-Za-z_][\w.]*$"
ToolSpec = Annotated[str, StringConstraints(pattern=_TOOL_SPEC)]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_AGE = r"^(?:[0-9]+[dhms])+$"
Age = Annotated[str, StringConstraints(pattern=_AGE)]

_PATTERN_HELP = {
    r"^[A-Za-z0-9_-]{1,32}$": "1-32 letters, digits, '_' or '-'",
    _TOOL_SPEC: "'module:attribute' or 'file.py:attribute' (e.g. 'myapp.tools:registry')",
    _AGE: "an age like '30d', '12h', '1d12h' or '90s'",
}
_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "an array",
    "tuple_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}
_SECRET_FIELDS = frozenset({"env", "url"})
"""Fields whose values are never repeated in an error message (they hold tokens and keys)."""


class McpServerConfig(BaseModel):
    """One ``[[mcp]]`` entry: an MCP server launched over stdio, and how its tools are treated.

    Attributes:
        name: the server's name; its tools are called ``<name>_<tool>``.
        command: the executable to launch.
        args: its command-line arguments.
        env: extra environment variables for it (never shown in messages).
        effect_default: the effect of its tools unless ``effects`` says otherwise; ``write`` (each call asks
            for consent) unless the server is known to be read-only.
        domain: the tool domain its tools join; the server's name when omitted.
        effects: tool name (as the server names it) → ``read`` or ``write``.
        timeout: seconds one call may take; when omitted, ``$PLANGATE_MCP_TIMEOUT``, else the file's
            ``mcp_timeout``, else 60. A read that runs out of time has failed; a write has an unknown
            outcome (it may have happened), and a person is asked.
        cwd: the folder the server runs in; the configuration file's folder when omitted.
        startup_timeout: seconds the server has to start and list its tools (30 when omitted; a server
            that ``npx`` or ``uvx`` downloads on its first start may need more).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ServerName
    command: NonEmpty
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    effect_default: Effect = "write"
    domain: ServerName | None = None
    effects: dict[str, Effect] = Field(default_factory=dict)
    timeout: Seconds | None = None
    cwd: NonEmpty | None = None
    startup_timeout: Seconds | None = None

    @property
    def tool_domain(self) -> str:
        """The domain the server's tools join."""
        return self.domain or self.name

    def effect_for(self, tool: str) -> Effect:
        """The effect of the server's tool ``tool``: its override, else ``effect_default``."""
        return self.effects.get(tool, self.effect_default)


class DataConfig(BaseModel):
    """``[data]``: what the clients of a server may register as data sources.

    Attributes:
        dirs: folders whose SQLite files owners may register (``plangate serve --data-dir`` adds more;
            default when neither says: the working directory).
        allow_client_urls: let clients register ``postgresql://`` URLs of their own (off: only the declared
            ``[[sources]]`` can be asked about).
        allowed_hosts: with ``allow_client_urls``, the hosts such a URL may name: a host name or a glob of
            one (``*.analytics.internal``), ``host:port``, an address or a network (``10.0.0.0/8``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    dirs: list[NonEmpty] = Field(default_factory=list)
    allow_client_urls: bool = False
    allowed_hosts: list[NonEmpty] = Field(default_factory=list)


class SourceConfig(BaseModel):
    """One ``[[sources]]`` entry: a data source the operator offers, asked about by its name.

    Attributes:
        name: what questions call it.
        url: a ``postgresql://`` URL, or a SQLite file (relative to the file's folder).
        url_env: the environment variable that holds the URL instead (so that no password sits in the file).
        schemas: the PostgreSQL schemas questions read; default: every schema the role may use.
        allow_privileged: query it even though its role can do more than read (a superuser, ``REPLICATION``,
            ``BYPASSRLS``, or one that can write); a warning is logged once.
        description: what the data is, shown to the owners who list the sources.
        semantic: its semantic layer (named metrics, dimensions, relationships, synonyms): the path of a
            ``.semantic.toml`` file (relative to this file's folder), or the same table inline
            (``[sources.semantic]``); checked against the source's schema when a turn opens it. Without
            it, a SQLite file's ``<stem>.semantic.toml`` beside it is used when there is one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ServerName
    url: NonEmpty | None = Field(default=None, repr=False)
    url_env: NonEmpty | None = None
    schemas: list[NonEmpty] | None = None
    allow_privileged: bool = False
    description: str = ""
    semantic: NonEmpty | dict[str, Any] | None = None

    def target(self, environ: Mapping[str, str] | None = None) -> str:
        """The URL or file this source reads.

        Raises:
            ConfigError: it names an environment variable that is not set.
        """
        if self.url is not None:
            return self.url
        env = os.environ if environ is None else environ
        value = env.get(self.url_env or "", "").strip()
        if not value:
            raise ConfigError(f"data source {self.name!r}: ${self.url_env} is not set (it holds the URL)")
        return value


class ModelPrice(BaseModel):
    """One ``[prices."<model>"]`` entry: what a model's tokens cost, per million.

    Attributes:
        input: a million prompt tokens processed (not read from a cache).
        output: a million generated tokens.
        cached_input: a million prompt tokens read from the provider's cache (default: ``input``).
        cache_write: a million prompt tokens written to the cache (default: ``input``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: Price
    output: Price
    cached_input: Price | None = None
    cache_write: Price | None = None


class BudgetConfig(BaseModel):
    """``[budget]``: what a run may spend at most, checked before each model call: the default of every run
    of any kind (an agent run; a formula run with its agents and sub-formulas; a copilot turn with its
    formula runs) that names no budget of its own. Each run's, never an owner's (``[limits]``).

    Attributes:
        max_tokens: input and output tokens of every model call of the run together.
        max_cost: the run's cost, by ``[prices]`` (a run whose models have no price is refused).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(default=None, ge=1)
    max_cost: Price | None = None

    def for_run(self, max_tokens: int | None, max_cost: float | None) -> RunLimits:
        """A run's ``max_tokens`` and ``max_cost`` (keyword arguments of every kind of run): each of these
        defaults where the run names none."""
        return {
            "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
            "max_cost": self.max_cost if max_cost is None else max_cost,
        }


class RunLimits(TypedDict):
    """What one run may spend: ``BudgetConfig.for_run``."""

    max_tokens: int | None
    max_cost: float | None


class TelemetryConfig(BaseModel):
    """``[telemetry]``: OpenTelemetry traces of runs (the ``OTEL_*`` variables win over it).

    Attributes:
        traces: ``otlp`` sends spans to an OTLP endpoint, ``console`` prints them, ``none`` (the default)
            turns tracing off.
        endpoint: the OTLP endpoint (``http://localhost:6006`` for Phoenix); the exporter's default when
            omitted.
        protocol: ``http/protobuf`` (default) or ``grpc``.
        service_name: the ``service.name`` of the spans (default ``plangate``).
        capture_content: record messages and tool arguments and results in spans (secrets redacted).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    traces: Literal["otlp", "console", "none"] = "none"
    endpoint: NonEmpty | None = None
    protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    service_name: NonEmpty = "plangate"
    capture_content: bool = False


class ScheduleConfig(BaseModel):
    """``[[schedules]]``: a formula run on a schedule, defined by the operator (``plangate serve`` stores it,
    or brings the stored one up to this definition, as it starts).

    Attributes:
        name: unique among ``owner``'s schedules.
        formula: the formula to run, by name.
        vars: its variables.
        cron: a five-field cron expression (``0 9 * * MON``), in ``timezone``; or ``every``, an interval
            (``30s``, ``5m``).
        missed: ``skip`` or ``catch_up`` (one run for the slots missed while no server ran).
        overlap: ``skip``, ``queue`` or ``allow``, while the previous slot's run still goes.
        owner: whom its runs belong to.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ServerName
    formula: NonEmpty
    vars: dict[str, Any] = Field(default_factory=dict)
    cron: NonEmpty | None = None
    every: Age | None = None
    timezone: NonEmpty = "UTC"
    missed: Literal["skip", "catch_up"] = "skip"
    overlap: Literal["skip", "queue", "allow"] = "skip"
    owner: NonEmpty = "local"


DoubleTexting = Literal["reject", "queue", "cancel"]
Count = Annotated[int, Field(ge=1)]
Cost = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class OwnerLimits(BaseModel):
    """``[limits.owners.NAME]``: one owner's limits, instead of the defaults (a key left out: the default's;
    the same keys as ``[limits]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: Count | None = None
    runs_at_once: Count | None = None
    daily_tokens: Count | None = None
    daily_cost: Cost | None = None
    double_texting: DoubleTexting | None = None


class LimitsConfig(BaseModel):
    """``[limits]``: what each owner of a server may do, by default (``owners``: per owner; ``plangate owner
    set`` stores an owner's own in the store, which win over these).

    Attributes:
        requests_per_minute: requests to ``POST /v1/runs``, ``POST /v1/ask`` and interaction answers in a
            minute (more: 429 with ``Retry-After``); None: no limit.
        runs_at_once: runs started and not ended (waiting on a person included); more wait ``queued``, in
            order, and start as slots free; None: no limit.
        daily_tokens: tokens an owner's runs that ended this UTC day may have used; past it, new runs are
            refused (429); None: no budget.
        daily_cost: the same in cost, by ``[prices]``.
        double_texting: what a message to a conversation whose turn still runs does: ``reject`` (409),
            ``queue`` (it runs after), ``cancel`` (the running turn is cancelled first).
        owners: an owner's own limits, by owner name.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: Count | None = None
    runs_at_once: Count | None = None
    daily_tokens: Count | None = None
    daily_cost: Cost | None = None
    double_texting: DoubleTexting = "reject"
    owners: dict[str, OwnerLimits] = Field(default_factory=dict)


class WebhooksConfig(BaseModel):
    """``[webhooks]``: how servers and workers deliver webhooks (ages like ``10s``, or seconds).

    Attributes:
        timeout: how long an attempt may take.
        backoff: the wait before the first retry; each later one waits twice the one before (with jitter).
        max_backoff: the longest wait between two attempts.
        give_up_after: how long after the event deliveries are tried (then ``failed``).
        allow_private: endpoints on private, loopback and link-local addresses are allowed (receivers on
            the operator's own network); refused by default, at registration and at each attempt.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: Age | Seconds = "10s"
    backoff: Age | Seconds = "5s"
    max_backoff: Age | Seconds = "1h"
    give_up_after: Age | Seconds = "1d"
    allow_private: bool = False


class RetentionConfig(BaseModel):
    """``[retention]``: how long ended runs are kept (``plangate prune``; a server prunes on its own).

    Attributes:
        older_than: ended runs nothing touched for this long are removed with their events, receipts and
            turns (``30d``); None: kept for ever, unless ``plangate prune --older-than`` says otherwise.
        every: how often a server prunes (``1h``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    older_than: Age | None = None
    every: Age = "1h"


class Config(BaseModel):
    """The settings of ``plangate.toml``; every field is optional.

    Attributes:
        model: the model to use (``openai:gpt-4o-mini``, ``local``, ...).
        store: the store URL (``sqlite:///path.db``).
        tools: tools to import, each ``module:attribute`` or ``file.py:attribute``.
        model_timeout: seconds a model request may wait for the server's next bytes (the default of
            ``$PLANGATE_MODEL_TIMEOUT``; 120 when neither says).
        mcp_timeout: seconds an MCP tool call may take, for servers that set no ``timeout`` (60 when
            omitted; ``$PLANGATE_MCP_TIMEOUT`` wins over it).
        mcp: MCP servers whose tools to offer.
        data: what a server's clients may register as data sources.
        sources: data sources the operator offers, by name.
        prices: what each model's tokens cost (per million), by model name, for runs' costs.
        budget: the default budget of a run of any kind.
        telemetry: ``[telemetry]``, tracing's settings (``plangate.telemetry``).
        retention: how long ended runs are kept.
        schedules: formula runs on a schedule, which every server and worker fires.
        limits: what each owner of a server may do.
        webhooks: how webhooks are delivered.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: NonEmpty | None = None
    store: NonEmpty | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    model_timeout: Seconds | None = None
    mcp_timeout: Seconds | None = None
    mcp: list[McpServerConfig] = Field(default_factory=list)
    data: DataConfig = Field(default_factory=DataConfig)
    sources: list[SourceConfig] = Field(default_factory=list)
    prices: dict[NonEmpty, ModelPrice] = Field(default_factory=dict)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    schedules: list[ScheduleConfig] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    webhooks: WebhooksConfig = Field(default_factory=WebhooksConfig)

    _source: Path | None = PrivateAttr(default=None)
    _folder: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The file this configuration was read from; None for defaults or parsed text."""
        return self._source

    @property
    def folder(self) -> Path:
        """What relative paths of the file are relative to: its folder, as it was when the file was read
        (the working directory for defaults and parsed text)."""
        return self._folder if self._folder is not None else Path.cwd()

    def resolve(self, path: str | Path) -> Path:
        """``path`` made absolute against :attr:`folder` (``~`` expanded; absolute paths unchanged)."""
        target = Path(path).expanduser()
        return target if target.is_absolute() else self.folder / target

    def semantic_of(self, source: SourceConfig) -> dict[str, Any] | Path | None:
        """A declared source's semantic layer: its inline table, or its file's path resolved against this
        file's folder, or None."""
        if isinstance(source.semantic, str):
            return self.resolve(source.semantic)
        return source.semantic


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in a configuration file: where (``mcp[0].command``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigFileError(ConfigError):
    """A configuration file that cannot be read or does not validate.

    Attributes:
        source: the file (or a label for parsed text).
        issues: each problem at its path; empty for a file that could not be read or parsed at all.
    """

    def __init__(self, source: str, issues: Sequence[ConfigIssue], message: str | None = None) -> None:
        self.source = source
        self.issues = list(issues)
        if message is None:
            if len(self.issues) == 1:
                message = f"{source}: {self.issues[0]}"
            else:
                listed = "\n".join(f"  {issue}" for issue in self.issues)
                message = f"{source}: {len(self.issues)} problems:\n{listed}"
        super().__init__(message)


def load_config(path: str | Path | None = None, *, environ: Mapping[str, str] | None = None) -> Config:
    """Find, read and validate the configuration.

    Args:
        path: the file to read; when None, ``$PLANGATE_CONFIG`` names it, else ``./plangate.toml`` is read
            if it exists, else the defaults are returned.
        environ: the environment to read ``PLANGATE_CONFIG`` from; the process's when None.

    Raises:
        ConfigFileError: the file named by ``path`` or ``$PLANGATE_CONFIG`` does not exist, cannot be read,
            is not TOML, or does not validate; the message says where.
    """
    env = os.environ if environ is None else environ
    via = ""
    if path is not None:
        target = Path(path).expanduser()
    elif env.get(CONFIG_ENV):
        target = Path(env[CONFIG_ENV]).expanduser()
        via = f" ({CONFIG_ENV}={env[CONFIG_ENV]})"
    else:
        # The working directory's file is optional; a file named explicitly must exist.
        target = Path(CONFIG_FILE)
        if not target.is_file():
            return Config()
    if not target.is_file():
        found = "a directory" if target.is_dir() else "nothing"
        raise ConfigFileError(
            str(target), [], f"{target}{via}: expected a plangate.toml config file, found {found} there"
        )
    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigFileError(str(target), [], f"{target}: cannot be read: {reason}") from None
    config = parse_config(text, source=str(target))
    config._source = target
    config._folder = target.resolve().parent
    return config


def parse_config(text: str, *, source: str = CONFIG_FILE) -> Config:
    """Validate the TOML ``text`` of a configuration file.

    Args:
        text: the file's content.
        source: what to call it in messages.

    Raises:
        ConfigFileError: the text is not TOML or does not validate.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(source, [], f"{source}: not valid TOML: {exc}") from None
    except ValueError as exc:
        raise ConfigFileError(source, [], f"{source}: {number_too_long(exc)}") from None
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigFileError(source, [_issue(error) for error in exc.errors(include_url=False)]) from None
    issues = [
        *_duplicates([server.name for server in config.mcp], "mcp", "server", "they prefix the tool names"),
        *_duplicates(
            [entry.name for entry in config.sources], "sources", "source", "questions name a source by it"
        ),
        *_source_targets(config.sources),
    ]
    if issues:
        raise ConfigFileError(source, issues)
    return config


def _duplicates(names: Sequence[str], table: str, what: str, why: str) -> list[ConfigIssue]:
    first: dict[str, int] = {}
    issues: list[ConfigIssue] = []
    for index, name in enumerate(names):
        if name in first:
            issues.append(
                ConfigIssue(
                    f"{table}[{index}].name",
                    f"the {what} name {name!r} is taken by {table}[{first[name]}]; names must be unique "
                    f"({why})",
                )
            )
        first.setdefault(name, index)
    return issues


def _source_targets(sources: Sequence[SourceConfig]) -> list[ConfigIssue]:
    return [
        ConfigIssue(f"sources[{index}]", "expected exactly one of 'url' and 'url_env'")
        for index, entry in enumerate(sources)
        if (entry.url is None) == (entry.url_env is None)
    ]


# -- turning pydantic's errors into issues -----------------------------------------------------------------

_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def format_path(loc: Sequence[int | str]) -> str:
    """``("mcp", 0, "effects", "a.b")`` → ``mcp[0].effects."a.b"``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            key = part if _KEY.match(part) else '"' + part.replace('"', '\\"') + '"'
            path += f".{key}" if path else key
    return path


def _issue(error: ErrorDetails) -> ConfigIssue:
    loc = tuple(error["loc"])
    kind = error["type"]
    secret = any(part in _SECRET_FIELDS for part in loc if isinstance(part, str))
    found = "" if secret else f", got {_show(error.get('input'))}"
    if kind == "extra_forbidden":
        message = "unknown field" + _did_you_mean(loc)
    elif kind == "missing":
        message = "required, but missing"
    elif kind == "literal_error":
        message = f"expected {error.get('ctx', {}).get('expected', 'one of the allowed values')}{found}"
    elif kind == "string_pattern_mismatch":
        pattern = str(error.get("ctx", {}).get("pattern", ""))
        message = f"expected {_PATTERN_HELP.get(pattern, f'text matching {pattern}')}{found}"
    elif kind == "string_too_short":
        message = "expected a non-empty string"
    elif kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}{found}"
        if loc == ("mcp",) and kind == "list_type":
            message += " (write [[mcp]], with two brackets, before each server)"
    else:
        text = error["msg"]
        lowered = text[:1].lower() + text[1:]
        if lowered.startswith("input should be "):
            lowered = "expected " + lowered.removeprefix("input should be ")
        message = lowered + found
    return ConfigIssue(format_path(loc), message)


def _show(value: object) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _did_you_mean(loc: Sequence[int | str]) -> str:
    known = _fields_at(loc[:-1])
    name = loc[-1] if loc else ""
    if not known or not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (expected one of: {', '.join(known)})"


def _fields_at(loc: Sequence[int | str]) -> list[str]:
    """The field names of the table at ``loc`` (``("mcp", 0)`` → the server's fields)."""
    model: type[BaseModel] = Config
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, directly or inside a list or an optional."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "Config",
    "ConfigFileError",
    "ConfigIssue",
    "DataConfig",
    "Effect",
    "LimitsConfig",
    "McpServerConfig",
    "OwnerLimits",
    "RetentionConfig",
    "ScheduleConfig",
    "SourceConfig",
    "WebhooksConfig",
    "format_path",
    "load_config",
    "parse_config",
]
