"""Tools and formulas the executor tests run: small, deterministic, and counting what they did."""

from __future__ import annotations

import asyncio
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

from plangate.errors import StoreError
from plangate.events import StepStateEvent
from plangate.formulas.runtime import FormulaRunner
from plangate.interactions import Resolution
from plangate.store import SQLiteStore, Store, open_store
from plangate.tools import Tool, ToolRegistry, tool


class Calls:
    """What the test tools were asked to do, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.running = 0
        self.max_running = 0
        self.fail_times: Counter[str] = Counter()
        self.healthy_after = 3

    def names(self) -> list[str]:
        return [name for name, _ in self.log]


def make_tools(calls: Calls) -> ToolRegistry:
    """The tools of the example formulas, recording into ``calls``."""

    @tool
    async def run_tests(suite: str, version: str) -> dict[str, Any]:
        """Run the test suite."""
        calls.log.append(("run_tests", {"suite": suite, "version": version}))
        if calls.fail_times["run_tests"] > 0:
            calls.fail_times["run_tests"] -= 1
            raise RuntimeError("flaky test runner")
        return {"passed": 42, "failed": 0}

    @tool
    def build_artifact(version: str, channel: str) -> dict[str, Any]:
        """Build the artifact."""
        calls.log.append(("build_artifact", {"version": version, "channel": channel}))
        return {"artifact": f"dist/app-{version}.tar.gz"}

    @tool(effect="write")
    def publish(artifact: str, channel: str, owner: str) -> dict[str, Any]:
        """Publish the artifact."""
        calls.log.append(("publish", {"artifact": artifact, "channel": channel, "owner": owner}))
        return {"url": f"https://downloads.invalid/{channel}/{artifact}"}

    @tool
    def deploy(service: str = "", region: str = "") -> dict[str, Any]:
        """Deploy a service or a region."""
        calls.log.append(("deploy", {"service": service, "region": region}))
        return {"deployed": service or region}

    @tool
    def check_health(
        service: str = "", attempt: int = 0, region: str = "", scope: str = ""
    ) -> dict[str, Any]:
        """Check health."""
        calls.log.append(("check_health", {"service": service, "attempt": attempt, "region": region}))
        healthy = not attempt or attempt >= calls.healthy_after
        return {"healthy": healthy}

    @tool
    def notify(message: str) -> str:
        """Say something."""
        calls.log.append(("notify", {"message": message}))
        return f"sent: {message}"

    @tool
    def list_regions() -> dict[str, Any]:
        """The regions to deploy to."""
        calls.log.append(("list_regions", {}))
        return {"regions": ["eu-west", "us-east", "ap-south"]}

    @tool
    async def work(name: str, delay: float = 0.0, fail: bool = False) -> dict[str, Any]:
        """A step of work that takes ``delay`` seconds."""
        calls.running += 1
        calls.max_running = max(calls.max_running, calls.running)
        try:
            calls.log.append(("work", {"name": name}))
            await asyncio.sleep(delay)
            if fail:
                raise RuntimeError(f"{name} broke")
            return {"name": name, "n": len(calls.log)}
        finally:
            calls.running -= 1

    tools: list[Tool] = [run_tests, build_artifact, publish, deploy, check_health, notify, list_regions, work]
    return ToolRegistry(tools)


def write_formula(directory: Path, name: str, body: str) -> Path:
    """Write ``<name>.formula.toml`` into ``directory``."""
    path = directory / f"{name}.formula.toml"
    path.write_text(f'formula = "{name}"\n' + textwrap.dedent(body), encoding="utf-8")
    return path


def memory_store() -> SQLiteStore:
    store = open_store(":memory:")
    assert isinstance(store, SQLiteStore)
    return store


def failing_child_creation(store: Store, nth: int = 1) -> list[str]:
    """Make ``store`` fail, once, as a database restarting would, when the ``nth`` run with a parent (a
    sub-run, an agent step's agent) is created; returns the list the failed run's id is noted in."""
    create = store.create_run
    made: list[str] = []
    failed: list[str] = []

    def create_run(*args: Any, **options: Any) -> Any:
        if options.get("parent_run_id") is not None:
            made.append(str(options.get("run_id")))
            if len(made) == nth and not failed:
                failed.append(made[-1])
                raise StoreError("create the run failed: the connection to the database was lost")
        return create(*args, **options)

    store.create_run = create_run  # type: ignore[method-assign]
    return failed


def failed_steps(store: Store, run_id: str) -> list[str]:
    """The steps of the run that were ever recorded ``failed``, from its events."""
    return [e.step_id for e in store.events(run_id) if isinstance(e, StepStateEvent) and e.status == "failed"]


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formulas"


def answer(runner: FormulaRunner, interaction_id: str, resolution: Resolution, **options: Any) -> str:
    """``FormulaRunner.answer`` from synchronous code; returns the run that asked."""
    return asyncio.run(runner.answer(interaction_id, resolution, **options)).run_id
