"""Checking plans: every issue code with its exact message and path; check_formula's load and cook issues."""

from __future__ import annotations

from pathlib import Path

from formula_helpers import Library, cooked, formula

from plangate.formulas import CookedStep, Issue, Plan, check, check_formula, has_errors
from plangate.formulas.check import SUPPORTED_EXECUTORS


def issues(text: str, tools: set[str] | None = None, **library: str) -> list[tuple[str, str, str, str]]:
    plan = cooked(text, **library)
    return [(i.level, i.code, i.path, i.message) for i in check(plan, tools=tools)]


def test_a_clean_plan_has_no_issues() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "a"\ntool = { name = "x" }\n[[steps]]\nid = "b"\nneeds = ["a"]\n'
    assert issues(text, tools={"x"}) == []


def test_unknown_needs_with_did_you_mean() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "test"\n[[steps]]\nid = "b"\nneeds = ["tset", "zzz"]\n'
    assert issues(text) == [
        (
            "error",
            "unknown-need",
            "steps[1].needs",
            "step 'b' needs unknown step 'tset' (did you mean 'test'?)",
        ),
        ("error", "unknown-need", "steps[1].needs", "step 'b' needs unknown step 'zzz'"),
    ]


def test_cycles_are_named() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "a"
    needs = ["c"]
    [[steps]]
    id = "b"
    needs = ["a"]
    [[steps]]
    id = "c"
    needs = ["b"]
    [[steps]]
    id = "self"
    needs = ["self"]
    """
    assert issues(text) == [
        ("error", "cycle", "steps[0].needs", "cycle: a -> c -> b -> a"),
        ("error", "cycle", "steps[3].needs", "cycle: self -> self"),
    ]


def test_a_child_needing_its_parent_is_a_cycle() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "p"\n[[steps.children]]\nid = "c"\nneeds = ["p"]\n'
    assert issues(text) == [
        (
            "error",
            "cycle",
            "steps[0].needs",
            "cycle: p -> c -> p (a parent completes only after its children)",
        )
    ]


def test_bad_condition_syntax_gives_the_column() -> None:
    text = (
        'formula = "f"\n[[steps]]\nid = "build"\n[[steps]]\nid = "b"\n'
        "gate = { condition = \"build.status = 'x'\" }\n"
    )
    assert issues(text) == [
        (
            "error",
            "condition-syntax",
            "steps[1].gate.condition",
            "expected a comparison operator (==, !=, <, <=, >, >=) at column 14, found '=' "
            "(use '==' to compare) "
            "in \"build.status = 'x'\"",
        )
    ]


def test_gates_naming_unknown_steps() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "run-tests"
    [[steps]]
    id = "publish"
    needs = ["run-tests"]
    gate = { condition = "run-test.output.failed == 0 and children(nope).all(status == 'complete')" }
    """
    assert issues(text) == [
        (
            "error",
            "unknown-step",
            "steps[1].gate.condition",
            "the condition names unknown step 'run-test' (did you mean 'run-tests'?)",
        ),
        ("error", "unknown-step", "steps[1].gate.condition", "the condition names unknown step 'nope'"),
    ]


