"""The tools the example formulas call: small, offline and deterministic, writing under .plangate/demo/.

Use them with ``--tools examples/formulas/tools.py:registry``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from plangate.tools import ToolRegistry, tool

WORKDIR = Path(".plangate/demo")


def _write(relative: str, content: str) -> Path:
    path = WORKDIR / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


@tool
def run_tests(suite: str = "all", version: str = "") -> dict[str, Any]:
    """Run the test suite and report how many tests passed and failed.

    Args:
        suite: which suite to run.
        version: the version under test.
    """
    seed = int(hashlib.sha256(f"{suite}:{version}".encode()).hexdigest()[:6], 16)
    return {"suite": suite, "passed": 200 + seed % 50, "failed": 0, "duration_s": round(3 + seed % 7 / 10, 1)}


@tool
def build_artifact(version: str, channel: str = "stable") -> dict[str, Any]:
    """Build the release artifact for a version.

    Args:
        version: the version to build.
        channel: the release channel it is for.
    """
    path = _write(f"dist/app-{version}.txt", f"app {version} ({channel}) built {time.strftime('%Y-%m-%d')}\n")
    return {"artifact": str(path), "bytes": path.stat().st_size}


@tool(effect="write")
def publish(artifact: str, channel: str = "stable", owner: str = "", notes: str = "") -> dict[str, Any]:
    """Publish an artifact to a channel.

    Args:
        artifact: the file to publish.
        channel: stable or beta.
        owner: who owns the release.
        notes: release notes.
    """
    index = WORKDIR / "published.jsonl"
    index.parent.mkdir(parents=True, exist_ok=True)
    entry = {"artifact": artifact, "channel": channel, "owner": owner, "notes": notes}
    with index.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
    return {"url": f"file://{index.resolve()}", "channel": channel}


@tool
def deploy(service: str = "", region: str = "") -> dict[str, Any]:
    """Deploy a service, or deploy to a region.

    Args:
        service: the service to deploy.
        region: the region to deploy to.
    """
    return {"deployed": service or region, "at": time.strftime("%H:%M:%S")}


@tool
def check_health(service: str = "", attempt: int = 1, region: str = "", scope: str = "") -> dict[str, Any]:
    """Check whether a service (or a region) is healthy; a fresh deploy turns healthy on the second check.

    Args:
        service: the service to check.
        attempt: which check this is (1, 2, ...).
        region: the region to check.
        scope: what to check, when not one service or region.
    """
    return {"healthy": attempt >= 2 or bool(region or scope), "attempt": attempt}


@tool
def notify(message: str = "", channel: str = "team", step: str = "") -> str:
    """Post a message to a channel.

    Args:
        message: what to say.
        channel: where to say it.
        step: the step the message is about.
    """
    text = message or f"step {step} finished"
    log = WORKDIR / "messages" / f"{channel}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as handle:
        handle.write(text + "\n")
    return f"posted to #{channel}: {text}"


@tool
def list_regions() -> dict[str, Any]:
    """The regions a release goes to."""
    return {"regions": ["eu-west", "us-east", "ap-south"]}


@tool
def write_draft(topic: str) -> dict[str, Any]:
    """Write a first draft about a topic.

    Args:
        topic: what the draft is about.
    """
    return {"text": f"Draft: {topic}. Highlights, fixes and thanks."}


registry = ToolRegistry(
    [run_tests, build_artifact, publish, deploy, check_health, notify, list_regions, write_draft]
)
