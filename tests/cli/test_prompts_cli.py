"""The terminal's questions answered as people answer them, through a real ``plangate`` process fed by a
pipe: ``y``/``yes``/``n``/Enter pick a choice, anything else is answered with the choices, and a few invalid
answers or the end of the input stop the command (exit 4) with the run left waiting, never a loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plangate.cli._prompts import EXIT_NO_ANSWER, MAX_INVALID

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formulas"
TOOLS = f"{EXAMPLES / 'tools.py'}:registry"
PLANGATE = str(Path(sys.executable).parent / "plangate")
RELEASE = ["run", "release", "--path", str(EXAMPLES), "--tools", TOOLS, "--var", "version=2.5.0"]

pytestmark = pytest.mark.slow  # a real process per test


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("PLANGATE_")}
    values["PLANGATE_STORE"] = f"sqlite:///{tmp_path / 'runs.db'}"
    return values


def plangate(
    args: list[str], env: dict[str, str], cwd: Path, *, feed: list[str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``plangate ARGS`` with ``stdin`` (or the endless output of ``feed``, as ``yes y |`` gives it)."""
    if feed is None:
        return subprocess.run(
            [PLANGATE, *args], input=stdin, env=env, cwd=cwd, capture_output=True, text=True, timeout=60
        )
    with subprocess.Popen(feed, stdout=subprocess.PIPE) as source:
        try:
            return subprocess.run(
                [PLANGATE, *args],
                stdin=source.stdout,
                env=env,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            source.kill()


@pytest.mark.parametrize("word", ["y", "yes", "a", "approve", "YES"])
def test_the_words_people_type_approve(word: str, env: dict[str, str], tmp_path: Path) -> None:
    done = plangate([*RELEASE, "--interactive"], env, tmp_path, feed=["yes", word])

    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout
    assert "Traceback" not in done.stderr


def test_enter_picks_the_default_shown(env: dict[str, str], tmp_path: Path) -> None:
    done = plangate([*RELEASE, "--interactive"], env, tmp_path, stdin="\n")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "approve / reject [a/r] (a):" in done.stdout
    assert "completed" in done.stdout


@pytest.mark.parametrize("word", ["n", "no", "r", "reject"])
def test_the_words_people_type_reject(word: str, env: dict[str, str], tmp_path: Path) -> None:
    done = plangate([*RELEASE, "--interactive"], env, tmp_path, stdin=f"{word}\nnot today\n")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "rejected: not today" in done.stdout


def test_an_answer_that_is_no_choice_is_answered_with_the_choices(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = plangate([*RELEASE, "--interactive"], env, tmp_path, stdin="maybe\ny\n")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "'maybe' is not a choice: type a/approve/y/yes to approve, r/reject/n/no to reject" in done.stdout
    assert "completed" in done.stdout


def waiting_run(env: dict[str, str], cwd: Path) -> dict[str, object]:
    listed = plangate(["runs", "--json"], env, cwd)
    runs = json.loads(listed.stdout)
    assert len(runs) == 1, listed.stdout
    return dict(runs[0])


def test_endless_invalid_answers_stop_the_command_and_the_run_waits(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `yes bogus | plangate run …` looped forever: now a few answers, a message, exit 4
    done = plangate([*RELEASE, "--interactive"], env, tmp_path, feed=["yes", "bogus"])

    assert done.returncode == EXIT_NO_ANSWER, done.stdout + done.stderr
    assert done.stdout.count("is not a choice") == MAX_INVALID
    assert len(done.stdout.splitlines()) < 40
    assert f"stopped asking: {MAX_INVALID} answers were none of the choices" in done.stderr
    assert "left waiting on int_" in done.stderr and "approve int_" in done.stderr
    run = waiting_run(env, tmp_path)
    assert run["status"] == "waiting"
    # nothing lost: the run goes on from another command
    approved = plangate(["approve", str(run["id"]), "--tools", TOOLS], env, tmp_path)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "completed" in approved.stdout


def test_the_end_of_the_input_stops_the_command_and_the_run_waits(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = plangate([*RELEASE, "--interactive"], env, tmp_path, stdin="")

    assert done.returncode == EXIT_NO_ANSWER, done.stdout + done.stderr
    assert "stopped asking: the input ended before an answer was given" in done.stderr
    assert "Traceback" not in done.stderr
    assert waiting_run(env, tmp_path)["status"] == "waiting"


def test_a_reason_cut_off_by_the_end_of_the_input_rejects_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = plangate([*RELEASE, "--interactive"], env, tmp_path, stdin="n\n")

    assert done.returncode == EXIT_NO_ANSWER, done.stdout + done.stderr
    assert waiting_run(env, tmp_path)["status"] == "waiting"
