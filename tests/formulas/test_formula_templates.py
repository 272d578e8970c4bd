"""Templates: strict and sandboxed at cook time, run-time references kept intact, then filled at run time."""

from __future__ import annotations

import pytest

from plangate.errors import FormulaError
from plangate.formulas import render_runtime
from plangate.formulas.templates import render_text, render_value, runtime_refs

CONTEXT: dict[str, object] = {"version": "1.2.3", "replicas": 3, "dry_run": False, "target": {"id": "notes"}}


def fails(text: str, context: dict[str, object] = CONTEXT) -> str:
    with pytest.raises(FormulaError) as caught:
        render_text(text, context, path="steps[0].title", source="f.formula.toml")
    assert caught.value.path == "steps[0].title"
    return caught.value.detail


def test_vars_render_with_booleans_spelled_as_in_toml() -> None:
    text = "v{{version}} x{{ replicas }} dry={{dry_run}} {{target.id}}"
    assert render_text(text, CONTEXT) == "v1.2.3 x3 dry=false notes"


def test_jinja_features_work_inside_the_sandbox() -> None:
    assert render_text("{% if replicas > 2 %}big{% endif %} {{ version | upper }}", CONTEXT) == "big 1.2.3"


def test_an_undefined_name_is_an_error_never_an_empty_string() -> None:
    assert (
        fails("Ship {{verison}}")
        == "undefined name 'verison' in template 'Ship {{verison}}' (did you mean 'version'?)"
    )
    assert (
        fails("{% if nope %}x{% endif %}") == "undefined name 'nope' in template '{% if nope %}x{% endif %}'"
    )


def test_an_undefined_attribute_is_an_error() -> None:
    assert fails("{{ target.title }}") == (
        "undefined value in template '{{ target.title }}': 'dict object' has no attribute 'title'"
    )


def test_the_sandbox_refuses_internals_and_mutation() -> None:
    assert "is not allowed" in fails("{{ version.__class__.__mro__ }}")
    assert "is not allowed" in fails("{{ [].append(1) }}")


def test_the_sandbox_refuses_huge_values() -> None:
    assert fails("{{ 'x' * 1000000 }}") == (
        "the template \"{{ 'x' * 1000000 }}\" is not allowed: '*' would build more than 100000 items"
    )
    assert fails("{{ 9 ** 999999 }}") == (
        "the template '{{ 9 ** 999999 }}' is not allowed: '**' with an exponent larger than 256"
    )
    assert render_text("{{ '-' * 3 }}{{ 2 ** 3 }}", {}) == "---8"


def test_a_syntax_error_names_the_line() -> None:
    assert (
        fails("ok\n{{ version")
        == "template syntax error at line 2: unexpected end of template, expected 'end of print statement'. "
        "in 'ok\\n{{ version'"
    )


def test_run_time_references_are_kept_in_canonical_form() -> None:
    text = "Report: {{ steps.run-tests.output.report.url }} for {{version}}"
    assert render_text(text, CONTEXT) == "Report: {{steps.run-tests.output.report.url}} for 1.2.3"


def test_run_time_references_can_be_renamed() -> None:
    text = "{{steps.build.output.path}}"
    assert (
        render_text(text, {}, refs=lambda name: f"loop.iter2.{name}")
        == "{{steps.loop.iter2.build.output.path}}"
    )


def test_steps_used_any_other_way_is_explained() -> None:
    assert fails("{{ steps | length }}") == (
        "'steps' in '{{ steps | length }}' is only for run-time output references, written exactly "
        "{{steps.<id>.output.<key>}}"
    )


def test_values_from_vars_are_never_evaluated_later() -> None:
    context = {"sneaky": "{{ 7 * 7 }} {% raw %}"}
    cooked = render_text("say {{sneaky}} after {{steps.a.output.x}}", context)
    assert render_runtime(cooked, {}, {"a": {"x": "done"}}) == "say {{ 7 * 7 }} {% raw %} after done"


def test_lists_and_tables_render_item_by_item_and_whole_placeholders_keep_their_type() -> None:
    value = {
        "n": "{{replicas}}",
        "list": ["{{version}}", 1, {"deep": "{{dry_run}}"}],
        "text": "x{{replicas}}",
    }
    assert render_value(value, CONTEXT) == {"n": 3, "list": ["1.2.3", 1, {"deep": False}], "text": "x3"}


def test_runtime_refs_are_found_anywhere_in_a_value() -> None:
    value = {"a": "{{steps.x.output.k}}", "b": ["{{ steps.y.output }}", "{{steps.z.output.p.q}} {{version}}"]}
    assert runtime_refs(value) == [("x", "k"), ("y", ""), ("z", "p.q")]


def test_runtime_refs_are_found_in_order_through_any_nesting_and_in_subclasses_of_text() -> None:
    class Text(str):
        pass

    value = {
        "a": [1, None, 2.5, True, {"b": "{{steps.x.output}}", "c": [[Text("{{steps.y.output.k}}")]]}],
        "d": Text("{{steps.z.output}} and {{steps.w.output.m.n}}"),
        "e": "no reference: steps.none",
    }
    assert runtime_refs(value) == [("x", ""), ("y", "k"), ("z", ""), ("w", "m.n")]
    assert runtime_refs("{{steps.q.output}}") == [("q", "")]
    assert runtime_refs(Text("{{steps.q.output}}")) == [("q", "")]
    assert runtime_refs(7) == runtime_refs(None) == []


OUTPUTS = {
    "build": {"artifact": "dist/a.whl", "files": ["a", "b"], "meta": {"size": 10}, "errors.count": 0},
    "run-tests": {"failed": 0},
}


def test_render_runtime_returns_the_value_itself_for_a_whole_reference() -> None:
    assert render_runtime("{{steps.build.output.files}}", {}, OUTPUTS) == ["a", "b"]
    assert render_runtime("{{ steps.build.output.meta.size }}", {}, OUTPUTS) == 10
    assert render_runtime("{{steps.build.output.errors.count}}", {}, OUTPUTS) == 0
    assert render_runtime("{{steps.build.output.files.1}}", {}, OUTPUTS) == "b"
    assert render_runtime("{{steps.run-tests.output}}", {}, OUTPUTS) == {"failed": 0}


def test_render_runtime_prints_references_inside_text_and_recurses() -> None:
    value = {"cmd": "upload {{steps.build.output.artifact}} ({{steps.build.output.meta}})", "n": [1, "{{v}}"]}
    assert render_runtime(value, {"v": "x"}, OUTPUTS) == {
        "cmd": 'upload dist/a.whl ({"size": 10})',
        "n": [1, "x"],
    }


def test_render_runtime_is_strict() -> None:
    with pytest.raises(FormulaError) as caught:
        render_runtime("{{steps.biuld.output.artifact}}", {}, OUTPUTS, path="steps[2].tool.args.a")
    assert str(caught.value) == (
        "steps[2].tool.args.a: step 'biuld' has no output yet (not complete, or no such step) "
        "(did you mean 'build'?)"
    )
    with pytest.raises(FormulaError) as caught:
        render_runtime("{{steps.build.output.missing}}", {}, OUTPUTS)
    assert caught.value.detail == (
        "the output of step 'build' has no 'missing' (its keys: artifact, errors.count, files, meta)"
    )
    with pytest.raises(FormulaError, match="undefined name 'nope'"):
        render_runtime("{{ nope }} {{steps.build.output.artifact}}", {}, OUTPUTS)


def test_render_runtime_leaves_plain_values_alone() -> None:
    assert render_runtime("no templates {here}", {}, {}) == "no templates {here}"
    assert render_runtime(3, {}, {}) == 3
