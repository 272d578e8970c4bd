"""The pages under docs/, run as written, as README.md is (``test_readme.py``: the same marks, a fresh copy
of the repository for each block)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from test_readme import REPO, Block, readme_blocks, run_bash, sandbox, user_env

pytestmark = pytest.mark.slow

__all__ = ["sandbox"]

PAGES = [REPO / "docs" / "time-travel.md"]
BLOCKS = [
    (page, block) for page in PAGES for block in readme_blocks(page) if block.lang in ("bash", "python")
]


def test_the_pages_have_runnable_blocks() -> None:
    assert BLOCKS, "docs/time-travel.md has no runnable block"


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[f"{p.stem}-{b.id}" for p, b in BLOCKS])
def test_every_block_of_the_pages_runs_as_written(page: Path, block: Block, sandbox: Path) -> None:
    env = user_env(block.env())
    if block.lang == "python":
        script = sandbox / f"{page.stem}_line{block.line}.py"
        script.write_text(block.text(), encoding="utf-8")
        python = shlex.quote(str(REPO / ".venv" / "bin" / "python"))
        output = run_bash(f"{python} {script.name}", sandbox, env)
    else:
        output = run_bash(block.text(), sandbox, env)
    if page.stem == "time-travel" and block.lang == "python":
        assert "completed {'tue 9': 'gym', 'wed 9': 'gym'}" in output
        assert "True {'tue 9': 'gym', 'wed 9': 'gym'}" in output
