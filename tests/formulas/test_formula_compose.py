"""Cooking, part two: expansions (inline and composed), maps, branches, compose gates, advice and aspects."""

from __future__ import annotations

import pytest
from formula_helpers import cooked, ids, needs

from plangate.errors import FormulaError
from plangate.formulas import HumanExecutor, ToolExecutor
from plangate.formulas.plan import PlanGate

REVIEW = """
formula = "review"
type = "expansion"
[vars.reviewer]
required = true
[vars.rounds]
default = 1
[[template]]
id = "draft"
title = "Draft {{target.title}}"
tool = { name = "write", args = { topic = "{{target.id}}", rounds = "{{rounds}}" } }
[[template]]
id = "approve"
needs = ["draft"]
human = { prompt = "{{reviewer}}: approve {{steps.draft.output.text}}?" }
"""

INLINE = """
formula = "f"
[[steps]]
id = "research"
[[steps]]
id = "notes"
title = "Release notes"
needs = ["research"]
gate = { condition = "research.output.ok == true" }
expand = "review"
expand_vars = { reviewer = "ana" }
[[steps]]
id = "publish"
needs = ["notes"]
"""


def test_an_inline_expansion_replaces_the_step_in_place() -> None:
    plan = cooked(INLINE, review=REVIEW)
    assert ids(plan) == ["research", "notes.draft", "notes.approve", "publish"]
    draft, approve = plan.step("notes.draft"), plan.step("notes.approve")
    assert draft.title == "Draft Release notes"
    assert draft.executor == ToolExecutor(name="write", args={"topic": "notes", "rounds": 1})
    assert draft.needs == ["research"]
    assert draft.gate == PlanGate(condition="research.output.ok == true")
    assert approve.needs == ["notes.draft"]
    assert approve.gate is None
    assert approve.executor == HumanExecutor(prompt="ana: approve {{steps.notes.draft.output.text}}?")
    assert plan.step("publish").needs == ["notes.approve"]
    assert draft.source == "steps[1].expand(review).template[0]"
    assert set(plan.expansions) == {"review"}


def test_expansion_vars_are_enforced() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "notes"\nexpand = "review"\n'
    with pytest.raises(FormulaError) as caught:
        cooked(text, review=REVIEW)
    assert (
        str(caught.value)
        == "test.formula.toml: steps[0].expand: expansion 'review': required var 'reviewer' is not set"
    )


def test_an_expansion_may_take_a_var_from_the_formula() -> None:
    text = 'formula = "f"\n[vars]\nreviewer = "bo"\n[[steps]]\nid = "notes"\nexpand = "review"\n'
    assert cooked(text, review=REVIEW).step("notes.approve").executor.prompt.startswith("bo:")  # type: ignore[union-attr]


def test_the_named_formula_must_be_an_expansion() -> None:
    text = 'formula = "f"\n[[steps]]\nid = "notes"\nexpand = "plain"\n'
    with pytest.raises(FormulaError) as caught:
        cooked(text, plain='formula = "plain"\n[[steps]]\nid = "x"\n')
    assert (
        str(caught.value)
        == "test.formula.toml: steps[0].expand: formula 'plain' is of type 'workflow', expected an expansion"
    )
    with pytest.raises(FormulaError) as caught:
        cooked(text)
    assert str(caught.value) == "test.formula.toml: steps[0].expand: formula 'plain' not found"


def nested(depth: int) -> dict[str, str]:
    """Expansions e1 .. e<depth>, each expanding the next; the last is plain."""
    library = {}
    for level in range(1, depth + 1):
        inner = f'expand = "e{level + 1}"' if level < depth else 'title = "leaf"'
        library[f"e{level}"] = f'formula = "e{level}"\ntype = "expansion"\n[[template]]\nid = "s"\n{inner}\n'
    return library


def test_expansions_may_nest_five_deep() -> None:
    plan = cooked('formula = "f"\n[[steps]]\nid = "x"\nexpand = "e1"\n', **nested(5))
    assert ids(plan) == ["x.s.s.s.s.s"]


def test_expansions_nested_deeper_than_five_are_an_error() -> None:
    with pytest.raises(FormulaError) as caught:
        cooked('formula = "f"\n[[steps]]\nid = "x"\nexpand = "e1"\n', **nested(6))
    assert str(caught.value) == (
        "test.formula.toml: steps[0].expand(e1).template[0].expand(e2).template[0].expand(e3).template[0]"
        ".expand(e4).template[0].expand(e5).template[0].expand: expansions nest deeper than 5: "
        "e1 -> e2 -> e3 -> e4 -> e5 -> e6"
    )


