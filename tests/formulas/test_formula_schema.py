"""The file format: golden messages for formulas that do not fit the schema, and what valid files become."""

from __future__ import annotations

import pytest

from plangate.errors import FormulaError
from plangate.formulas import FormulaSchemaError, parse_formula
from plangate.formulas.schema import Formula

SRC = "bad.formula.toml"


def fails(text: str, fmt: str = "toml") -> str:
    with pytest.raises(FormulaError) as caught:
        parse_formula(text, source=SRC, fmt=fmt)
    return str(caught.value)


GOLDEN = [
    (
        "malformed TOML",
        'formula = "r"\n[[steps]]\nid = "a"\ntitle = \n',
        "bad.formula.toml: invalid TOML at line 4, column 9: Invalid value",
    ),
    (
        "malformed TOML at the end",
        'formula = "r"\nsteps = [\n',
        "bad.formula.toml: invalid TOML at the end of the file: Invalid value",
    ),
    (
        "unknown key with a suggestion",
        'formula = "r"\n[[steps]]\nid = "a"\n[[steps]]\nid = "b"\n[[steps]]\nid = "c"\ndepnds_on = ["a"]\n',
        "bad.formula.toml: steps[2].depnds_on: unknown field (did you mean 'depends_on'?)",
    ),
    (
        "unknown key far from any field",
        'formula = "r"\nzzz = 1\n',
        "bad.formula.toml: zzz: unknown field",
    ),
    (
        "wrong type",
        'formula = "r"\n[[steps]]\nid = "a"\nretries = "3"\n',
        "bad.formula.toml: steps[0].retries: expected an integer, got a string ('3')",
    ),
    (
        "wrong literal with a suggestion",
        'formula = "r"\ntype = "wrkflow"\n',
        "bad.formula.toml: type: expected 'workflow', 'expansion' or 'aspect', got a string ('wrkflow') "
        "(did you mean 'workflow'?)",
    ),
    (
        "two executors on one step",
        'formula = "r"\n[[steps]]\nid = "a"\ntool = { name = "x" }\nhuman = { prompt = "ok?" }\n',
        "bad.formula.toml: steps[0]: a step has at most one executor; found tool and human",
    ),
    (
        "bad duration",
        'formula = "r"\n[[steps]]\nid = "a"\ngate = { condition = "true", timeout = "1h30" }\n',
        "bad.formula.toml: steps[0].gate.timeout: expected a duration like '30m', '2h', '10s' or '1h30m', "
        "got '1h30': the number 30 has no unit (d, h, m or s)",
    ),
    (
        "required and default",
        'formula = "r"\n[vars.v]\nrequired = true\ndefault = "x"\n',
        "bad.formula.toml: vars.v: a var cannot be both required and have a default; drop one of them",
    ),
    (
        "default of the wrong type",
        'formula = "r"\n[vars.n]\ntype = "int"\ndefault = "three"\n',
        "bad.formula.toml: vars.n.default: expected a default of type int, got 'three'",
    ),
    (
        "bad pattern",
        'formula = "r"\n[vars.v]\npattern = "("\n',
        "bad.formula.toml: vars.v.pattern: invalid regular expression: missing ), unterminated subpattern "
        "at position 0",
    ),
    (
        "var name templates cannot use",
        'formula = "r"\n[vars]\nmy-var = 1\n',
        "bad.formula.toml: vars.my-var: a var name must be a name like 'version' (letters, digits, '_'; "
        "not 'steps'), got 'my-var'",
    ),
    (
        "duplicate id",
        'formula = "r"\n[[steps]]\nid = "a"\n[[steps]]\nid = "b"\n[[steps.children]]\nid = "a"\n',
        "bad.formula.toml: steps[1].children[0].id: duplicate step id 'a' (first at steps[0])",
    ),
    (
        "bad id",
        'formula = "r"\n[[steps]]\nid = "run tests"\n',
        "bad.formula.toml: steps[0].id: step ids may contain only letters, digits, '_', '.' and '-', "
        "got 'run tests'",
    ),
    (
        "loop with two kinds",
        'formula = "r"\n[[steps]]\nid = "l"\n'
        'loop = { count = 2, until = "x", max = 2, body = [{ id = "b" }] }\n',
        "bad.formula.toml: steps[0].loop: a loop needs exactly one of count, range or until; "
        "found count and until",
    ),
    (
        "until without max",
        'formula = "r"\n[[steps]]\nid = "l"\n'
        'loop = { until = "x.status == \'complete\'", body = [{ id = "x" }] }\n',
        "bad.formula.toml: steps[0].loop.max: an until loop needs max (the most iterations it may run)",
    ),
    (
        "max of zero",
        'formula = "r"\n[[steps]]\nid = "l"\nloop = { until = "true", max = 0, body = [{ id = "x" }] }\n',
        "bad.formula.toml: steps[0].loop.max: expected a number more than 0, got an integer (0)",
    ),
    (
        "bad waits_for",
        'formula = "r"\n[[steps]]\nid = "a"\nwaits_for = "children(b)"\n',
        "bad.formula.toml: steps[0].waits_for: expected all-children, any-children or children-of(<id>), "
        "got 'children(b)'",
    ),
    (
        "gate that waits on nothing",
        'formula = "r"\n[[steps]]\nid = "a"\ngate = { timeout = "1m" }\n',
        "bad.formula.toml: steps[0].gate: a gate needs a condition, a timer or human",
    ),
    (
        "both needs and depends_on",
        'formula = "r"\n[[steps]]\nid = "a"\nneeds = []\ndepends_on = []\n',
        "bad.formula.toml: steps[0].depends_on: give needs or its alias depends_on, not both",
    ),
    (
        "expand with an executor",
        'formula = "r"\n[[steps]]\nid = "a"\nexpand = "review"\ntool = { name = "x" }\n',
        "bad.formula.toml: steps[0]: an expand step is replaced by its expansion, so it cannot have tool",
    ),
    (
        "missing name",
        '[[steps]]\nid = "a"\n',
        "bad.formula.toml: formula: missing required field",
    ),
    (
        "negative version",
        'formula = "r"\nversion = -1\n',
        "bad.formula.toml: version: expected a version of 1 or more, got -1",
    ),
    (
        "top level that is not a table",
        "[1, 2]",
        "bad.formula.toml: expected a table at the top of the formula, got a list",
    ),
]


