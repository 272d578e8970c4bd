"""The web console in a real headless Chromium: what waits on you inside a run, and runs inside runs.

- A formula's agent step asks consent for its write: the approval card shows on the formula run (after a
  reload too: the run document has the question), links to the agent run that asks, and approving there
  lets the formula finish. The agent run's page links back to its formula.
- A fan-out's sub-runs are listed under their parent, not beside it; each links to the other.
- A start form's mistakes show next to their field; a formula whose tools the server lacks cannot be
  chosen and says why.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from console_helpers import DEMO_TOOLS, console_page, console_server, screenshot
from playwright.sync_api import Page, expect

from plangate.models import ScriptedModel

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the example tools write under .plangate/demo (and the demo's week in .plangate/) of the cwd
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLANGATE_STORE", raising=False)


def _place_review() -> str:
    arguments = {"task": "review", "day": "wed", "slot": "09:00"}
    return json.dumps({"action": "continue", "tool_call": {"name": "place", "arguments": arguments}})


def _run_id(page: Page) -> str:
    return str(page.evaluate("location.hash")).rsplit("/", 1)[-1]


def test_an_agent_steps_consent_is_answered_on_the_formula_run_after_a_reload(tmp_path: Path) -> None:
    model = ScriptedModel([_place_review(), json.dumps({"action": "done", "speak": "Placed."}), "Done."])
    with console_server(tmp_path, model=model, tools_spec=DEMO_TOOLS) as (server, store):
        with console_page(server) as (page, log):
            page.goto(server.url + "/")
            page.get_by_role("combobox", name="Formula").select_option("plan-week")
            page.get_by_role("button", name="Start formula run").click()
            card = page.locator("#interaction section.interaction")
            expect(card).to_contain_text("Revenue by region for 2026-06")
            parent = _run_id(page)
            card.get_by_role("button", name="Approve", exact=True).click()

            # the agent of step "schedule" asks; the card is on the formula run, naming who asks
            expect(card.get_by_role("heading")).to_have_text("The run asks you to confirm")
            expect(card).to_contain_text("Allow place")
            origin = card.locator("a.origin-link")
            expect(origin).to_have_text("the agent of step schedule")
            expect(page.locator("#run-status")).to_have_text("waiting")
            (child,) = store.list_runs(parent_run_id=parent).items
            assert store.list_interactions(status="open", run_id=child.id)

            page.reload()  # the question comes from the run document, not from this page's memory
            card = page.locator("#interaction section.interaction")
            expect(card).to_contain_text("Allow place")
            expect(card.locator("a.origin-link")).to_have_attribute("href", f"#/runs/{child.id}")
            screenshot(page, "nested-consent-on-parent.png")

            # the agent's own page has the same question and links back to its formula run
            card.locator("a.origin-link").click()
            expect(page.locator("#run-parent")).to_contain_text("The agent of step schedule of")
            expect(page.locator("#interaction section.interaction")).to_contain_text("Allow place")
            page.locator("#run-parent a.parent-link").click()
            assert _run_id(page) == parent

            page.locator("#interaction section.interaction").get_by_role(
                "button", name="Approve", exact=True
            ).click()
            expect(page.locator("#run-status")).to_have_text("completed")
            expect(page.locator("#interaction section.interaction")).to_have_count(0)
            expect(page.locator("#subruns li.subrun")).to_have_count(1)
            screenshot(page, "nested-consent-completed.png")
            log.assert_clean()
        assert store.get_run(parent).status == "completed"
        assert store.get_run(child.id).status == "completed"


def test_fan_out_sub_runs_are_listed_under_their_parent_and_linked_both_ways(tmp_path: Path) -> None:
    with console_server(tmp_path) as (server, store), console_page(server) as (page, log):
        page.goto(server.url + "/")
        page.get_by_role("combobox", name="Formula").select_option("fanout")
        page.get_by_role("button", name="Start formula run").click()
        expect(page.locator("#run-status")).to_have_text("completed")
        parent = _run_id(page)
        children = store.list_runs(parent_run_id=parent).items
        assert len(children) == 3

        runs = page.locator("#runs")
        expect(runs.locator(f"li[data-run='{parent}']")).to_be_visible()
        # only the parent at the top of the list; its sub-runs under it, on demand
        expect(runs.locator(":scope > li")).to_have_count(1)
        for child in children:
            expect(runs.locator(f"li[data-run='{child.id}']")).to_have_count(0)
        runs.get_by_role("button", name="Show the sub-runs of fanout").click()
        nested = runs.get_by_role("list", name="Sub-runs of fanout")
        expect(nested.locator(":scope > li")).to_have_count(3)
        expect(runs.locator(":scope > li")).to_have_count(1)

        # the parent's page lists them; a sub-run's page links back
        expect(page.locator("#subruns li.subrun")).to_have_count(3)
        screenshot(page, "fanout-nested.png")
        page.locator(f"#subruns li[data-run='{children[0].id}'] a").click()
        expect(page.locator("#run-parent")).to_contain_text("Sub-run of fanout")
        deploy = page.locator("#steps li.step[data-step='deploy']")
        expect(deploy).to_have_attribute("data-status", "complete")
        # the list keeps the sub-run on the page visible, marked, under its parent
        expect(runs.locator(f"li.current[data-run='{children[0].id}']")).to_be_visible()
        page.locator("#run-parent a.parent-link").click()
        assert _run_id(page) == parent
        log.assert_clean()


def test_a_start_forms_mistakes_show_next_to_the_field(tmp_path: Path) -> None:
    with console_server(tmp_path) as (server, store), console_page(server) as (page, log):
        page.goto(server.url + "/")
        select = page.get_by_role("combobox", name="Formula")
        # served with tools.py only: plan-week is listed, cannot be chosen, and says why
        option = select.locator("option[value='plan-week']")
        expect(option).to_be_disabled()
        expect(option).to_have_text("plan-week (cannot start here: this server lacks db_query, place)")

        page.get_by_role("button", name="Start formula run").click()
        expect(page.locator("#formula-name-error")).to_have_text("Choose a formula to run.")
        expect(select).to_have_attribute("aria-invalid", "true")

        select.select_option("release")
        version = page.get_by_label("version")
        page.get_by_role("button", name="Start formula run").click()
        error = page.locator("[data-error-for='version']")
        expect(error).to_have_text('The var "version" is required.')
        expect(version).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#notice")).to_be_hidden()

        # the server's check refuses the pattern: its issue goes to the field it is about
        version.fill("1.4")
        page.get_by_role("button", name="Start formula run").click()
        expect(error).to_contain_text("does not match the pattern")
        expect(page.locator("#notice")).to_be_hidden()
        error_box = error.bounding_box()
        field_box = version.bounding_box()
        assert error_box is not None and field_box is not None
        assert 0 <= error_box["y"] - field_box["y"] < 120  # right under its field
        screenshot(page, "form-field-errors.png")
        assert store.list_runs().items == []

        page.get_by_role("tab", name="Agent").click()
        page.get_by_role("button", name="Start agent run").click()
        expect(page.locator("#agent-prompt-error")).to_have_text("Write a prompt for the agent.")
        log.assert_clean()


class _SlowModel(ScriptedModel):
    """A scripted model that thinks for a while before each answer, as a local model on a busy machine."""

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        await asyncio.sleep(3)
        async for chunk in super().stream(request):
            yield chunk


def test_after_approve_the_page_shows_the_run_moving_while_the_model_works(tmp_path: Path) -> None:
    # "Sending…" stayed on the button for minutes: the answer is in at once, and the page says so, then
    # shows the run running and its next wait as they come
    model = _SlowModel([_place_review(), json.dumps({"action": "done", "speak": "Placed."}), "Done."])
    with console_server(tmp_path, model=model, tools_spec=DEMO_TOOLS) as (server, store):
        with console_page(server) as (page, log):
            page.goto(server.url + "/")
            page.get_by_role("combobox", name="Formula").select_option("plan-week")
            page.get_by_role("button", name="Start formula run").click()
            card = page.locator("#interaction section.interaction")
            expect(card).to_contain_text("Revenue by region for 2026-06")
            card.get_by_role("button", name="Approve", exact=True).click()

            note = page.locator("#interaction .answered-note")
            expect(note).to_have_text("Approved. The run goes on…", timeout=2_500)
            expect(page.get_by_role("button", name="Sending…")).to_have_count(0, timeout=2_500)
            expect(page.locator("#run-status")).to_have_text("running", timeout=2_500)

            # the next wait, once the slow model asked for its call
            expect(card).to_contain_text("Allow place")
            expect(page.locator("#run-status")).to_have_text("waiting")
            card.get_by_role("button", name="Approve", exact=True).click()
            expect(note).to_have_text("Approved. The run goes on…", timeout=2_500)
            expect(page.locator("#run-status")).to_have_text("completed")
            expect(note).to_have_count(0)
            log.assert_clean()
        assert [run.status for run in store.list_runs().items] == ["completed", "completed"]