def test_an_expansion_expanding_itself_stops_at_the_limit() -> None:
    loop = 'formula = "again"\ntype = "expansion"\n[[template]]\nid = "s"\nexpand = "again"\n'
    with pytest.raises(FormulaError, match="expansions nest deeper than 5: again -> again -> again"):
        cooked('formula = "f"\n[[steps]]\nid = "x"\nexpand = "again"\n', again=loop)


COMPOSED = """
formula = "f"
[vars]
who = "cy"
[[steps]]
id = "start"
[[steps]]
id = "notes"
needs = ["start"]
[[steps]]
id = "test-unit"
[[steps]]
id = "test-e2e"
[[steps]]
id = "done"
needs = ["notes"]
[compose]
[[compose.expand]]
target = "notes"
with = "review"
vars = { reviewer = "{{who}}" }
[[compose.branch]]
from = "start"
steps = ["test-unit", "test-e2e"]
join = "done"
[[compose.gate]]
before = "done"
condition = "test-e2e.output.passed == true"
"""


def test_compose_expand_branch_and_gate() -> None:
    plan = cooked(COMPOSED, review=REVIEW)
    assert ids(plan) == ["start", "notes.draft", "notes.approve", "test-unit", "test-e2e", "done"]
    assert needs(plan) == {
        "start": [],
        "notes.draft": ["start"],
        "notes.approve": ["notes.draft"],
        "test-unit": ["start"],
        "test-e2e": ["start"],
        "done": ["notes.approve", "test-unit", "test-e2e"],
    }
    assert plan.step("done").gate == PlanGate(condition="test-e2e.output.passed == true")
    assert plan.step("notes.approve").executor.prompt.startswith("cy:")  # type: ignore[union-attr]


def test_compose_gates_join_an_existing_gate() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "a"
    [[steps]]
    id = "b"
    gate = { condition = "a.status == 'complete'", timer = "1m" }
    [[compose.gate]]
    before = "b"
    condition = "a.output.ok == true"
    """
    assert cooked(text).step("b").gate == PlanGate(
        condition="(a.output.ok == true) and (a.status == 'complete')", timer=60
    )


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            '[[compose.gate]]\nbefore = "notse"\ncondition = "true"\n',
            "compose.gate[0].before: unknown step 'notse' (did you mean 'notes'?)",
        ),
        (
            '[[compose.branch]]\nfrom = "start"\nsteps = ["nope"]\n',
            "compose.branch[0].steps: unknown step 'nope'",
        ),
        (
            '[[compose.expand]]\ntarget = "stat"\nwith = "review"\n',
            "compose.expand[0].target: unknown step 'stat' (did you mean 'start'?)",
        ),
    ],
)
def test_compose_rules_naming_unknown_steps_are_errors(rule: str, message: str) -> None:
    text = f'formula = "f"\n[[steps]]\nid = "start"\n[[steps]]\nid = "notes"\n[compose]\n{rule}'
    with pytest.raises(FormulaError) as caught:
        cooked(text, review=REVIEW)
    assert str(caught.value) == f"test.formula.toml: {message}"


def test_compose_rules_skip_steps_dropped_by_their_condition() -> None:
    text = (
        'formula = "f"\n[[steps]]\nid = "a"\ncondition = "false"\n'
        '[[compose.gate]]\nbefore = "a"\ncondition = "true"\n'
    )
    assert ids(cooked(text)) == []


def test_maps_expand_every_matching_leaf() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "doc-api"
    [[steps]]
    id = "doc-cli"
    needs = ["doc-api"]
    [[steps]]
    id = "code"
    [[compose.map]]
    select = "doc-*"
    with = "review"
    vars = { reviewer = "di" }
    """
    plan = cooked(text, review=REVIEW)
    assert ids(plan) == ["doc-api.draft", "doc-api.approve", "doc-cli.draft", "doc-cli.approve", "code"]
    assert plan.step("doc-cli.draft").needs == ["doc-api.approve"]
    assert [m.select for m in plan.maps] == ["doc-*"]


def test_an_expansion_cannot_replace_a_step_with_children() -> None:
    text = (
        'formula = "f"\n[[steps]]\nid = "g"\n[[steps.children]]\nid = "c"\n'
        '[[compose.expand]]\ntarget = "g"\nwith = "review"\n'
    )
    with pytest.raises(FormulaError, match="cannot expand 'g': it has children"):
        cooked(text, review=REVIEW)


ADVISED = """
formula = "f"
[[steps]]
id = "build"
tool = { name = "make" }
[[steps]]
id = "test"
needs = ["build"]
tool = { name = "pytest" }
[[steps]]
id = "ship"
needs = ["test"]
human = { prompt = "ship?" }

[[advice]]
target = "t*"
[[advice.before]]
id = "lint"
title = "Lint before {{step.id}}"
[[advice.before]]
id = "typecheck"
[[advice.after]]
id = "report"
title = "Report {{step.title}}"
"""


