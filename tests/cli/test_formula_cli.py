"""``plangate formula check | show | cook``: output, JSON, exit codes, one-line errors with no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from plangate.cli import _formula

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formulas"


@pytest.fixture
def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """The root command."""

    _formula.register(root)
    return root


def run(app: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["formula", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.formula.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_check_passes_a_clean_formula(app: typer.Typer) -> None:
    tools = f"{EXAMPLES / 'tools.py'}:registry"
    code, out, _ = run(
        app, "check", "release", "--path", str(EXAMPLES), "--var", "version=1.2.3", "--tools", tools
    )
    assert code == 0
    assert out.strip() == f"ok {EXAMPLES / 'release.formula.toml'}: 4 steps, no issues"


def test_check_without_tools_names_each_tool_it_cannot_verify(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # it said "ok" for a formula whose tool does not exist: without tools, each tool is a warning
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLANGATE_TOOLS", raising=False)
    write(tmp_path, "f", 'formula = "f"\n[[steps]]\nid = "a"\ntool = { name = "no_such_tool" }')
    code, out, _ = run(app, "check", "f", "-p", str(tmp_path))
    assert code == 0
    assert out.splitlines()[0] == (
        "warning steps[0].tool.name: tool 'no_such_tool' is not verified: no tools are named here (give "
        "them with --tools MODULE:ATTR or FILE.py:ATTR, $PLANGATE_TOOLS, or plangate.toml's tools) "
        "(unverified-tool)"
    )
    assert "no issues" not in out


def test_check_lists_issues_and_exits_1(app: typer.Typer, tmp_path: Path) -> None:
    write(
        tmp_path, "f", 'formula = "f"\n[[steps]]\nid = "run-tests"\n[[steps]]\nid = "b"\nneeds = ["run-test"]'
    )
    code, out, _ = run(app, "check", "f", "-p", str(tmp_path), "--var", "extra=1")
    assert code == 1
    assert out.splitlines() == [
        "warning vars.extra: var 'extra' is not declared by the formula (unknown-var)",
        "error steps[1].needs: step 'b' needs unknown step 'run-test' (did you mean 'run-tests'?) "
        "(unknown-need)",
        f"{tmp_path / 'f.formula.toml'}: 1 error, 1 warning",
    ]


def test_check_names_the_path_of_a_done_when_that_is_not_a_receipts_condition(
    app: typer.Typer, tmp_path: Path
) -> None:
    write(
        tmp_path,
        "f",
        'formula = "f"\n[[steps]]\nid = "book"\n'
        'agent = { prompt = "book", tools = ["place"], done_when = "receipts.all(sucess)" }\n',
    )
    code, out, _ = run(app, "check", "f", "-p", str(tmp_path))
    assert code == 1
    assert out.splitlines() == [
        "error steps[0].agent.done_when: unknown receipt field 'sucess' at column 14; expected tool, "
        "success, step, source or output (did you mean 'success'?) in 'receipts.all(sucess)' "
        "(condition-syntax)",
        "warning steps[0].agent.tools: tool 'place' is not verified: no tools are named here (give them with "
        "--tools MODULE:ATTR or FILE.py:ATTR, $PLANGATE_TOOLS, or plangate.toml's tools) (unverified-tool)",
        f"{tmp_path / 'f.formula.toml'}: 1 error, 1 warning",
    ]


def test_check_json_for_scripts(app: typer.Typer) -> None:
    code, out, _ = run(app, "check", str(EXAMPLES / "release.formula.toml"), "--json")
    assert code == 1
    report = json.loads(out)
    assert {key: value for key, value in report.items() if key != "issues"} == {
        "formula": "release",
        "ok": False,
        "steps": 4,
    }
    assert report["issues"][0] == {
        "level": "error",
        "code": "missing-var",
        "path": "vars.version",
        "message": "required var 'version' is not set",
    }
    # without tools, each tool a step names is a warning: run_tests, build_artifact, publish
    assert [(i["level"], i["code"]) for i in report["issues"][1:]] == [("warning", "unverified-tool")] * 3


def test_a_load_error_is_one_line_with_the_path_and_exit_2(app: typer.Typer, tmp_path: Path) -> None:
    path = write(tmp_path, "bad", 'formula = "bad"\n[[steps]]\nid = "a"\ndepnds_on = ["x"]\n')
    for command in ("check", "show", "cook"):
        code, out, err = run(app, command, str(path))
        assert code == 2
        assert out == ""
        assert err.strip() == f"error: {path}: steps[0].depnds_on: unknown field (did you mean 'depends_on'?)"
        assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "code", "path", "message"),
    [
        (
            'formula = "bad"\n[[steps]]\nid = "a"\ndepnds_on = ["x"]\n',
            "schema",
            "steps[0].depnds_on",
            "unknown field (did you mean 'depends_on'?)",
        ),
        (
            'formula = "bad"\nversion = \n',
            "load-error",
            "",
            "invalid TOML at line 2, column 11: Invalid value",
        ),
    ],
)
def test_check_json_prints_json_on_a_load_error_too_and_exits_2(
    app: typer.Typer, tmp_path: Path, text: str, code: str, path: str, message: str
) -> None:
    file = write(tmp_path, "bad", text)
    exit_code, out, err = run(app, "check", str(file), "--json")
    assert (exit_code, err) == (2, "")
    assert json.loads(out) == {
        "formula": str(file),
        "ok": False,
        "steps": None,
        "issues": [{"level": "error", "code": code, "path": path, "message": f"{file}: {message}"}],
    }


def test_check_json_of_an_unknown_formula_is_json_with_exit_2(app: typer.Typer, tmp_path: Path) -> None:
    exit_code, out, _ = run(app, "check", "relase", "-p", str(tmp_path), "--json")
    assert exit_code == 2
    [issue] = json.loads(out)["issues"]
    assert issue["code"] == "not-found" and "formula 'relase' not found in" in issue["message"]


def test_check_help_lists_the_exit_codes_it_uses(app: typer.Typer) -> None:
    code, out, _ = run(app, "check", "--help")
    assert code == 0
    words = " ".join(out.replace("│", " ").split())
    assert (
        "Exit codes: 0 no errors (warnings allowed); 1 error-level issues; 2 the formula cannot be read"
    ) in words


def test_check_without_a_required_var_says_how_to_give_it(app: typer.Typer) -> None:
    code, out, _ = run(app, "check", "release", "-p", str(EXAMPLES))
    assert code == 1
    assert out.splitlines()[-1] == "give the formula's vars with --var NAME=VALUE"


def test_show_is_not_cut_at_80_columns_when_the_output_is_not_a_terminal(app: typer.Typer) -> None:
    code, out, _ = run(app, "show", "release", "-p", str(EXAMPLES), "--var", "version=1.2.3")
    assert code == 0
    line = next(line for line in out.splitlines() if "publish" in line)
    assert line.endswith("gate run-tests.output.failed == 0 and build.status == 'complete'; timeout 1800s")
    assert len(line) > 80


def test_malformed_toml_names_line_and_column(app: typer.Typer, tmp_path: Path) -> None:
    path = write(tmp_path, "bad", 'formula = "bad"\nversion = \ndescription = "x"\n')
    code, _, err = run(app, "check", str(path))
    assert code == 2
    assert err.strip() == f"error: {path}: invalid TOML at line 2, column 11: Invalid value"


def test_an_unknown_name_is_a_load_error(app: typer.Typer, tmp_path: Path) -> None:
    write(tmp_path, "release", 'formula = "release"\n')
    code, _, err = run(app, "check", "relase", "-p", str(tmp_path))
    assert code == 2
    assert "formula 'relase' not found in" in err and "(did you mean 'release'?)" in err


def test_show_prints_a_tree_and_a_mermaid_graph(app: typer.Typer) -> None:
    code, out, _ = run(app, "show", "retry-until", "-p", str(EXAMPLES))
    assert code == 0
    tree, graph = out.split("\n\n", 1)
    assert tree.splitlines()[0] == "retry-until"
    assert "wait-healthy.iter1.check" in tree
    assert graph.strip().splitlines() == [
        "graph TD",
        '  s0["deploy: Deploy api"]',
        '  subgraph s1 ["wait-healthy: Wait until api is healthy"]',
        '    s2["wait-healthy.iter1.check: Health check 1 of api"]',
        "  end",
        '  s3["announce: Announce that api is live"]',
        "  s0 --> s1",
        "  s1 --> s3",
    ]


def test_show_json_has_steps_and_the_graph(app: typer.Typer) -> None:
    code, out, _ = run(app, "show", "fanout", "-p", str(EXAMPLES), "--json")
    assert code == 0
    shown = json.loads(out)
    assert [s["id"] for s in shown["steps"]] == ["list-regions", "verify"]
    assert shown["steps"][1]["needs"] == ["list-regions"]
    assert shown["mermaid"].startswith("graph TD\n")
    assert "s0 --> s1" in shown["mermaid"]


def test_show_works_without_the_required_vars(app: typer.Typer) -> None:
    code, out, _ = run(app, "show", "release", "-p", str(EXAMPLES))
    assert code == 0
    assert "Run the test suite for <version>" in out


def test_cook_json_prints_the_plan(app: typer.Typer) -> None:
    code, out, _ = run(app, "cook", "release", "-p", str(EXAMPLES), "--var", "version=2.0.0", "--json")
    assert code == 0
    plan = json.loads(out)
    steps = {s["id"]: s for s in plan["steps"]}
    assert list(steps) == ["run-tests", "build", "approve", "publish"]
    assert steps["publish"]["needs"] == ["approve"]
    assert steps["publish"]["gate"]["timeout"] == 1800
    assert steps["build"]["executor"] == {
        "type": "tool",
        "name": "build_artifact",
        "args": {"version": "2.0.0", "channel": "stable"},
    }
    assert plan["vars"]["version"] == "2.0.0"


def test_cook_needs_valid_vars(app: typer.Typer) -> None:
    code, out, err = run(app, "cook", "release", "-p", str(EXAMPLES), "--var", "channel=nightly")
    assert code == 2 and out == ""
    assert err.strip() == (
        f"error: {EXAMPLES / 'release.formula.toml'}: vars.version: required var 'version' is not set "
        "(and 1 more var problem)"
    )


def test_cook_prints_a_table(app: typer.Typer) -> None:
    code, out, _ = run(app, "cook", "composed-release", "-p", str(EXAMPLES), "--var", "version=1.0.0")
    assert code == 0
    assert "composed-release: 9 steps" in out
    assert "notes.approve" in out


def test_a_var_without_equals_is_refused(app: typer.Typer) -> None:
    code, _, err = run(app, "check", "release", "-p", str(EXAMPLES), "--var", "version")
    assert code == 2
    assert "--var expects NAME=VALUE, got 'version'" in err
