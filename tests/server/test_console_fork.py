"""The web console in a real headless Chromium: "fork from here" on an agent round, and "retry from this
step" on a formula step, each open the new run, which names its origin and asks again before a write; a
run's page shows its parentage both ways, and the compare view sets two runs side by side with the first
divergence marked."""

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


def _publish(channel: str = "beta") -> str:
    arguments = {"artifact": ARTIFACT, "channel": channel}
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
        retries = [run for run in store.list_runs(kind="formula").items if run.id != origin]
        assert [run.input["retried_from"]["step"] for run in retries] == ["build"]
        retry = retries[0].id

        page.locator("#run-origin").get_by_role("link", name=origin).click()  # back to the origin
        expect(page.locator("#run-derived")).to_contain_text(f"Retries: {retry}")
        expect(page.locator("#run-derived")).to_contain_text("from step build")
        page.locator("#run-derived").get_by_role("link", name="compare").click()
        assert page.url.endswith(f"#/runs/{origin}/diff/{retry}")
        table = page.locator("#diff table.diff-table")
        expect(table.locator("thead th").first).to_have_text("step")
        expect(table.locator("tbody tr[data-key='run-tests'] td").first).to_contain_text("complete")
        log.assert_clean()


def test_the_compare_view_sets_two_runs_side_by_side_and_marks_the_first_divergence(tmp_path: Path) -> None:
    done = json.dumps({"action": "done", "speak": "Published."})
    model = ScriptedModel(
        [_publish(), done, "Out.", done, "Out again.", json.dumps({"action": "done"}), "Hi."]
    )
    with console_server(tmp_path, model=model) as (server, store), console_page(server) as (page, log):
        with httpx.Client(base_url=server.url, timeout=30) as http:
            body = {"kind": "agent", "prompt": "Publish the artifact", "mode": "react"}
            origin = http.post("/v1/runs", json=body).json()["run"]["id"]
            asked = _settled(http, origin)["interaction"]
            assert isinstance(asked, dict)
            http.post(f"/v1/interactions/{asked['id']}", json={"kind": "approve"})
            _settled(http, origin)
            stable = {"artifact": ARTIFACT, "channel": "stable"}
            forked = http.post(f"/v1/runs/{origin}/fork", json={"at_round": 1, "arguments": stable})
            fork = forked.json()["run"]["id"]
            asked = _settled(http, fork)["interaction"]
            assert isinstance(asked, dict)
            http.post(f"/v1/interactions/{asked['id']}", json={"kind": "approve"})
            _settled(http, fork)
            other = http.post("/v1/runs", json={"kind": "agent", "prompt": "Say hi", "mode": "react"})
            other_id = other.json()["run"]["id"]
            _settled(http, other_id)

        page.goto(f"{server.url}/#/runs/{fork}")
        expect(page.locator("#run-origin")).to_contain_text(f"Forked from {origin} before round 1")
        page.locator("#run-origin").get_by_role("link", name="compare").click()
        summary = page.locator("#diff .diff-summary")
        expect(summary).to_contain_text("First divergence at round 1: arguments:")
        expect(summary).to_contain_text('"channel":"beta"')
        marked = page.locator("#diff tr.first-divergence")
        expect(marked).to_have_count(1)
        expect(marked).to_have_attribute("data-key", "1")
        expect(marked.locator("th")).to_contain_text("first divergence")
        expect(marked.locator("td").nth(0)).to_contain_text('"channel":"stable"')  # this run: the fork
        expect(marked.locator("td").nth(1)).to_contain_text('"channel":"beta"')
        expect(page.locator("#diff tr[data-key='outcome']")).to_have_class("same")
        screenshot(page, "compare-fork.png")

        # from the origin's page: its fork listed, and any other run of the owner chosen to compare with
        page.goto(f"{server.url}/#/runs/{origin}")
        expect(page.locator("#run-derived")).to_contain_text(f"Forks: {fork}")
        page.locator("#diff-box summary").click()
        choice = page.locator("#diff-with")
        expect(choice.locator(f"option[value='{other_id}']")).to_have_count(1)
        choice.select_option(other_id)
        page.locator("#diff-form").get_by_role("button", name="Compare").click()
        expect(page.locator("#diff caption")).to_contain_text(f"{origin} and {other_id}, aligned by round")
        assert page.url.endswith(f"#/runs/{origin}/diff/{other_id}")

        page.goto(f"{server.url}/#/runs/{origin}/diff/run_nosuch")
        expect(page.locator("#diff [role=alert]")).to_contain_text("run_nosuch")
        log.assert_clean()
        assert store.get_run(fork).origin_run_id == origin