def test_until_conditions_may_name_the_body_steps() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "poll"
    [steps.loop]
    until = "check.output.ok == true and nope.status == 'complete'"
    max = 3
    body = [{ id = "check" }]
    """
    assert issues(text) == [
        ("error", "unknown-step", "steps[0].loop.until", "the condition names unknown step 'nope'")
    ]


def test_waits_for_an_unknown_step() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "fan"\n[[steps]]\nid = "j"\nwaits_for = "children-of(fann)"\n'
    assert issues(text) == [
        (
            "error",
            "unknown-step",
            "steps[1].waits_for",
            "waits_for names unknown step 'fann' (did you mean 'fan'?)",
        )
    ]


def test_unknown_tools_only_when_tools_are_given() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "a"\ntool = { name = "run_tset" }\n'
    assert issues(text) == []
    assert issues(text, tools={"run_tests", "publish"}) == [
        (
            "error",
            "unknown-tool",
            "steps[0].tool.name",
            "the executor names unknown tool 'run_tset' (did you mean 'run_tests'?)",
        )
    ]


def test_agent_and_llm_steps_are_supported_and_an_agent_names_only_known_tools() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "a"
    agent = { prompt = "do it", tools = ["search", "serch"] }
    [[steps]]
    id = "b"
    llm = { prompt = "say it", schema = { type = "object" } }
    """
    assert issues(text, tools={"search"}) == [
        (
            "error",
            "unknown-tool",
            "steps[0].agent.tools",
            "the executor names unknown tool 'serch' (did you mean 'search'?)",
        )
    ]
    assert issues(text) == []  # without a registry, tool names are not judged
    assert {"tool", "agent", "llm", "human", "formula", "manual"} == SUPPORTED_EXECUTORS


def test_an_agents_done_when_is_checked_as_a_condition_over_receipts() -> None:
    text = """
    formula = "f"
    [vars]
    tool = "place"
    [[steps]]
    id = "ok"
    agent = { prompt = "p", tools = ["place"], done_when = "receipts.any(tool == '{{tool}}' and success)" }
    [[steps]]
    id = "typo"
    agent = { prompt = "p", tools = ["place"], done_when = "receipts.any(tol == 'place')" }
    [[steps]]
    id = "steps"
    agent = { prompt = "p", tools = ["place"], done_when = "ok.status == 'complete'" }
    [[steps]]
    id = "words"
    agent = { prompt = "p", tools = ["place"], done_when = "the review is placed" }
    [[steps]]
    id = "absent"
    agent = { prompt = "p", tools = ["place", "move"], done_when = "receipts.any(tool == 'plcae')" }
    [[steps]]
    id = "source"
    agent = { prompt = "p", tools = ["place"], done_when = "receipts.any(source == 'write')" }
    """
    assert issues(text, tools={"place", "move"}) == [
        (
            "error",
            "condition-syntax",
            "steps[1].agent.done_when",
            "unknown receipt field 'tol' at column 14; expected tool, success, step, source or output (did "
            "you mean 'tool'?) in \"receipts.any(tol == 'place')\"",
        ),
        (
            "error",
            "condition-syntax",
            "steps[2].agent.done_when",
            "a done_when condition reads the run's receipts only; found 'ok.status' at column 1 (an agent "
            "run has no steps to read) in \"ok.status == 'complete'\"",
        ),
        (
            "error",
            "condition-syntax",
            "steps[3].agent.done_when",
            "expected '.' and 'status', 'id' or 'output' after 'the' at column 5, found 'review' in 'the "
            "review is placed'",
        ),
        (
            "warning",
            "done-when-tool",
            "steps[4].agent.done_when",
            "done_when names the tool 'plcae', which the step does not give its agent (its tools: place, "
            "move) (did you mean 'place'?): no receipt of it can make the condition hold",
        ),
        (
            "error",
            "condition-syntax",
            "steps[5].agent.done_when",
            "unknown receipt source 'write' at column 24; expected 'tool_observation', 'write_receipt', "
            "'user_reply' in \"receipts.any(source == 'write')\"",
        ),
    ]
    plan = cooked(text)
    # Vars are rendered into the condition at cook time; the plan keeps it for the run.
    assert plan.steps[0].executor.done_when == "receipts.any(tool == 'place' and success)"  # type: ignore[union-attr]


