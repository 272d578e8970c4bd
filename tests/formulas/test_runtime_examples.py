"""Every example formula runs end to end with the example tools, a person answering in between."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
from runtime_helpers import EXAMPLES, answer, memory_store

from plangate.formulas.runtime import FormulaResult, FormulaRunner
from plangate.interactions import Answer, Approve
from plangate.tools import ToolRegistry


def example_tools() -> ToolRegistry:
    spec = importlib.util.spec_from_file_location("example_tools", EXAMPLES / "tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry = module.registry
    assert isinstance(registry, ToolRegistry)
    return registry


def run_answering(
    runner: FormulaRunner, name: str, vars: dict[str, object]
) -> tuple[FormulaResult, list[str]]:
    """Run, approving every approval and answering every question, until the run ends."""
    asked: list[str] = []
    result = asyncio.run(runner.start(name, vars))
    while result.status == "waiting" and result.interaction is not None:
        asked.append(result.interaction.prompt)
        reply = Answer(text="Looks good.") if result.interaction.kind == "ask_user" else Approve()
        answer(runner, result.interaction.id, reply)
        root = result.run_id
        result = asyncio.run(runner.resume(root))
    return result, asked


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FormulaRunner:
    monkeypatch.chdir(tmp_path)  # the example tools write under ./.plangate/demo
    return FormulaRunner(memory_store(), example_tools(), search_paths=[EXAMPLES])


def test_release(runner: FormulaRunner, tmp_path: Path) -> None:
    result, asked = run_answering(runner, "release", {"version": "3.1.0", "channel": "beta"})
    assert result.status == "completed", result.reason
    assert asked == ["Ship 3.1.0 to beta? Artifact: .plangate/demo/dist/app-3.1.0.txt"]
    published = [
        json.loads(line) for line in (tmp_path / ".plangate/demo/published.jsonl").read_text().splitlines()
    ]
    assert published == [
        {
            "artifact": ".plangate/demo/dist/app-3.1.0.txt",
            "channel": "beta",
            "owner": "release-team",
            "notes": "",
        }
    ]


def test_retry_until(runner: FormulaRunner) -> None:
    result, _ = run_answering(runner, "retry-until", {"service": "billing"})
    assert result.status == "completed", result.reason
    assert result.steps["wait-healthy.iter1.check"].output == {"healthy": False, "attempt": 1}
    assert result.steps["wait-healthy.iter2.check"].output == {"healthy": True, "attempt": 2}
    assert result.steps["announce"].status == "complete"


def test_composed_release(runner: FormulaRunner, tmp_path: Path) -> None:
    result, asked = run_answering(runner, "composed-release", {"version": "4.0.0"})
    assert result.status == "completed", result.reason
    assert len(asked) == 1 and asked[0].startswith("Approve this draft for 'Release notes for 4.0.0'? Draft:")
    published = json.loads((tmp_path / ".plangate/demo/published.jsonl").read_text().splitlines()[-1])
    assert published["notes"] == "Looks good."
    audited = (tmp_path / ".plangate/demo/messages/audit.log").read_text().splitlines()
    assert len(audited) >= 3  # the aspect ran after every tool step


def test_fanout(runner: FormulaRunner) -> None:
    result, _ = run_answering(runner, "fanout", {})
    assert result.status == "completed", result.reason
    children = runner.store.list_runs(parent_run_id=result.run_id).items
    assert sorted(c.input["vars"]["region"] for c in children) == ["ap-south", "eu-west", "us-east"]  # type: ignore[index]
    assert result.steps["verify"].status == "complete"
