"""``plangate check-condition``: verdicts and exit codes, syntax errors with a caret, bad steps files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plangate.cli.app import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "conditions" / "steps.json"
DEMO = (
    "build.status == 'complete' and tests.output.failed == 0"
    " and children(tests).count(status == 'complete') >= 2"
)

runner = CliRunner()


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["check-condition", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_the_readme_demo_is_satisfied_with_a_clear_reason() -> None:
    code, out, _ = _run(DEMO, "--steps", str(EXAMPLE))
    assert code == 0
    assert out == (
        "satisfied: build.status is 'complete' and tests.output.failed is 0 and "
        "children(tests).count(status == 'complete') is 2 of 3 (>= 2)\n"
    )


def test_unsatisfied_exits_1_and_says_why() -> None:
    code, out, _ = _run("review.output.approved and tests.output.failed == 0", "--steps", str(EXAMPLE))
    assert (code, out) == (1, "not satisfied: review.output.approved is false\n")


def test_the_current_step_and_variables_come_from_the_file_or_the_options() -> None:
    code, out, _ = _run("status == 'ready' and vars.environment == 'staging'", "--steps", str(EXAMPLE))
    assert (code, out) == (0, "satisfied: status is 'ready' and vars.environment is 'staging'\n")
    code, out, _ = _run(
        "status == 'ready' and vars.environment == 'prod'",
        "--steps",
        str(EXAMPLE),
        "--current",
        "build",
        "--var",
        "environment=prod",
    )
    assert (code, out) == (1, "not satisfied: status is 'complete', not 'ready'\n")


def test_file_exists_is_confined_to_the_root(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n")
    code, out, _ = _run("file.exists('go.mod')", "--root", str(tmp_path))
    assert (code, out) == (0, "satisfied: file.exists('go.mod'): 'go.mod' exists\n")
    code, out, _ = _run("file.exists('../go.mod')", "--root", str(tmp_path))
    assert (code, out) == (
        1,
        "not satisfied: file.exists('../go.mod'): '../go.mod' is outside the allowed root\n",
    )


def test_ast_and_json() -> None:
    code, out, _ = _run("build.status == 'complete'", "--steps", str(EXAMPLE), "--ast")
    assert code == 0
    assert out == (
        "ast:\n(==\n  (field build status)\n  'complete')\nsatisfied: build.status is 'complete'\n"
    )
    code, out, _ = _run("build.status == 'complete'", "--steps", str(EXAMPLE), "--json", "--ast")
    assert code == 0
    assert json.loads(out) == {
        "expression": "build.status == 'complete'",
        "satisfied": True,
        "reason": "build.status is 'complete'",
        "references": ["build"],
        "ast": "(== (field build status) 'complete')",
    }


def test_a_syntax_error_shows_a_caret_under_the_column_and_exits_2() -> None:
    code, out, err = _run("build.status = 'complete'")
    assert (code, out) == (2, "")
    assert err == (
        "error: expected a comparison operator (==, !=, <, <=, >, >=) at column 14, found '=' "
        "(use '==' to compare)\n"
        "  build.status = 'complete'\n"
        "               ^\n"
    )


def test_a_syntax_error_as_json() -> None:
    code, out, _ = _run("build.status ==", "--json")
    assert code == 2
    assert json.loads(out) == {
        "expression": "build.status ==",
        "error": {
            "message": "expected a value after '==' at column 16, found end of input",
            "position": 15,
            "expected": "a value after '=='",
            "found": "end of input",
        },
    }


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        (
            "{not json",
            "is not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ("[]", "expected a JSON object with a 'steps' list, found a list"),
        ("{}", "missing the 'steps' list"),
        ('{"steps": [], "extra": 1}', "unknown key 'extra' at the top level (expected steps, vars, current)"),
        ('{"steps": {}}', "steps: expected a list, found an object"),
        ('{"steps": [3]}', "steps[0]: expected a step object, found a number"),
        ('{"steps": [{"status": "complete"}]}', "steps[0].id: expected a non-empty string, found null"),
        (
            '{"steps": [{"id": "a", "status": "done"}]}',
            "steps[0].status: expected one of pending, ready, running, waiting, complete, failed, skipped,"
            " cancelled, found 'done'",
        ),
        (
            '{"steps": [{"id": "a", "status": "ready", "output": []}]}',
            "steps[0].output: expected an object, found a list",
        ),
        (
            '{"steps": [{"id": "a", "status": "ready"}, {"id": "a", "status": "ready"}]}',
            "steps[1].id: 'a' is used twice (first at steps[0])",
        ),
        (
            '{"steps": [{"id": "a", "status": "ready", "children": ["b"]}]}',
            "steps[0].children[0]: no step has the id 'b'",
        ),
        (
            '{"steps": [{"id": "a", "status": "ready", "children": ["b"]}, '
            '{"id": "b", "status": "ready", "children": ["a"]}]}',
            "children form a cycle: a -> b -> a",
        ),
        ('{"steps": [], "vars": {"n": 3}}', "vars.n: expected a string, found a number"),
        ('{"steps": [], "current": 1}', "current: expected a step id (a string), found a number"),
    ],
)
def test_a_bad_steps_file_is_one_line_naming_the_file(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    path = tmp_path / "steps.json"
    if content is not None:
        path.write_text(content)
    code, out, err = _run("a.status == 'ready'", "--steps", str(path))
    assert (code, out) == (2, "")
    assert err == f"error: {path}: {problem}\n"


def test_children_named_by_id_are_resolved(tmp_path: Path) -> None:
    path = tmp_path / "steps.json"
    path.write_text(
        json.dumps(
            {
                "steps": [
                    {"id": "unit", "status": "complete"},
                    {
                        "id": "tests",
                        "status": "running",
                        "children": ["unit", {"id": "e2e", "status": "failed"}],
                    },
                ]
            }
        )
    )
    code, out, _ = _run(
        "children(tests).count(status == 'complete') == 1 and e2e.status == 'failed'", "--steps", str(path)
    )
    assert code == 0, out