@pytest.mark.parametrize(("text", "message"), [(t, m) for _, t, m in GOLDEN], ids=[n for n, _, _ in GOLDEN])
def test_golden_schema_errors(text: str, message: str) -> None:
    fmt = "json" if text.startswith("[1") else "toml"
    assert fails(text, fmt) == message


def test_malformed_json_names_line_and_column() -> None:
    assert fails('{"formula": "r",\n "steps": [}', "json") == (
        "bad.formula.toml: invalid JSON at line 2, column 12: Expecting value"
    )


def test_every_problem_is_kept_with_its_path() -> None:
    text = (
        'formula = "r"\n[[steps]]\nid = "a"\nretries = -1\ntimeout = "x"\n[[steps]]\nid = "b"\nlabel = []\n'
    )
    with pytest.raises(FormulaSchemaError) as caught:
        parse_formula(text, source=SRC)
    assert [path for path, _ in caught.value.problems] == [
        "steps[0].retries",
        "steps[0].timeout",
        "steps[1].label",
    ]
    assert str(caught.value).endswith("(and 2 more problems)")


def test_var_shorthand_keeps_the_type_of_the_default() -> None:
    formula = parse_formula(
        'formula = "r"\n[vars]\nowner = "team"\nreplicas = 3\nratio = 0.5\ndry_run = false\n', source=SRC
    )
    defaults = {name: var.default for name, var in formula.vars.items()}
    assert defaults == {"owner": "team", "replicas": 3, "ratio": 0.5, "dry_run": False}
    assert [type(v) for v in defaults.values()] == [str, int, float, bool]
    assert formula.vars["replicas"].effective_type == "int"
    assert formula.vars["dry_run"].effective_type == "bool"


def test_version_zero_reads_as_one_and_depends_on_is_needs() -> None:
    formula = parse_formula(
        'formula = "r"\nversion = 0\n[[steps]]\nid = "a"\n[[steps]]\nid = "b"\ndepends_on = ["a"]\n',
        source=SRC,
    )
    assert formula.version == 1
    assert formula.steps[1].needs == ["a"]


def test_durations_are_stored_as_seconds() -> None:
    formula = parse_formula(
        'formula = "r"\n[[steps]]\nid = "a"\ntimeout = "1h30m"\ngate = { timer = "10s", human = true }\n',
        source=SRC,
    )
    step = formula.steps[0]
    assert step.timeout == 5_400
    assert step.gate is not None and step.gate.timer == 10 and step.gate.human == ""


def test_single_tables_are_accepted_where_lists_are_expected() -> None:
    formula = parse_formula(
        'formula = "r"\nextends = "base"\n[compose.expand]\ntarget = "a"\nwith = "e"\n'
        '[advice]\ntarget = "*"\nbefore = { id = "log" }\n',
        source=SRC,
    )
    assert formula.extends == ["base"]
    assert formula.compose.expand[0].with_ == "e"
    assert formula.advice[0].before[0].id == "log"


def test_ids_with_placeholders_are_checked_once_rendered() -> None:
    formula = parse_formula('formula = "r"\n[[steps]]\nid = "deploy-{{ region }}"\n', source=SRC)
    assert formula.steps[0].id == "deploy-{{ region }}"


def test_formula_round_trips_through_a_dump() -> None:
    text = """
formula = "r"
[vars.v]
enum = ["a", "b"]
default = "a"
[[steps]]
id = "a"
timeout = "2m"
llm = { prompt = "p", schema = { type = "object" } }
[[steps]]
id = "b"
depends_on = ["a"]
loop = { range = "1..3", var = "i", body = [{ id = "x", title = "{{i}}" }] }
[compose]
branch = [{ from = "a", steps = ["b"] }]
[[advice]]
target = "*"
around = { before = [{ id = "pre" }], after = [{ id = "post" }] }
[[pointcuts]]
glob = "a*"
type = "llm"
"""
    formula = parse_formula(text, source=SRC)
    again = Formula.model_validate(formula.model_dump(by_alias=True))
    assert again == formula
    assert formula.source == SRC


def test_an_agent_steps_mode_is_one_of_the_agents() -> None:
    text = 'formula = "r"\n[[steps]]\nid = "a"\nagent = { prompt = "hi", mode = "fast" }\n'
    assert fails(text) == (
        "bad.formula.toml: steps[0].agent.mode: expected 'auto', 'plan' or 'react', got a string ('fast')"
    )
