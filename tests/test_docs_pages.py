"""What the blocks of docs/ pages print, where a page says what they print (``test_readme.py`` runs every
block of README.md and docs/**/*.md; this checks the output of the ones whose text quotes it)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from test_readme import REPO, Block, page_blocks, run_bash, sandbox, user_env

pytestmark = pytest.mark.slow

__all__ = ["sandbox"]

TIME_TRAVEL = REPO / "docs" / "time-travel.md"
BLOCKS = [block for block in page_blocks(TIME_TRAVEL) if block.lang == "python"]


def test_the_time_travel_page_has_a_python_block() -> None:
    assert BLOCKS, "docs/time-travel.md has no python block"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_the_time_travel_python_block_prints_what_the_page_says(block: Block, sandbox: Path) -> None:
    script = sandbox / f"time_travel_line{block.line}.py"
    script.write_text(block.text(), encoding="utf-8")
    python = shlex.quote(str(REPO / ".venv" / "bin" / "python"))
    output = run_bash(f"{python} {script.name}", sandbox, user_env(block.env()))
    assert "completed {'tue 9': 'gym', 'wed 9': 'gym'}" in output
    assert "True {'tue 9': 'gym', 'wed 9': 'gym'}" in output
