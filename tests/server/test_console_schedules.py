"""The web console's Schedules view in a real headless Chromium, on a server that fires a 1-second schedule:
the schedule is listed with when it fires next; its page lists the latest slots, each with the run it
started (a link to that run's page, with its status); Pause and Resume change it on the server and say so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import console_page, console_server, screenshot
from playwright.sync_api import expect

from plangate.runs.schedules import Schedules

pytestmark = pytest.mark.slow

SCHEDULED = Path(__file__).parent / "schedules"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLANGATE_STORE", raising=False)


def test_the_schedules_view_lists_slots_with_their_runs_and_pauses(tmp_path: Path) -> None:
    with console_server(tmp_path, formulas=(SCHEDULED,)) as (server, store):
        Schedules(store).add("local", "nightly", "nightly", every=1.0, overlap="allow")
        Schedules(store).add("local", "weekly", "nightly", cron="0 9 * * MON", timezone="Europe/Paris")
        with console_page(server) as (page, log):
            page.goto(server.url + "/")
            page.get_by_role("link", name="Schedules").click()
            listed = page.locator("#schedules li")
            expect(listed).to_have_count(2)
            weekly = page.locator('#schedules li[data-schedule="weekly"]')
            expect(weekly).to_contain_text("cron 0 9 * * MON (Europe/Paris)")
            expect(weekly.locator(".schedule-next")).to_contain_text("next ")

            page.locator('#schedules li[data-schedule="nightly"] a').click()
            expect(page.locator("#schedule-title")).to_have_text("nightly")
            fired = page.locator('#schedule-slots tr[data-state="fired"]')
            expect(fired.first).to_be_visible()
            expect(fired.first.locator(".badge").last).to_have_text("completed")
            screenshot(page, "schedules.png")

            page.get_by_role("button", name="Pause").click()
            expect(page.locator("#schedule-state .badge")).to_have_text("paused")
            expect(page.locator("#schedule-next")).to_have_text("paused")
            assert Schedules(store).get("nightly", owner="local").paused
            page.get_by_role("button", name="Resume").click()
            expect(page.locator("#schedule-state .badge")).to_have_text("active")
            assert not Schedules(store).get("nightly", owner="local").paused

            run_link = fired.first.locator("a.slot-run")
            run_id = run_link.inner_text()
            run_link.click()
            expect(page.locator("#run-title")).to_be_visible()
            assert page.evaluate("location.hash") == f"#/runs/{run_id}"
            expect(page.locator("#run-status .badge")).to_have_text("completed")
            log.assert_clean()
