"""Writing formulas back to TOML: every example formula reads back to the same formula."""

from __future__ import annotations

from pathlib import Path

import pytest

from plangate.errors import FormulaError
from plangate.formulas import load_formula, parse_formula
from plangate.formulas.loader import validate_formula
from plangate.formulas.writer import formula_toml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formulas"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.formula.toml")), ids=lambda p: p.name)
def test_every_example_formula_reads_back_the_same(path: Path) -> None:
    formula = load_formula(path)
    assert parse_formula(formula_toml(formula), source="written") == formula


def test_text_values_of_any_kind_survive() -> None:
    formula = validate_formula(
        {
            "formula": "odd",
            "description": 'quotes " and \\ backslashes, tabs\tand\nnew lines, 中文, DEL \x7f',
            "vars": {
                "region": {"default": "north", "enum": ["north", "south"]},
                "n": {"type": "int", "default": 3},
            },
            "steps": [
                {
                    "id": "a.b",
                    "title": "{{region}}",
                    "llm": {"prompt": "x", "schema": {"type": "object"}},
                    "metadata": {"a key with spaces": [1, 2.5, True, {"deep": "er"}]},
                }
            ],
        }
    )
    text = formula_toml(formula, header="first line\nsecond line")
    assert text.startswith('# first line\n# second line\n\nformula = "odd"')
    assert parse_formula(text, source="written") == formula


def test_a_null_inside_a_list_cannot_be_written() -> None:
    formula = validate_formula(
        {"formula": "f", "steps": [{"id": "a", "tool": {"name": "t", "args": {"x": [1, None]}}}]}
    )
    with pytest.raises(FormulaError, match=r"steps\[0\].tool.args.x\[1\]: TOML has no null"):
        formula_toml(formula)
