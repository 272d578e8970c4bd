"""Cooking: vars, templates, conditions, children and loops (compose and advice: test_formula_compose.py)."""

from __future__ import annotations

import pytest
from formula_helpers import Library, cooked, formula, ids, needs

from plangate.errors import FormulaError
from plangate.formulas import HumanExecutor, ToolExecutor, WaitsFor, cook, expand_iteration
from plangate.formulas.plan import PlanGate

RELEASE = """
formula = "release"
[vars.version]
required = true
pattern = '^\\d+\\.\\d+\\.\\d+$'
[vars.channel]
default = "stable"
enum = ["stable", "beta"]
[vars.replicas]
type = "int"
default = 2

[[steps]]
id = "test"
title = "Test {{version}}"
retries = 2
timeout = "20m"
labels = ["ci", "{{channel}}"]
metadata = { owner = "qa", version = "{{version}}" }
[steps.tool]
name = "run_tests"
args = { version = "{{version}}", replicas = "{{replicas}}", flags = ["-q", "{{channel}}"] }

[[steps]]
id = "approve"
needs = ["test"]
human = { prompt = "Ship {{version}} to {{channel}}?" }

[[steps]]
id = "publish"
depends_on = ["approve"]
gate = { condition = "test.output.failed == 0", timeout = "30m", human = true }
tool = { name = "publish", args = { report = "{{steps.test.output.report}}" } }
"""


def test_vars_render_into_titles_prompts_args_labels_and_metadata() -> None:
    plan = cooked(RELEASE, {"version": "1.2.3", "replicas": "5"})
    test, approve, publish = plan.steps
    assert test.title == "Test 1.2.3"
    assert test.executor == ToolExecutor(
        name="run_tests", args={"version": "1.2.3", "replicas": 5, "flags": ["-q", "stable"]}
    )
    assert (test.retries, test.timeout, test.labels) == (2, 1200, ["ci", "stable"])
    assert test.metadata == {"owner": "qa", "version": "1.2.3"}
    assert approve.executor == HumanExecutor(prompt="Ship 1.2.3 to stable?", kind="approve")
    assert publish.needs == ["approve"]
    assert publish.gate == PlanGate(
        condition="test.output.failed == 0", timeout=1800, human="Approve 'publish'?"
    )
    assert publish.executor == ToolExecutor(name="publish", args={"report": "{{steps.test.output.report}}"})
    assert plan.vars == {"version": "1.2.3", "channel": "stable", "replicas": 5}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "test.formula.toml: vars.version: required var 'version' is not set"),
        (
            {"version": "1.2"},
            "test.formula.toml: vars.version: var 'version' is '1.2', which does not match the pattern "
            "'^\\d+\\.\\d+\\.\\d+$'",
        ),
        (
            {"version": "1.2.3", "channel": "nightly"},
            "test.formula.toml: vars.channel: var 'channel' must be one of 'stable', 'beta', got 'nightly'",
        ),
        (
            {"version": "1.2.3", "replicas": "two"},
            "test.formula.toml: vars.replicas: var 'replicas': expected an int, got 'two'",
        ),
        (
            {"channel": "x"},
            "test.formula.toml: vars.version: required var 'version' is not set (and 1 more var problem)",
        ),
    ],
)
def test_var_problems_stop_cooking(given: dict[str, object], message: str) -> None:
    with pytest.raises(FormulaError) as caught:
        cooked(RELEASE, given)
    assert str(caught.value) == message


def test_without_validation_missing_vars_get_stand_ins_and_stay_out_of_the_plan() -> None:
    plan = cook(formula(RELEASE), {"channel": "nightly"}, loader=Library(), validate_vars=False)
    assert plan.steps[0].title == "Test <version>"
    assert plan.vars == {"channel": "nightly", "replicas": 2}


def test_an_undefined_template_name_names_the_path() -> None:
    with pytest.raises(FormulaError) as caught:
        cooked(
            'formula = "f"\n[[steps]]\nid = "a"\n[steps.tool]\nname = "x"\nargs = { cmd = "run {{cmd}}" }\n'
        )
    assert (
        str(caught.value)
        == "test.formula.toml: steps[0].tool.args.cmd: undefined name 'cmd' in template 'run {{cmd}}'"
    )