def test_a_gate_cannot_read_receipts() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "a"
    gate = { condition = "receipts.any(success)" }
    """
    assert issues(text) == [
        (
            "error",
            "condition-receipts",
            "steps[0].gate.condition",
            "receipts are an agent's evidence, read by its done_when; a formula's gate condition has none to "
            "read, so it could never hold, in 'receipts.any(success)'",
        )
    ]


def test_an_llm_schema_that_is_not_a_json_schema_is_an_error() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "a"\nllm = { prompt = "p", schema = { type = "objekt" } }\n'
    ((level, code, path, message),) = issues(text)
    assert (level, code, path) == ("error", "llm-schema", "steps[0].llm.schema")
    assert message.startswith("not a valid JSON schema: at $.type: ") and "'objekt'" in message


def test_output_references_must_name_a_step_that_is_needed() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "build"
    [[steps]]
    id = "mid"
    needs = ["build"]
    [[steps]]
    id = "ok"
    needs = ["mid"]
    title = "{{steps.build.output.path}}"
    [[steps]]
    id = "racy"
    tool = { name = "x", args = { p = "{{steps.build.output.path}}", q = "{{steps.biuld.output.path}}" } }
    """
    assert issues(text) == [
        (
            "warning",
            "output-not-needed",
            "steps[3]",
            "step 'racy' reads the output of 'build' but does not need it, so it may start before that "
            "output exists",
        ),
        (
            "error",
            "unknown-step",
            "steps[3]",
            "{{steps...}} reads unknown step 'biuld' (did you mean 'build'?)",
        ),
    ]


def test_var_issues_come_from_check_formula() -> None:
    text = """
    formula = "f"
    [vars.version]
    required = true
    [vars.channel]
    enum = ["stable", "beta"]
    default = "stable"
    [vars.n]
    type = "int"
    default = 1
    [vars.tag]
    pattern = "v[0-9]+"
    default = "v1"
    [[steps]]
    id = "a"
    title = "{{version}} {{channel}} {{n}} {{tag}}"
    """
    plan, found = check_formula(formula(text), {"channel": "nightly", "n": "x", "tag": "1", "extra": "y"})
    assert plan is not None and plan.steps[0].title == "<version> nightly x 1"
    assert [(i.level, i.code, i.path, i.message) for i in found] == [
        ("error", "missing-var", "vars.version", "required var 'version' is not set"),
        ("error", "var-enum", "vars.channel", "var 'channel' must be one of 'stable', 'beta', got 'nightly'"),
        ("error", "var-type", "vars.n", "var 'n': expected an int, got 'x'"),
        ("error", "var-pattern", "vars.tag", "var 'tag' is '1', which does not match the pattern 'v[0-9]+'"),
        ("warning", "unknown-var", "vars.extra", "var 'extra' is not declared by the formula"),
    ]


def test_check_formula_turns_load_errors_into_issues(tmp_path: Path) -> None:
    (tmp_path / "bad.formula.toml").write_text(
        'formula = "bad"\n[[steps]]\nid = "a"\nretries = "x"\n[[steps]]\nid = "b"\nneeds = 3\n',
        encoding="utf-8",
    )
    plan, found = check_formula("bad", search_paths=[tmp_path])
    assert plan is None
    source = tmp_path / "bad.formula.toml"
    assert [(i.code, i.path, i.message) for i in found] == [
        ("schema", "steps[0].retries", f"{source}: expected an integer, got a string ('x')"),
        ("schema", "steps[1].needs", f"{source}: expected a list, got an integer (3)"),
    ]
    plan, found = check_formula("missing", search_paths=[tmp_path])
    assert plan is None and [i.code for i in found] == ["load-error"]


def test_check_formula_turns_cook_errors_into_issues() -> None:
    plan, found = check_formula(formula('formula = "f"\n[[steps]]\nid = "a"\ntitle = "{{nope}}"\n'), {})
    assert plan is None
    assert found == [
        Issue(
            level="error",
            code="cook-error",
            path="steps[0].title",
            message="undefined name 'nope' in template '{{nope}}'",
        )
    ]


