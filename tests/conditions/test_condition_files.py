"""file.exists: ``{{var}}`` substitution, confinement to the root, and every way out of it refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from plangate.conditions import ConditionContext, evaluate


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "go.mod").write_text("module x\n")
    (root / "src" / "main.go").write_text("package main\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return root


def _ctx(root: Path | None, **variables: str) -> ConditionContext:
    return ConditionContext(vars=variables, root=root)


def test_a_file_under_the_root(tree: Path) -> None:
    result = evaluate("file.exists('go.mod')", _ctx(tree))
    assert (result.satisfied, result.reason) == (True, "file.exists('go.mod'): 'go.mod' exists")
    result = evaluate("file.exists('src/missing.go')", _ctx(tree))
    assert (result.satisfied, result.reason) == (
        False,
        "file.exists('src/missing.go'): 'src/missing.go' does not exist",
    )
    assert evaluate("file.exists('src')", _ctx(tree)).satisfied


def test_variables_are_substituted(tree: Path) -> None:
    ctx = _ctx(tree, module="src", name="main")
    result = evaluate("file.exists('{{module}}/{{ name }}.go')", ctx)
    assert (result.satisfied, result.reason) == (
        True,
        "file.exists('{{module}}/{{ name }}.go'): 'src/main.go' exists",
    )
    result = evaluate("file.exists('{{nope}}/x')", ctx)
    assert (result.satisfied, result.reason) == (
        False,
        "file.exists('{{nope}}/x'): variable 'nope' is not set",
    )


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "..", "./../repo/../secret.txt"])
def test_dot_dot_out_of_the_root_is_refused(tree: Path, path: str) -> None:
    result = evaluate(f"file.exists('{path}')", _ctx(tree))
    assert not result.satisfied
    assert result.reason.endswith("is outside the allowed root")


def test_a_dot_dot_that_stays_inside_is_fine(tree: Path) -> None:
    assert evaluate("file.exists('src/../go.mod')", _ctx(tree)).satisfied


def test_absolute_paths(tree: Path) -> None:
    outside = tree.parent / "secret.txt"
    result = evaluate(f"file.exists('{outside}')", _ctx(tree))
    assert (result.satisfied, result.reason) == (
        False,
        f"file.exists('{outside}'): '{outside}' is outside the allowed root",
    )
    assert evaluate(f"file.exists('{tree / 'go.mod'}')", _ctx(tree)).satisfied


def test_a_symlink_that_escapes_is_refused(tree: Path) -> None:
    os.symlink(tree.parent / "secret.txt", tree / "leak.txt")
    os.symlink(tree.parent, tree / "up")
    for path in ("leak.txt", "up/secret.txt", "up"):
        result = evaluate(f"file.exists('{path}')", _ctx(tree))
        assert (result.satisfied, result.reason) == (
            False,
            f"file.exists('{path}'): '{path}' is outside the allowed root",
        )


def test_a_symlink_that_stays_inside_is_followed(tree: Path) -> None:
    os.symlink(tree / "src", tree / "alias")
    assert evaluate("file.exists('alias/main.go')", _ctx(tree)).satisfied


def test_a_refusal_cannot_be_negated_into_a_pass(tree: Path) -> None:
    result = evaluate("not file.exists('../secret.txt')", _ctx(tree))
    assert (result.satisfied, result.reason) == (
        False,
        "file.exists('../secret.txt'): '../secret.txt' is outside the allowed root",
    )


def test_no_root_means_no_file_can_be_checked() -> None:
    result = evaluate("file.exists('go.mod')", _ctx(None))
    assert (result.satisfied, result.reason) == (
        False,
        "file.exists('go.mod'): no root directory is set, so no file can be checked",
    )


def test_empty_and_nul_paths_are_refused(tree: Path) -> None:
    assert evaluate("file.exists('')", _ctx(tree)).reason == "file.exists(''): the path is empty"
    result = evaluate("file.exists('a\\0b')", _ctx(tree))
    assert (result.satisfied, result.reason) == (
        False,
        "file.exists('a\\0b'): the path contains a NUL character",
    )


@pytest.mark.parametrize(
    "path",
    [
        "../repo/go.mod",  # out to the parent, back in by name
        "src/../../repo/go.mod",
        "../repo/src/../go.mod",
        "{{back}}/go.mod",
    ],
)
def test_a_route_that_leaves_the_root_is_refused_even_if_it_comes_back(tree: Path, path: str) -> None:
    result = evaluate(f"file.exists('{path}')", _ctx(tree, back="../repo"))
    assert not result.satisfied
    assert result.reason.endswith("is outside the allowed root")


def test_an_absolute_route_that_leaves_the_root_and_comes_back_is_refused(tree: Path) -> None:
    result = evaluate(f"file.exists('{tree}/../repo/go.mod')", _ctx(tree))
    assert (result.satisfied, result.reason.endswith("is outside the allowed root")) == (False, True)


def test_a_symlink_out_and_back_in_is_refused(tree: Path) -> None:
    # 'up' leads out of the root to its parent; 'up/repo/go.mod' is the root's own file again.
    os.symlink(tree.parent, tree / "up")
    result = evaluate("file.exists('up/repo/go.mod')", _ctx(tree))
    assert (result.satisfied, result.reason.endswith("is outside the allowed root")) == (False, True)