CHILDREN = """
formula = "f"
[[steps]]
id = "setup"
[[steps]]
id = "group"
needs = ["setup"]
[[steps.children]]
id = "one"
[[steps.children]]
id = "two"
needs = ["one"]
[[steps.children.children]]
id = "deep"
[[steps]]
id = "after"
needs = ["group"]
waits_for = "any-children"
"""


def test_children_know_their_parent_and_inherit_its_needs() -> None:
    plan = cooked(CHILDREN)
    assert ids(plan) == ["setup", "group", "one", "two", "deep", "after"]
    group = plan.step("group")
    assert group.children == ["one", "two"]
    assert group.waits_for == WaitsFor(mode="all-children")
    assert plan.step("deep").parent == "two"
    assert needs(plan) == {
        "setup": [],
        "group": ["setup"],
        "one": ["setup"],
        "two": ["one", "setup"],
        "deep": ["one", "setup"],
        "after": ["group"],
    }
    assert plan.step("after").waits_for == WaitsFor(mode="any-children")


CONDITIONS = """
formula = "f"
[vars]
env = "staging"
[[steps]]
id = "build"
[[steps]]
id = "canary"
needs = ["build"]
condition = "vars.env == 'prod'"
[[steps.children]]
id = "canary-check"
[[steps]]
id = "deploy"
needs = ["canary", "canary-check"]
[[steps]]
id = "smoke"
condition = "vars.env != 'prod' and not vars.skip_smoke == true"
needs = ["deploy"]
"""


def test_false_conditions_drop_the_step_and_its_children_and_dependents_inherit_its_needs() -> None:
    plan = cooked(CONDITIONS)
    assert ids(plan) == ["build", "deploy", "smoke"]
    assert plan.step("deploy").needs == ["build"]
    prod = cooked(CONDITIONS, {"env": "prod"})
    assert ids(prod) == ["build", "canary", "canary-check", "deploy"]
    assert prod.step("deploy").needs == ["canary", "canary-check"]


def test_conditions_compare_typed_vars() -> None:
    text = 'formula = "f"\n[vars]\nn = 3\n[[steps]]\nid = "big"\ncondition = "vars.n > 2"\n'
    assert ids(cooked(text)) == ["big"]
    assert ids(cooked(text, {"n": "1"})) == []


def test_a_dropped_step_may_use_names_its_condition_guards() -> None:
    text = """
    formula = "f"
    [vars.region]
    description = "optional"
    [[steps]]
    id = "deploy-{{region}}"
    condition = "vars.region != null"
    """
    assert ids(cooked(text)) == []
    assert ids(cooked(text, {"region": "eu"})) == ["deploy-eu"]


def test_a_condition_naming_a_step_is_an_error() -> None:
    with pytest.raises(FormulaError) as caught:
        cooked(
            'formula = "f"\n[[steps]]\nid = "a"\n[[steps]]\nid = "b"\n'
            "condition = \"a.status == 'complete'\"\n"
        )
    assert str(caught.value) == (
        "test.formula.toml: steps[1].condition: a step condition is decided at cook time from vars only, "
        "but it "
        "names the step 'a'; use a gate to wait on other steps"
    )


def test_a_bad_condition_names_the_column() -> None:
    with pytest.raises(FormulaError) as caught:
        cooked('formula = "f"\n[[steps]]\nid = "a"\ncondition = "vars.x =="\n')
    assert str(caught.value) == (
        "test.formula.toml: steps[0].condition: expected a value after '==' at column 10, found end of input "
        "in 'vars.x =='"
    )


COUNT_LOOP = """
formula = "f"
[[steps]]
id = "prepare"
[[steps]]
id = "rounds"
needs = ["prepare"]
[steps.loop]
count = 3
var = "i"
[[steps.loop.body]]
id = "build"
title = "Build round {{i}}"
tool = { name = "build", args = { round = "{{i}}", label = "r{{i}}" } }
[[steps.loop.body]]
id = "test"
needs = ["build"]
title = "Test {{steps.build.output.path}}"
[[steps]]
id = "ship"
needs = ["rounds"]
"""


