"""The web console in a real headless Chromium: "fork from here" on an agent round, and "retry from this
step" on a formula step, each open the new run, which names its origin and asks again before a write."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from console_helpers import console_page, console_server, screenshot
from playwright.sync_api import expect

from plangate.models import ScriptedModel

pytestmark = pytest.mark.slow

ARTIFACT = ".plangate/demo/dist/app-1.4.0.txt"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the example tools write under .plangate/demo


def _publish() -> str:
    arguments = {"artifact": ARTIFACT, "channel": "beta"}
    return json.dumps({"action": "continue", "tool_call": {"name": "publish", "arguments": arguments}})


def _settled(http: httpx.Client, run_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        shown: dict[str, object] = http.get(f"/v1/runs/{run_id}").json()
        run = shown["run"]
        assert isinstance(run, dict)
        if run["status"] in ("waiting", "completed", "failed") and not shown["active"]:
            return shown
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not settle")


def test_fork_from_a_round_in_the_page_asks_again_in_the_new_run(tmp_path: Path) -> None:
    done = json.dumps({"action": "done", "speak": "Published."})
    model = ScriptedModel([_publish(), done, "Out.", _publish(), done, "Out again."])
    published = tmp_path / ".plangate" / "demo" / "published.jsonl"
    with console_server(tmp_path, model=model) as (server, _), console_page(server) as (page, log):
        with httpx.Client(base_url=server.url, timeout=30) as http:
            body = {"kind": "agent", "prompt": "Publish the artifact", "mode": "react"}
            origin = http.post("/v1/runs", json=body).json()["run"]["id"]
            asked = _settled(http, origin)["interaction"]
            assert isinstance(asked, dict)
            http.post(f"/v1/interactions/{asked['id']}", json={"kind": "approve"})
            _settled(http, origin)
        assert len(published.read_text(encoding="utf-8").splitlines()) == 1

        page.goto(f"{server.url}/#/runs/{origin}")
        expect(page.locator("#run-status")).to_have_text("completed")
        page.locator("#timeline li.event-round").first.get_by_role("button", name="Fork from here").click()

        expect(page.locator("#run-origin")).to_contain_text(f"Forked from {origin} before round 1")
        card = page.locator("#interaction section.interaction")
        expect(card).to_contain_text("Allow publish")  # asked again, in the new run
        assert len(published.read_text(encoding="utf-8").splitlines()) == 1
        card.get_by_role("button", name="Approve").first.click()
        expect(page.locator("#run-status")).to_have_text("completed")
        screenshot(page, "agent-fork.png")
        log.assert_clean()
    assert len(published.read_text(encoding="utf-8").splitlines()) == 2


def test_retry_from_a_step_in_the_page_opens_the_retry(tmp_path: Path) -> None:
    with console_server(tmp_path) as (server, store), console_page(server) as (page, log):
        with httpx.Client(base_url=server.url, timeout=30) as http:
            body = {"kind": "formula", "formula": "release", "vars": {"version": "1.4.0"}}
            origin = http.post("/v1/runs", json=body).json()["run"]["id"]
            _settled(http, origin)
        page.goto(f"{server.url}/#/runs/{origin}")
        build = page.locator("#timeline li.event-step_state", has_text="build").filter(has_text="complete")
        build.first.get_by_role("button", name="Retry from this step").click()

        expect(page.locator("#run-origin")).to_contain_text(f"Retried from {origin} from step build")
        expect(page.locator("#run-status")).to_have_text("waiting")  # its approval is asked again
        log.assert_clean()
        retries = [run for run in store.list_runs(kind="formula").items if run.id != origin]
        assert [run.input["retried_from"]["step"] for run in retries] == ["build"]
