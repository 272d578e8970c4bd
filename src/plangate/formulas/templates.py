"""``{{name}}`` templates in formulas: rendered in a sandbox, strictly, in two halves.

Cook time renders every ``{{var}}`` (an undefined name is an error with its path, never an empty string) and
keeps run-time references ``{{steps.<id>.output.<key>}}`` intact, in that canonical spelling. Run time
(:func:`render_runtime`, called by the executor) fills those references from earlier steps' outputs.

Text that cook produced is itself a valid template for :func:`render_runtime`: where a rendered value contains
``{{``, ``{%`` or ``{#`` it is escaped, so a var's content is never evaluated at run time.

For: rendering and finding references. Not for: deciding which fields are rendered (cook.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, NoReturn, cast

import jinja2
import jinja2.runtime
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import JsonValue

from plangate.errors import FormulaError
from plangate.formulas._schema_base import suggest

#: ``{{ steps.<id>.output.<key.path> }}``: ids may hold ``-`` and ``.``, which Jinja would read as arithmetic.
RUNTIME_REF = re.compile(r"\{\{\s*steps\.([A-Za-z0-9_.-]+?)\.output((?:\.[^\s.{}]+)*)\s*\}\}")
_SIMPLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}")
_DELIMITER = re.compile(r"\{[{%#]")
_SENTINEL = re.compile("\x00([0-9]+)\x00")
_UNDEFINED = re.compile(r"^'([^']+)' is undefined$")

Context = Mapping[str, object]


def to_text(value: object) -> str:
    """How a value prints inside text: booleans as ``true``/``false``, lists and tables as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


#: The longest text or list one ``*`` may build, and the largest exponent ``**`` may use.
MAX_REPEAT = 100_000
MAX_POWER = 256


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, refusing ``'x' * 10**9`` and ``9 ** 10**9`` too: a model may write formulas."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            sizes = [len(x) for x in (left, right) if isinstance(x, str | list | tuple)]
            counts = [x for x in (left, right) if isinstance(x, int)]
            if sizes and counts and sizes[0] * max(counts[0], 0) > MAX_REPEAT:
                raise SecurityError(f"'*' would build more than {MAX_REPEAT} items")
        elif operator == "**" and isinstance(right, int | float) and abs(right) > MAX_POWER:
            raise SecurityError(f"'**' with an exponent larger than {MAX_POWER}")
        return super().call_binop(context, operator, left, right)


@lru_cache(maxsize=1)
def _environment() -> ImmutableSandboxedEnvironment:
    return _Sandbox(
        undefined=jinja2.StrictUndefined, finalize=to_text, autoescape=False, keep_trailing_newline=True
    )


@lru_cache(maxsize=4096)
def _compile(text: str) -> jinja2.Template:
    return _environment().from_string(text)


def canonical_ref(step_id: str, key_path: str) -> str:
    """The spelling cook keeps for a run-time reference: ``{{steps.<id>.output.<key>}}``."""
    return f"{{{{steps.{step_id}.output{key_path}}}}}"


def runtime_refs(value: object) -> list[tuple[str, str]]:
    """Every ``(step id, key path)`` that ``value`` (text, or lists / tables of it) reads at run time."""
    found: list[tuple[str, str]] = []
    _collect_refs(value, found)
    return found


def _collect_refs(value: object, found: list[tuple[str, str]]) -> None:
    # ``check`` walks every step's texts before every run: a call per list or table, not per value, each
    # value told by its type first (``isinstance`` only for what is not a plain JSON value); in order
    if isinstance(value, str):
        if "steps." in value:
            found.extend((m.group(1), m.group(2).lstrip(".")) for m in RUNTIME_REF.finditer(value))
        return
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        if type(item) is str:
            if "steps." in item:
                found.extend((m.group(1), m.group(2).lstrip(".")) for m in RUNTIME_REF.finditer(item))
        elif item and type(item) not in _LEAVES:  # a list, a table, or a subclass of one or of text
            _collect_refs(item, found)


_LEAVES = frozenset({int, float, bool, type(None)})


