"""run_formula / resume_run take FormulaRunner's options by name, each typed (RunnerOptions)."""

from __future__ import annotations

import inspect

from plangate.formulas.runtime import FormulaRunner, RunnerOptions, resume_run, run_formula


def test_the_typed_options_are_the_runners_keyword_options() -> None:
    # A runner option missing from RunnerOptions would be refused by the type checker in run_formula's
    # callers although the runner takes it: the two lists are one.
    keywords = [
        name
        for name, parameter in inspect.signature(FormulaRunner.__init__).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert list(RunnerOptions.__annotations__) == keywords
    assert RunnerOptions.__total__ is False


def test_run_formula_and_resume_run_say_their_options_type() -> None:
    for function in (run_formula, resume_run):
        options = inspect.signature(function).parameters["options"]
        assert options.kind is inspect.Parameter.VAR_KEYWORD
        assert options.annotation == "Unpack[RunnerOptions]"
