"""Benchmark: validating, cooking and checking a generated formula of 2,000 steps.

The formula mixes what real ones hold: plain tool steps that need one to three earlier steps, titles and args
with ``{{var}}`` templates and run-time ``{{steps.<id>.output.<key>}}`` references, cook-time conditions (half
of them false, so steps are dropped and their dependents rewired), condition gates, groups of children, and a
loop of 50 iterations over a 5-step body. The target for cooking is under one second.

Run:  .venv/bin/python bench/formulas_cook.py            (best of 5)
      .venv/bin/python bench/formulas_cook.py --quick    (best of 2)

Times are CPU time of this process (``time.process_time``), best of the repeats. This file measures; it
asserts only that the plan has the expected size and checks clean.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from plangate.formulas import check, cook
from plangate.formulas.loader import validate_formula
from plangate.formulas.schema import Formula

TARGET_SECONDS = 1.0
LOOP_COUNT = 50
LOOP_BODY = 5


def generate(seed: int = 7) -> tuple[dict[str, Any], int]:
    """A formula as parsed TOML, and the number of steps its plan will have."""
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    ids: list[str] = []
    planned = 0
    i = 0
    while planned < 2_000 - (LOOP_COUNT * LOOP_BODY + 1):
        step_id = f"step-{i}"
        step: dict[str, Any] = {
            "id": step_id,
            "title": f"Step {i} of {{{{project}}}} in {{{{env}}}}",
            "tool": {"name": "run", "args": {"target": "{{project}}", "shard": i % 7, "env": "{{env}}"}},
        }
        if ids:
            step["needs"] = rng.sample(ids[-20:], k=min(len(ids[-20:]), rng.randint(1, 3)))
            step["tool"]["args"]["input"] = f"{{{{steps.{step['needs'][0]}.output.path}}}}"
        if i % 10 == 3:
            step["condition"] = "vars.env == 'prod'" if i % 20 == 3 else "vars.env != 'prod'"
        if i % 15 == 5:
            step["gate"] = {"condition": f"{ids[-1]}.output.ok == true" if ids else "true", "timeout": "10m"}
        if i % 50 == 25:
            step["children"] = [{"id": f"{step_id}.part-{k}", "title": "Part {{env}}"} for k in range(3)]
            planned += 3
        kept = "condition" not in step or step["condition"] == "vars.env != 'prod'"
        steps.append(step)
        if kept:
            ids.append(step_id)
            planned += 1
        else:
            planned -= 3 if "children" in step else 0
        i += 1
    body = [
        {"id": f"b{k}", "title": f"Body {k} round {{{{n}}}}", "needs": [f"b{k - 1}"] if k else []}
        for k in range(LOOP_BODY)
    ]
    loop = {"count": LOOP_COUNT, "var": "n", "body": body}
    steps.append({"id": "rounds", "needs": [ids[-1]], "loop": loop})
    planned += LOOP_COUNT * LOOP_BODY + 1
    data = {
        "formula": "bench",
        "vars": {
            "project": {"default": "plangate"},
            "env": {"default": "staging", "enum": ["staging", "prod"]},
        },
        "steps": steps,
    }
    return data, planned


def best(repeats: int, action: Callable[[], object]) -> tuple[float, object]:
    """The lowest CPU time of ``repeats`` runs, and the last result."""
    times: list[float] = []
    result: object = None
    for _ in range(repeats):
        start = time.process_time()
        result = action()
        times.append(time.process_time() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, rougher numbers")
    args = parser.parse_args()
    repeats = 2 if args.quick else 5
    data, planned = generate()
    load_s, formula = best(repeats, lambda: validate_formula(data, source="<bench>"))
    assert isinstance(formula, Formula)
    cook_s, plan = best(repeats, lambda: cook(formula, loader=lambda name: formula))
    check_s, issues = best(repeats, lambda: check(plan, tools={"run"}))  # type: ignore[arg-type]
    steps = len(plan.steps)  # type: ignore[attr-defined]
    errors = [i for i in issues if i.level == "error"]  # type: ignore[attr-defined]
    assert steps == planned, f"expected {planned} steps, cooked {steps}"
    assert not errors, errors[:3]
    print(f"formula: {len(data['steps'])} written steps -> {steps} plan steps")
    print(f"validate  {load_s * 1000:8.1f} ms")
    print(f"cook      {cook_s * 1000:8.1f} ms   (target < {TARGET_SECONDS * 1000:.0f} ms: ", end="")
    print("met)" if cook_s < TARGET_SECONDS else "MISSED)")
    print(f"check     {check_s * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
