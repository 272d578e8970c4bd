"""Two runs aligned (``diff_events``) and a run's tree aligned with its replay (``diff_tree``): the first
divergence is the first point that differs, a step's attempt past the first counts, a step's reason is said
but never compared, and a tree's rows are read in the order the record reached them."""

from __future__ import annotations

from plangate.events import Event, OutcomeEvent, RoundEvent, StepStateEvent
from plangate.runs.diff import Log, diff_events, diff_tree, unit_of


def _step(
    step: str, status: str, at: float, *, attempt: int = 1, reason: str = "", **output: object
) -> Event:
    return StepStateEvent(
        step_id=step, status=status, attempt=attempt, reason=reason, output=output or None, at=at
    )


def _end(status: str, at: float) -> Event:
    code = "done" if status == "completed" else "step_failed"
    return OutcomeEvent(status=status, stage="run", code=code, user_message="", at=at)


def test_a_step_that_needed_another_attempt_differs_and_its_reason_is_said_not_compared() -> None:
    a = [_step("build", "complete", 1, reason="build: ok in 3 s", n=1), _end("completed", 2)]
    b = [
        _step("build", "complete", 5, attempt=2, reason="build: ok in 9 s", n=1),
        _end("completed", 6),
    ]
    same = diff_events("step", ("a", a), ("c", [_step("build", "complete", 9, reason="other words", n=1)]))
    assert same.rows[0].differs is False  # a reason alone (it may hold times) is no divergence

    found = diff_events("step", ("a", a), ("b", b))

    assert found.first == "build"
    assert found.why == "status: complete vs complete (attempt 2) (build: ok in 9 s)"
    assert [(row.key, row.differs) for row in found.rows] == [("build", True), ("outcome", False)]


def test_a_tree_is_read_in_the_order_the_record_reached_each_point() -> None:
    root_a = [_step("list", "complete", 1.0), _step("fan", "complete", 5.0), _end("completed", 6.0)]
    root_b = [_step("list", "complete", 1.0), _step("fan", "failed", 5.0), _end("failed", 6.0)]
    sub_a = [_step("deploy", "complete", 3.0, region="eu")]
    sub_b = [_step("deploy", "failed", 3.0, reason="deploy: refused")]
    agent_a = [RoundEvent(round=1, step_index=None, decision={"action": "done"}, validation={}, at=4.0)]

    found = diff_tree(
        "run_x",
        "run_x (replay)",
        [
            Log("", "step", root_a, root_b),
            Log("fan.fan1.0", "step", sub_a, sub_b),
            Log("review.agent1", "round", agent_a, []),
        ],
    )

    keys = [row.key for row in found.rows]
    assert keys == ["list", "fan.fan1.0 › deploy", "review.agent1 › 1", "fan", "outcome"]
    assert found.first == "fan.fan1.0 › deploy"  # the sub-run's step parted before its parent's did
    assert found.why.startswith("status: complete vs failed (deploy: refused)")
    agent_row = found.rows[2]
    assert (agent_row.a, agent_row.b, agent_row.differs) == ("done", None, True)


def test_runs_are_aligned_by_round_only_when_both_are_agent_runs() -> None:
    assert unit_of("agent", "agent") == "round"
    assert unit_of("agent", "formula") == unit_of("formula", "formula") == "step"
