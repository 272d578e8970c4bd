"""The exception tree: every class plangate raises on purpose is rooted in ``UserError`` or ``RunError`` (or
is a control-flow ``Signal``) and drawn in ``errors.py``'s docstring where it is; no project failure is a
bare Python exception or an ``assert`` that ``python -O`` would strip."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import plangate
from plangate import errors
from plangate.errors import RunError, Signal, UserError

SRC = Path(plangate.__file__).parent
_DRAWN = re.compile(r"^(?P<indent>[ │]*)(?:[├└]── )?(?P<name>_?[A-Z]\w*)\b")


@functools.cache
def _project_exceptions() -> frozenset[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for module in pkgutil.walk_packages(plangate.__path__, "plangate."):
        for value in vars(importlib.import_module(module.name)).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("plangate")
            ):
                found.add(value)
    return frozenset(found)


def _drawn_tree() -> set[tuple[str, str | None]]:
    """``(class, parent)`` for every class drawn in the trees of ``errors.py``'s docstring."""
    doc = errors.__doc__ or ""
    edges: set[tuple[str, str | None]] = set()
    for block in doc.split("::\n")[1:]:
        stack: list[tuple[int, str]] = []
        for line in block.strip("\n").split("\n\n")[0].splitlines():
            match = _DRAWN.match(line.removeprefix("    "))
            if match is None:
                continue
            depth = len(match["indent"]) + (4 if "── " in line else 0)
            while stack and stack[-1][0] >= depth:
                stack.pop()
            edges.add((match["name"], stack[-1][1] if stack else None))
            stack.append((depth, match["name"]))
    return edges


def test_every_exception_is_rooted_in_user_error_run_error_or_signal() -> None:
    roots = {errors.PlangateError, UserError, RunError, Signal}
    unrooted = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _project_exceptions() - roots
        if not issubclass(cls, UserError | RunError | Signal)
    )
    assert unrooted == []
    assert not issubclass(Signal, errors.PlangateError)


def test_the_docstring_draws_the_whole_tree() -> None:
    actual: set[tuple[str, str | None]] = set()
    for cls in _project_exceptions():
        parent = next((base for base in cls.__bases__ if base.__module__.startswith("plangate")), None)
        actual.add((cls.__name__, None if parent is None else parent.__name__))
    drawn = _drawn_tree()
    assert ("UsageError", "UserError") in drawn  # the parser reads the drawing at all
    assert sorted(actual - drawn) == [], "raised but not drawn (or drawn under another parent)"
    assert sorted(drawn - actual) == [], "drawn but not defined"


def _validator_names(tree: ast.Module) -> set[str]:
    """Functions pydantic calls as validators: decorated ``*_validator`` or wrapped in ``AfterValidator``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if ast.unparse(target).endswith("_validator"):
                    names.add(node.name)
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(
            ("AfterValidator", "BeforeValidator", "PlainValidator", "WrapValidator")
        ):
            names.update(arg.id for arg in node.args if isinstance(arg, ast.Name))
    return names


def _functions_with_raises(tree: ast.Module) -> list[tuple[str, ast.Raise]]:
    found: list[tuple[str, ast.Raise]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.extend((node.name, inner) for inner in ast.walk(node) if isinstance(inner, ast.Raise))
    return found


def test_no_project_failure_is_a_bare_python_exception() -> None:
    bare = {"Exception", "RuntimeError", "ValueError", "AssertionError", "LookupError", "OSError"}
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        validators = _validator_names(tree)
        for function, node in _functions_with_raises(tree):
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id in bare and function not in validators:
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {function}: raise {raised.id}")
    assert found == []


def test_no_runtime_check_is_an_assert() -> None:
    found = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assert)
    ]
    assert found == [], "python -O strips these: raise one of plangate's errors instead"