def test_check_formula_reports_sub_formulas_that_cannot_be_loaded() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "a"
    formula = { name = "child" }
    on_complete = { for_each = "output.items", formula = "per-item" }
    """
    library = Library(child='formula = "child"\n')
    plan, found = check_formula(formula(text), {}, loader=library)
    assert plan is not None
    assert [(i.code, i.path, i.message) for i in found] == [
        ("unknown-formula", "steps[0].on_complete.formula", "formula 'per-item' not found")
    ]


def test_duplicate_ids_in_a_stored_plan() -> None:
    plan = Plan(
        formula="f",
        steps=[CookedStep(id="a", title="a", source="x"), CookedStep(id="a", title="a", source="y")],
    )
    assert [(i.code, i.path, i.message) for i in check(plan)] == [
        ("duplicate-id", "y", "duplicate step id 'a' (also at x)")
    ]


def test_has_errors_ignores_warnings() -> None:
    warning = Issue(level="warning", code="unknown-var", path="vars.x", message="m")
    error = Issue(level="error", code="cycle", path="p", message="m")
    assert not has_errors([warning])
    assert has_errors([warning, error])
    assert str(error) == "error: p: m [cycle]"


def test_numbers_json_cannot_hold_are_errors_where_the_file_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "f.formula.toml"
    path.write_text(
        'formula = "f"\n[vars.ratio]\ntype = "float"\ndefault = inf\n'
        '[[steps]]\nid = "a"\ntool = { name = "x", args = { x = nan, deep = [1, -inf] } }\n'
        "[steps.metadata]\nlimit = 2.5\n"
    )
    plan, found = check_formula(path, tools={"x"})
    assert plan is not None
    message = "is not a number JSON can hold, and a run keeps its plan as JSON"
    assert [(i.level, i.path, i.message) for i in found if i.code == "non-finite-number"] == [
        ("error", "vars.ratio", f"inf {message}"),
        ("error", "steps[0].tool.args.x", f"nan {message}"),
        ("error", "steps[0].tool.args.deep[1]", f"-inf {message}"),
    ]


def test_a_formula_that_runs_itself_is_an_error_unless_a_condition_may_end_it(tmp_path: Path) -> None:
    # Before, each passed check, and running it nested sub-runs without end.
    files = {
        "self": 'formula = "self"\n[[steps]]\nid = "a"\nformula = { name = "self" }\n',
        "ping": 'formula = "ping"\n[[steps]]\nid = "a"\n[[steps]]\nid = "b"\nformula = { name = "pong" }\n',
        "pong": (
            'formula = "pong"\n[[steps]]\nid = "c"\nchildren = [{ id = "d", formula = { name = "ping" } }]\n'
        ),
        "fan": (
            'formula = "fan"\n[[steps]]\nid = "a"\ntool = { name = "x" }\n'
            'on_complete = { for_each = "output.items", formula = "fan" }\n'
        ),
        "maybe": (
            'formula = "maybe"\n[vars.more]\ndefault = "no"\n[[steps]]\nid = "a"\n'
            "condition = \"vars.more == 'yes'\"\n"
            'formula = { name = "maybe", vars = { more = "no" } }\n'
        ),
        "calls": 'formula = "calls"\n[[steps]]\nid = "a"\nformula = { name = "self" }\n',
    }
    for name, text in files.items():
        (tmp_path / f"{name}.formula.toml").write_text(text, encoding="utf-8")

    def runs_itself(name: str) -> list[tuple[str, str, str]]:
        _, found = check_formula(name, search_paths=[tmp_path])
        return [(i.level, i.path, i.message) for i in found if i.code == "formula-runs-itself"]

    assert runs_itself("self") == [
        ("error", "steps[0]", "runs itself without end: self -> self; each run would nest inside the last")
    ]
    assert runs_itself("ping") == [
        (
            "error",
            "steps[1]",
            "runs itself without end: ping -> pong -> ping; each run would nest inside the last",
        )
    ]
    assert [level for level, _, _ in runs_itself("fan")] == ["error"]
    assert runs_itself("maybe") == [
        (
            "warning",
            "steps[0]",
            "runs itself (maybe -> maybe) under a condition or gate: each run nests inside the last until it "
            "no longer holds, at most 20 deep",
        )
    ]
    assert runs_itself("calls") == []  # it runs one that runs itself: reported there, not here