def test_count_loops_unroll_with_iteration_ids_and_chain_the_iterations() -> None:
    plan = cooked(COUNT_LOOP)
    assert ids(plan) == [
        "prepare",
        "rounds",
        "rounds.iter1.build",
        "rounds.iter1.test",
        "rounds.iter2.build",
        "rounds.iter2.test",
        "rounds.iter3.build",
        "rounds.iter3.test",
        "ship",
    ]
    assert plan.step("rounds").children == ids(plan)[2:8]
    assert needs(plan)["rounds.iter1.build"] == ["prepare"]
    assert needs(plan)["rounds.iter2.build"] == ["rounds.iter1.test", "prepare"]
    assert needs(plan)["rounds.iter2.test"] == ["rounds.iter2.build", "prepare"]
    assert plan.step("rounds.iter3.build").title == "Build round 3"
    assert plan.step("rounds.iter3.build").executor == ToolExecutor(
        name="build", args={"round": 3, "label": "r3"}
    )
    assert plan.step("rounds.iter2.test").title == "Test {{steps.rounds.iter2.build.output.path}}"
    assert plan.step("rounds.iter2.build").source == "steps[1].loop.body[0]"
    assert plan.loops == []


def test_loop_vars_reach_ids_and_conditions() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "regions"
    loop = { range = "1..4", var = "n", body = [
        { id = "shard-{{n}}", condition = "vars.n != 2" },
    ] }
    """
    assert ids(cooked(text)) == [
        "regions",
        "regions.iter1.shard-1",
        "regions.iter3.shard-3",
        "regions.iter4.shard-4",
    ]


def test_range_loops_evaluate_arithmetic_with_vars() -> None:
    text = """
    formula = "f"
    [vars]
    n = 2
    [[steps]]
    id = "l"
    loop = { range = "{{n}}..({{n}}+1)*2-1", var = "k", body = [{ id = "x", title = "k={{k}}" }] }
    """
    plan = cooked(text)
    assert [s.title for s in plan.steps[1:]] == ["k=2", "k=3", "k=4", "k=5"]
    assert ids(plan)[1:3] == ["l.iter1.x", "l.iter2.x"]


def test_an_empty_range_makes_no_iterations() -> None:
    text = 'formula = "f"\n[vars]\nn = 0\n[[steps]]\nid = "l"\n'
    text += 'loop = { range = "1..{{n}}", body = [{ id = "x" }] }'

    plan = cooked(text)
    assert ids(plan) == ["l"] and plan.steps[0].children == []


def test_a_bad_range_shows_what_it_was_rendered_from() -> None:
    text = 'formula = "f"\n[vars]\nn = 3\n[[steps]]\nid = "l"\n'
    text += 'loop = { range = "1..{{n}}*", body = [{ id = "x" }] }'

    with pytest.raises(FormulaError) as caught:
        cooked(text)
    assert str(caught.value) == (
        "test.formula.toml: steps[0].loop.range: expected a number or '(' at column 6, found the end of the "
        "expression in '1..3*' (rendered from '1..{{n}}*')"
    )


def test_loops_are_bounded() -> None:
    with pytest.raises(FormulaError, match=r"steps\[0\]\.loop\.range: a loop may run at most 1000 times"):
        cooked('formula = "f"\n[[steps]]\nid = "l"\nloop = { range = "1..10^6", body = [{ id = "x" }] }\n')
    with pytest.raises(FormulaError, match=r"steps\[0\]\.loop\.count: a loop may run at most 1000 times"):
        cooked('formula = "f"\n[[steps]]\nid = "l"\nloop = { count = 5000, body = [{ id = "x" }] }\n')


def test_rendered_ids_must_be_valid_and_unique() -> None:
    with pytest.raises(FormulaError) as caught:
        cooked('formula = "f"\n[vars]\nname = "a b"\n[[steps]]\nid = "x-{{name}}"\n')
    assert str(caught.value) == (
        "test.formula.toml: steps[0].id: step ids may contain only letters, digits, '_', '.' and '-', "
        "got 'x-a b'"
    )
    with pytest.raises(FormulaError) as caught:
        cooked('formula = "f"\n[vars]\nn = "a"\n[[steps]]\nid = "a"\n[[steps]]\nid = "{{n}}"\n')
    assert (
        str(caught.value) == "test.formula.toml: steps[1].id: duplicate step id 'a' (also made by steps[0])"
    )


UNTIL = """
formula = "f"
[vars]
service = "api"
[[steps]]
id = "deploy"
[[steps]]
id = "poll"
needs = ["deploy"]
[steps.loop]
until = "check.output.healthy == true"
max = 4
var = "attempt"
[[steps.loop.body]]
id = "wait"
title = "Wait {{attempt}}"
gate = { timer = "10s" }
[[steps.loop.body]]
id = "check"
needs = ["wait"]
[steps.loop.body.tool]
name = "check_health"
args = { service = "{{service}}", attempt = "{{attempt}}", after = "{{steps.wait.output.t}}" }
[[steps]]
id = "announce"
needs = ["poll"]
"""


def test_until_loops_cook_iteration_one_and_record_the_loop() -> None:
    plan = cooked(UNTIL)
    assert ids(plan) == ["deploy", "poll", "poll.iter1.wait", "poll.iter1.check", "announce"]
    (loop,) = plan.loops
    assert (loop.id, loop.var, loop.until, loop.max, loop.source) == (
        "poll",
        "attempt",
        "check.output.healthy == true",
        4,
        "steps[1].loop",
    )
    assert loop.context == {"service": "api"}
    assert loop.step_id(2, "check") == "poll.iter2.check"


def test_expand_iteration_makes_the_next_iteration_after_the_previous_one() -> None:
    plan = cooked(UNTIL)
    third = expand_iteration(plan, "poll", 3)
    assert [s.id for s in third] == ["poll.iter3.wait", "poll.iter3.check"]
    wait, check = third
    assert wait.needs == ["poll.iter2.check", "deploy"]
    assert wait.parent == "poll" and wait.title == "Wait 3"
    assert check.needs == ["poll.iter3.wait", "deploy"]
    assert check.executor == ToolExecutor(
        name="check_health",
        args={"service": "api", "attempt": 3, "after": "{{steps.poll.iter3.wait.output.t}}"},
    )


def test_expand_iteration_one_is_what_cooking_made() -> None:
    plan = cooked(UNTIL)
    assert expand_iteration(plan, "poll", 1) == [plan.step("poll.iter1.wait"), plan.step("poll.iter1.check")]


def test_expand_iteration_refuses_other_loops_and_iterations() -> None:
    plan = cooked(UNTIL)
    with pytest.raises(FormulaError, match=r"iteration 5 of loop 'poll' is outside 1\.\.4"):
        expand_iteration(plan, "poll", 5)
    with pytest.raises(FormulaError, match=r"has no until loop 'pol' \(until loops: poll\)"):
        expand_iteration(plan, "pol", 2)


def test_expand_iteration_survives_the_plan_round_trip() -> None:
    plan = cooked(UNTIL)
    again = type(plan).from_dict(plan.to_dict())
    assert expand_iteration(again, "poll", 2) == expand_iteration(plan, "poll", 2)


def test_on_complete_is_kept_with_its_vars_rendered() -> None:
    text = """
    formula = "f"
    [vars]
    env = "prod"
    [[steps]]
    id = "list"
    [steps.on_complete]
    for_each = "output.items"
    formula = "deploy-one"
    vars = { item = "{item}", env = "{{env}}" }
    parallel = true
    """
    on_complete = cooked(text).steps[0].on_complete
    assert on_complete is not None
    assert (on_complete.for_each, on_complete.formula, on_complete.parallel) == (
        "output.items",
        "deploy-one",
        True,
    )
    assert on_complete.vars == {"item": "{item}", "env": "prod"}


def test_waits_for_children_of_another_step() -> None:
    text = (
        'formula = "f"\n[[steps]]\nid = "fan"\n'
        '[[steps]]\nid = "join"\nneeds = ["fan"]\nwaits_for = "children-of(fan)"\n'
    )
    assert cooked(text).step("join").waits_for == WaitsFor(mode="children-of", step="fan")


def test_a_human_step_without_a_prompt_gets_one() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "ok"\ntitle = "Sign off"\nhuman = { kind = "approve" }\n'
    assert cooked(text).steps[0].executor == HumanExecutor(prompt="Approve 'Sign off'?")