def render_text(
    text: str,
    context: Context,
    *,
    path: str = "",
    source: str | None = None,
    refs: Callable[[str], str] | None = None,
    escape: bool = True,
) -> str:
    """Render the cook-time half of a template.

    Args:
        text: the template.
        context: the names it may use (vars, loop vars, ``target`` / ``step`` in expansions and advice).
        path: where the text sits, for errors.
        source: the formula file, for errors.
        refs: maps the step id of each run-time reference (a loop body's local id to its iteration's id).
        escape: escape template delimiters that rendering produced (for text that is rendered again at run
            time); off for ids and conditions.

    Raises:
        FormulaError: an undefined name, a syntax error or a sandbox violation, with the path.
    """
    if "{" not in text:
        return text
    if "\x00" in text:
        raise FormulaError("text may not contain the NUL character", path=path, source=source)
    kept: list[str] = []

    def hold(match: re.Match[str]) -> str:
        step_id = refs(match.group(1)) if refs else match.group(1)
        kept.append(canonical_ref(step_id, match.group(2)))
        return f"\x00{len(kept) - 1}\x00"

    body = RUNTIME_REF.sub(hold, text) if "steps." in text else text
    rendered = _render(body, context, path=path, source=source) if _DELIMITER.search(body) else body
    if escape and _DELIMITER.search(rendered):
        rendered = _DELIMITER.sub(lambda m: "{{ '" + m.group(0) + "' }}", rendered)
    if kept:
        rendered = _SENTINEL.sub(lambda m: _pick(kept, m), rendered)
    return rendered


def render_value(
    value: JsonValue,
    context: Context,
    *,
    path: str = "",
    source: str | None = None,
    refs: Callable[[str], str] | None = None,
) -> JsonValue:
    """:func:`render_text` applied to every string inside ``value`` (table keys are left alone)."""
    if isinstance(value, str):
        whole = _SIMPLE.fullmatch(value.strip()) if "{" in value else None
        if whole is not None:
            found, typed = _lookup(whole.group(1), context)
            if found and typed is not None and not isinstance(typed, str):
                return cast(JsonValue, typed)  # `count = "{{n}}"` keeps n's type: an int stays an int
        return render_text(value, context, path=path, source=source, refs=refs)
    if isinstance(value, dict):
        return {
            k: render_value(v, context, path=f"{path}.{k}", source=source, refs=refs)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            render_value(v, context, path=f"{path}[{i}]", source=source, refs=refs)
            for i, v in enumerate(value)
        ]
    return value


def render_runtime(
    template_or_value: JsonValue,
    vars: Mapping[str, JsonValue],
    step_outputs: Mapping[str, Mapping[str, JsonValue]],
    *,
    path: str = "",
) -> JsonValue:
    """Render the run-time half: fill ``{{steps.<id>.output.<key>}}`` from earlier steps' outputs.

    A string that is exactly one reference becomes the referenced value itself (a list stays a list); other
    strings are rendered as sandboxed templates with ``vars``, the references printed as text. Lists and
    tables are rendered item by item.

    Args:
        template_or_value: cooked text (or a list / table of it).
        vars: the run's var values.
        step_outputs: the output of each completed step, by step id.
        path: where the value sits, for errors.

    Raises:
        FormulaError: a reference to a step with no output or to a key the output does not have, or an
            undefined name; nothing is ever rendered as an empty string instead.
    """
    if isinstance(template_or_value, dict):
        return {
            k: render_runtime(v, vars, step_outputs, path=f"{path}.{k}") for k, v in template_or_value.items()
        }
    if isinstance(template_or_value, list):
        return [
            render_runtime(v, vars, step_outputs, path=f"{path}[{i}]")
            for i, v in enumerate(template_or_value)
        ]
    if not isinstance(template_or_value, str) or "{" not in template_or_value:
        return template_or_value
    text = template_or_value
    whole = RUNTIME_REF.fullmatch(text.strip())
    if whole is not None:
        return output_value(whole.group(1), whole.group(2).lstrip("."), step_outputs, path=path)
    values: list[JsonValue] = []

    def hold(match: re.Match[str]) -> str:
        values.append(output_value(match.group(1), match.group(2).lstrip("."), step_outputs, path=path))
        return f"\x00{len(values) - 1}\x00"

    body = RUNTIME_REF.sub(hold, text)
    rendered = _render(body, vars, path=path, source=None) if _DELIMITER.search(body) else body
    texts = [to_text(v) for v in values]
    return _SENTINEL.sub(lambda m: _pick(texts, m), rendered)


