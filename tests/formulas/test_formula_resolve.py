"""``extends``: merge order, steps replaced in place, cycles, and every field surviving the merge."""

from __future__ import annotations

import pytest
from formula_helpers import Library, formula

from plangate.errors import FormulaError, FormulaNotFound
from plangate.formulas import resolve

PARENT = """
formula = "parent"
description = "the parent"
version = 2
type = "expansion"

[vars.version]
description = "Version"
required = true
pattern = '^\\d+$'
[vars.channel]
default = "stable"
enum = ["stable", "beta"]
[vars]
owner = "parent-team"

[[steps]]
id = "a"
title = "A"
[[steps]]
id = "b"
needs = ["a"]
[[steps.children]]
id = "b1"
title = "parent b1"
[[steps]]
id = "c"
needs = ["b"]

[[template]]
id = "t1"
tool = { name = "x" }

[compose]
aspects = ["audit"]
[[compose.expand]]
target = "a"
with = "review"
vars = { who = "me" }
[[compose.map]]
select = "b*"
with = "review"
[[compose.branch]]
from = "a"
steps = ["b", "c"]
join = "c"
[[compose.gate]]
before = "c"
condition = "a.status == 'complete'"

[[advice]]
target = "a"
before = { id = "pre", title = "before {{step.id}}" }
[advice.around]
after = [{ id = "post" }]

[[pointcuts]]
glob = "a*"
type = "tool"
label = "ci"
"""


def test_every_field_survives_extends() -> None:
    child = formula('formula = "child"\nextends = ["parent"]\n')
    parent = formula(PARENT)
    merged = resolve(child, Library(parent=PARENT))
    for field in (
        "description",
        "version",
        "type",
        "vars",
        "steps",
        "template",
        "compose",
        "advice",
        "pointcuts",
    ):
        assert getattr(merged, field) == getattr(parent, field), field
    assert merged.formula == "child"
    assert merged.extends == []
    assert merged.source == child.source


def test_parent_vars_first_child_overrides_whole() -> None:
    child = formula('formula = "child"\nextends = ["parent"]\n[vars]\nowner = "child-team"\nextra = 1\n')
    merged = resolve(child, Library(parent=PARENT))
    assert list(merged.vars) == ["version", "channel", "owner", "extra"]
    assert merged.vars["owner"].default == "child-team"
    assert merged.vars["channel"].enum == ["stable", "beta"]


def test_child_step_replaces_the_parent_step_in_place_even_nested() -> None:
    child = formula(
        """
        formula = "child"
        extends = ["parent"]
        [[steps]]
        id = "a"
        title = "child A"
        [[steps]]
        id = "b1"
        title = "child b1"
        [[steps]]
        id = "d"
        """
    )
    merged = resolve(child, Library(parent=PARENT))
    assert [s.id for s in merged.steps] == ["a", "b", "c", "d"]
    assert merged.steps[0].title == "child A"
    assert merged.steps[1].children[0].title == "child b1"
    assert merged.steps[1].needs == ["a"]


def test_lists_concatenate_parent_first_without_duplicates() -> None:
    child = formula(
        """
        formula = "child"
        extends = ["parent"]
        [compose]
        aspects = ["audit", "trace"]
        [[advice]]
        target = "c"
        after = { id = "log" }
        """
    )
    merged = resolve(child, Library(parent=PARENT))
    assert merged.compose.aspects == ["audit", "trace"]
    assert [a.target for a in merged.advice] == ["a", "c"]


def test_child_settings_win_only_when_set() -> None:
    child = formula('formula = "child"\nextends = ["parent"]\ntype = "workflow"\n')
    merged = resolve(child, Library(parent=PARENT))
    assert (merged.type, merged.version, merged.description) == ("workflow", 2, "the parent")


def test_extends_is_recursive_and_in_listed_order() -> None:
    library = Library(
        grand='formula = "grand"\n[vars]\nx = "grand"\ny = "grand"\n[[steps]]\nid = "g"\n',
        mid='formula = "mid"\nextends = ["grand"]\n[vars]\ny = "mid"\n[[steps]]\nid = "m"\n',
        side='formula = "side"\n[vars]\nx = "side"\n[[steps]]\nid = "s"\n',
    )
    child = formula('formula = "child"\nextends = ["mid", "side"]\n[[steps]]\nid = "c"\n')
    merged = resolve(child, library)
    assert [s.id for s in merged.steps] == ["g", "m", "s", "c"]
    assert {k: v.default for k, v in merged.vars.items()} == {"x": "side", "y": "mid"}


def test_circular_extends_names_the_cycle() -> None:
    library = Library(b='formula = "b"\nextends = ["c"]\n', c='formula = "c"\nextends = ["a"]\n')
    with pytest.raises(FormulaError) as caught:
        resolve(formula('formula = "a"\nextends = ["b"]\n', source="a.formula.toml"), library)
    assert str(caught.value) == "c.formula.toml: extends[0]: circular extends: a -> b -> c -> a"


def test_a_formula_extending_itself_is_a_cycle() -> None:
    with pytest.raises(FormulaError, match=r"circular extends: a -> a"):
        resolve(formula('formula = "a"\nextends = ["a"]\n'), Library(a='formula = "a"\nextends = ["a"]\n'))


def test_a_missing_parent_names_where_it_was_named() -> None:
    with pytest.raises(FormulaNotFound) as caught:
        resolve(formula('formula = "a"\nextends = ["nope"]\n', source="a.formula.toml"), Library())
    assert str(caught.value) == "a.formula.toml: extends[0]: formula 'nope' not found"


def test_diamonds_merge_the_shared_parent_once() -> None:
    library = Library(
        base='formula = "base"\n[[steps]]\nid = "x"\n[[advice]]\ntarget = "x"\nafter = { id = "log" }\n',
        left='formula = "left"\nextends = ["base"]\n',
        right='formula = "right"\nextends = ["base"]\n',
    )
    merged = resolve(formula('formula = "top"\nextends = ["left", "right"]\n'), library)
    assert [s.id for s in merged.steps] == ["x"]
    assert len(merged.advice) == 1


def test_a_formula_without_extends_is_returned_as_is() -> None:
    plain = formula('formula = "plain"\n')
    assert resolve(plain, Library()) is plain