def test_before_and_after_advice_wrap_the_target() -> None:
    plan = cooked(ADVISED)
    assert ids(plan) == ["build", "test.lint", "test.typecheck", "test", "test.report", "ship"]
    assert needs(plan) == {
        "build": [],
        "test.lint": ["build"],
        "test.typecheck": ["test.lint"],
        "test": ["build", "test.typecheck"],
        "test.report": ["test"],
        "ship": ["test.report"],
    }
    assert plan.step("test.lint").title == "Lint before test"
    assert plan.step("test.report").title == "Report test"


def test_around_advice_and_globs_apply_to_each_target_but_never_to_advice() -> None:
    text = """
    formula = "f"
    [[steps]]
    id = "a"
    [[steps]]
    id = "b"
    needs = ["a"]
    [[advice]]
    target = "*"
    around = { before = [{ id = "in" }], after = [{ id = "out" }] }
    """
    plan = cooked(text)
    assert ids(plan) == ["a.in", "a", "a.out", "b.in", "b", "b.out"]
    assert plan.step("b.in").needs == ["a.out"]


def test_pointcuts_narrow_where_advice_applies() -> None:
    text = ADVISED.replace('target = "t*"', 'target = "*"') + '\n[[pointcuts]]\ntype = "human"\n'
    assert ids(cooked(text)) == ["build", "test", "ship.lint", "ship.typecheck", "ship", "ship.report"]
    labelled = """
    formula = "f"
    [[steps]]
    id = "a"
    labels = ["audited"]
    [[steps]]
    id = "b"
    [[pointcuts]]
    label = "audited"
    [[advice]]
    target = "*"
    after = { id = "log" }
    """
    assert ids(cooked(labelled)) == ["a", "a.log", "b"]


AUDIT = """
formula = "audit"
type = "aspect"
[vars]
channel = "audit-log"
[[pointcuts]]
type = "tool"
[[advice]]
target = "*"
after = { id = "audit", tool = { name = "notify", args = { channel = "{{channel}}", step = "{{step.id}}" } } }
"""


def test_aspects_apply_their_advice_with_their_pointcuts() -> None:
    text = ADVISED.split("[[advice]]")[0] + '[compose]\naspects = ["audit"]\n'
    plan = cooked(text, audit=AUDIT)
    assert ids(plan) == ["build", "build.audit", "test", "test.audit", "ship"]
    assert plan.step("test.audit").executor == ToolExecutor(
        name="notify", args={"channel": "audit-log", "step": "test"}
    )
    assert plan.step("ship").needs == ["test.audit"]
    assert [rule.origin for rule in plan.advice] == ["compose.aspects[0](audit).advice[0]"]


def test_an_aspect_must_be_an_aspect() -> None:
    with pytest.raises(FormulaError) as caught:
        cooked('formula = "f"\n[compose]\naspects = ["review"]\n', review=REVIEW)
    assert (
        str(caught.value)
        == "test.formula.toml: compose.aspects[0]: formula 'review' is of type 'expansion', "
        "expected an aspect"
    )


def test_advice_and_maps_reach_iterations_added_at_run_time() -> None:
    from plangate.formulas import expand_iteration

    text = """
    formula = "f"
    [[steps]]
    id = "poll"
    [steps.loop]
    until = "check.output.ok == true"
    max = 3
    body = [{ id = "check", tool = { name = "probe" } }, { id = "doc" }]
    [[compose.map]]
    select = "*.doc"
    with = "review"
    vars = { reviewer = "ed" }
    [[advice]]
    target = "*.check"
    before = { id = "warm" }
    """
    plan = cooked(text, review=REVIEW)
    assert ids(plan) == [
        "poll",
        "poll.iter1.check.warm",
        "poll.iter1.check",
        "poll.iter1.doc.draft",
        "poll.iter1.doc.approve",
    ]
    second = expand_iteration(plan, "poll", 2)
    assert [s.id for s in second] == [
        "poll.iter2.check.warm",
        "poll.iter2.check",
        "poll.iter2.doc.draft",
        "poll.iter2.doc.approve",
    ]
    assert second[0].needs == ["poll.iter1.check", "poll.iter1.doc.approve"]


def test_the_expansion_name_may_come_from_a_var() -> None:
    text = 'formula = "f"\n[vars]\nstyle = "review"\n[[steps]]\nid = "n"\n'
    text += 'expand = "{{style}}"\nexpand_vars = { reviewer = "x" }\n'
    assert ids(cooked(text, review=REVIEW)) == ["n.draft", "n.approve"]