def output_value(
    step_id: str, key_path: str, step_outputs: Mapping[str, Mapping[str, JsonValue]], *, path: str = ""
) -> JsonValue:
    """The value at ``key_path`` (dotted; a key with the full dotted name wins) in a step's output."""
    output = step_outputs.get(step_id)
    if output is None:
        hint = suggest(step_id, step_outputs)
        raise FormulaError(
            f"step {step_id!r} has no output yet (not complete, or no such step){hint}", path=path
        )
    if not key_path:
        return dict(output)
    if key_path in output:
        return output[key_path]
    current: JsonValue = dict(output)
    for part in key_path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            keys = sorted(output)
            raise FormulaError(
                f"the output of step {step_id!r} has no {key_path!r} (its keys: {', '.join(keys) or 'none'})",
                path=path,
            )
    return current


def _pick(texts: list[str], match: re.Match[str]) -> str:
    index = int(match.group(1))
    return texts[index] if index < len(texts) else match.group(0)  # a NUL that came from a value, not ours


def _render(text: str, context: Context, *, path: str, source: str | None) -> str:
    fast = _render_simple(text, context)
    if fast is not None:
        return fast
    try:
        return _compile(text).render(dict(context))
    except jinja2.TemplateSyntaxError as exc:
        _fail(f"template syntax error at line {exc.lineno}: {exc.message} in {text!r}", path, source)
    except jinja2.UndefinedError as exc:
        _fail(_undefined(str(exc.message), text, context), path, source)
    except SecurityError as exc:
        _fail(f"the template {text!r} is not allowed: {exc}", path, source)
    except Exception as exc:  # a template is user code: any failure is the formula's, reported in one line
        _fail(f"the template {text!r} failed: {type(exc).__name__}: {exc}", path, source)


def _render_simple(text: str, context: Context) -> str | None:
    """Plain ``{{ name }}`` / ``{{ a.b }}`` placeholders without Jinja (most templates, and much faster)."""
    if "{%" in text or "{#" in text or "{{" in _SIMPLE.sub("", text):
        return None
    failed = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal failed
        found, value = _lookup(match.group(1), context)
        failed = failed or not found
        return to_text(value)

    result = _SIMPLE.sub(substitute, text)
    return None if failed else result  # let Jinja produce the exact error


def _lookup(dotted: str, context: Context) -> tuple[bool, object]:
    """``a.b.c`` through nested tables: ``(True, value)``, or ``(False, None)`` when a part is missing."""
    first, *rest = dotted.split(".")
    if first not in context:
        return False, None
    current = context[first]
    for part in rest:
        if not isinstance(current, dict) or part not in current:
            return False, None
        current = current[part]
    return True, current


def _undefined(message: str, text: str, context: Context) -> str:
    match = _UNDEFINED.match(message)
    if match is None:
        return f"undefined value in template {text!r}: {message}"
    name = match.group(1)
    if name == "steps":
        return (
            f"'steps' in {text!r} is only for run-time output references, written exactly "
            "{{steps.<id>.output.<key>}}"
        )
    return f"undefined name {name!r} in template {text!r}{suggest(name, context)}"


def _fail(message: str, path: str, source: str | None) -> NoReturn:
    raise FormulaError(message, path=path, source=source) from None


__all__ = [
    "RUNTIME_REF",
    "canonical_ref",
    "output_value",
    "render_runtime",
    "render_text",
    "render_value",
    "runtime_refs",
    "to_text",
]
