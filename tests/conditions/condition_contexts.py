"""Named contexts shared by the condition tests (the golden results file refers to them by name)."""

from __future__ import annotations

from plangate.conditions import ConditionContext, ReceiptState, StepState

SECRET = "hunter2-Zq9-not-for-reasons"


def pipeline() -> ConditionContext:
    """A build/test/deploy pipeline; ``tests`` has three children, two of them complete."""
    tests = StepState(
        "tests",
        "complete",
        {"failed": 0, "passed": 212, "coverage": {"lines": 87.5}},
        [
            StepState("tests-unit", "complete", {"failed": 0, "duration": 41}),
            StepState(
                "tests-integration",
                "complete",
                {"failed": 0, "duration": 318},
                [StepState("tests-db", "complete", {"duration": 12})],
            ),
            StepState("tests-e2e", "running", {"failed": None}),
        ],
    )
    build = StepState(
        "build",
        "complete",
        {
            "n": 2,
            "size": 48213504,
            "ratio": 0.5,
            "label": "v1.14",
            "empty": "",
            "zero": 0,
            "approved": True,
            "rejected": False,
            "nothing": None,
            "tags": ["fast", "arm64"],
            "none": [],
            "errors.count": 0,
            "a": {"b": {"c": 5}},
            "report": {"url.full": "https://ci.example.com/r/1"},
            7: "a number key",
        },
    )
    steps = [
        build,
        tests,
        StepState("run-tests", "failed", {"exit": 2}),
        StepState("deploy-staging", "ready"),
        StepState("review", "waiting", {"approved": False}),
        StepState("lint", "skipped"),
        StepState("no-output", "complete", None),  # type: ignore[arg-type]  # a context from careless code
        StepState("odd-output", "complete", ["not", "a", "mapping"]),  # type: ignore[arg-type]
    ]
    return ConditionContext(
        steps={step.id: step for step in steps},
        current_step="deploy-staging",
        vars={"environment": "staging", "count": "3"},
        env={"CI": "true", "TOKEN": SECRET, "EMPTY": ""},
    )


def empty() -> ConditionContext:
    """No steps, no current step, no variables, an empty environment."""
    return ConditionContext(steps={}, env={})


def leaf() -> ConditionContext:
    """One step with one child, and a current step that is not in the steps."""
    only = StepState("parent", "running", {}, [StepState("kid", "failed", {"code": 1})])
    return ConditionContext(steps={"parent": only}, current_step="gone", env={})


def evidence() -> ConditionContext:
    """An agent run's receipts under a plan: a read and a failed write on step 1, an answer, then an executed
    write on step 2 (and a build step, which only ``steps`` conditions see)."""
    placed = {"placed": True, "task": {"id": "t9", "day": 1, "slot": 4}, "warnings": []}
    receipts = [
        ReceiptState("get_overview", True, 1, "tool_observation", {"free": 3, "days": ["mon", "tue"]}),
        ReceiptState("place", False, 1, "write_receipt", {"placed": False, "error": "slot taken"}),
        ReceiptState("ask_user", True, 1, "user_reply", "go ahead"),
        ReceiptState("place", True, 2, "write_receipt", placed),
    ]
    return ConditionContext(
        steps={"build": StepState("build", "complete")}, receipts=receipts, env={"CI": "true"}
    )


CONTEXTS = {"pipeline": pipeline, "empty": empty, "leaf": leaf, "evidence": evidence}
