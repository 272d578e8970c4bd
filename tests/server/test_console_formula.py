"""The web console in a real headless Chromium against the real server: formula runs.

A person starts the ``release`` formula from the page's form, sees its steps as a DAG and the approval card
at the top of the run page, approves (or rejects) there, and watches the run end in the timeline. Also: the
problem documents the server answers with reach the page as readable messages, and the token prompt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from console_helpers import console_page, console_server, screenshot
from playwright.sync_api import Locator, Page, expect

from plangate.server.tokens import Tokens, hash_token, new_token

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the example tools write under .plangate/demo relative to the working directory
    monkeypatch.chdir(tmp_path)


def _start_release(page: Page, version: str) -> None:
    page.get_by_role("combobox", name="Formula").select_option("release")
    page.get_by_label("version").fill(version)
    page.get_by_role("button", name="Start formula run").click()


def _step(page: Page, step_id: str) -> Locator:
    return page.locator(f"#steps li.step[data-step='{step_id}']")


def test_release_started_from_the_form_waits_for_approval_then_completes(tmp_path: Path) -> None:
    with console_server(tmp_path) as (server, store), console_page(server) as (page, log):
        page.goto(server.url + "/")
        page.get_by_role("combobox", name="Formula").select_option("release")
        # the vars come from the formula's specs: a required text field, an enum as a select with its default
        expect(page.get_by_label("version")).to_have_value("")
        expect(page.get_by_label("channel")).to_have_value("stable")
        expect(page.locator("#formula-description")).to_have_text(
            "Test, build, approve and publish a release"
        )

        _start_release(page, "1.4.0")

        card = page.locator("#interaction section.interaction")
        expect(card).to_be_visible()
        expect(card.get_by_role("heading")).to_have_text("The run needs your approval")
        expect(card).to_contain_text("Ship 1.4.0 to stable? Artifact:")
        expect(page.locator("#run-status")).to_have_text("waiting")
        # the card sits above the steps and the timeline
        card_box = card.bounding_box()
        timeline_box = page.locator("#timeline").bounding_box()
        assert card_box is not None and timeline_box is not None
        assert card_box["y"] < timeline_box["y"]

        # the DAG: one column per depth, each step with its state
        expect(_step(page, "run-tests")).to_have_attribute("data-status", "complete")
        expect(_step(page, "build")).to_have_attribute("data-status", "complete")
        expect(_step(page, "approve")).to_have_attribute("data-status", "waiting")
        expect(_step(page, "publish")).to_have_attribute("data-status", "pending")
        layers = page.locator("#steps .layer")
        expect(layers).to_have_count(4)
        expect(layers.nth(3)).to_contain_text("publish")
        expect(_step(page, "publish")).to_contain_text("after approve")
        run_id = page.evaluate("location.hash").rsplit("/", 1)[-1]
        assert store.get_run(run_id).status == "waiting"
        screenshot(page, "release-waiting.png")

        card.get_by_role("button", name="Approve", exact=True).click()

        expect(page.locator("#interaction section.interaction")).to_have_count(0)
        expect(page.locator("#run-status")).to_have_text("completed")
        outcome = page.locator("#timeline li.event-outcome")
        expect(outcome).to_have_count(1)
        expect(outcome).to_contain_text("completed")
        expect(page.locator("#timeline")).to_contain_text("approved")
        expect(page.locator("#outcome")).to_contain_text("completed")
        # live updates from step_state and gate events
        expect(_step(page, "publish")).to_have_attribute("data-status", "complete")
        expect(_step(page, "publish").locator(".gate")).to_have_attribute("data-gate", "open")
        expect(page.locator(f"#runs li[data-run='{run_id}']")).to_have_attribute("data-status", "completed")
        screenshot(page, "release-completed.png")
        log.assert_clean()
        assert store.get_run(run_id).status == "completed"

    published = (tmp_path / ".plangate" / "demo" / "published.jsonl").read_text(encoding="utf-8")
    entry = json.loads(published.splitlines()[-1])
    assert (entry["channel"], entry["owner"]) == ("stable", "release-team")
    assert entry["artifact"].endswith("app-1.4.0.txt")


def test_rejecting_the_release_with_a_reason_fails_the_run_and_says_why(tmp_path: Path) -> None:
    with console_server(tmp_path) as (server, _store), console_page(server) as (page, log):
        page.goto(server.url + "/")
        _start_release(page, "2.0.0")
        card = page.locator("#interaction section.interaction")
        expect(card).to_be_visible()

        card.get_by_label("Reason for rejecting (optional)").fill("not during the freeze")
        card.get_by_role("button", name="Reject").click()

        expect(page.locator("#interaction section.interaction")).to_have_count(0)
        expect(page.locator("#run-status")).to_have_text("failed")
        expect(_step(page, "approve")).to_have_attribute("data-status", "failed")
        expect(_step(page, "approve")).to_contain_text("rejected: not during the freeze")
        expect(page.locator("#timeline")).to_contain_text("rejected")
        log.assert_clean()
    assert not (tmp_path / ".plangate" / "demo" / "published.jsonl").exists()


def test_a_waiting_run_is_cancelled_from_its_page_after_a_second_click(tmp_path: Path) -> None:
    with console_server(tmp_path) as (server, store), console_page(server) as (page, log):
        page.goto(server.url + "/")
        _start_release(page, "1.5.0")
        expect(page.locator("#interaction section.interaction")).to_be_visible()
        run_id = page.evaluate("location.hash").rsplit("/", 1)[-1]

        page.get_by_role("button", name="Cancel run").click()
        expect(page.get_by_role("button", name="Click again to cancel")).to_be_visible()
        assert store.get_run(run_id).status == "waiting"  # one click only arms the button
        page.get_by_role("button", name="Click again to cancel").click()

        expect(page.locator("#run-status")).to_have_text("cancelled")
        expect(page.locator("#interaction section.interaction")).to_have_count(0)
        expect(page.get_by_role("button", name="Cancel run")).to_be_hidden()
        expect(_step(page, "publish")).to_have_attribute("data-status", "cancelled")
        log.assert_clean()
        assert store.get_run(run_id).status == "cancelled"


def test_form_mistakes_and_refused_vars_are_shown_as_readable_messages(tmp_path: Path) -> None:
    with console_server(tmp_path) as (server, store), console_page(server) as (page, log):
        page.goto(server.url + "/")
        page.get_by_role("combobox", name="Formula").select_option("release")

        page.get_by_role("button", name="Start formula run").click()
        notice = page.locator("#notice")
        field_error = page.locator("[data-error-for='version']")
        expect(field_error).to_contain_text('The var "version" is required.')
        assert store.list_runs().items == []

        # the server checks the pattern; its problem document reaches the page, next to the field
        page.get_by_label("version").fill("1.4")
        page.get_by_role("button", name="Start formula run").click()
        expect(field_error).to_contain_text("does not match the pattern")
        assert store.list_runs().items == []

        # a problem that belongs to no field goes to the banner, which can be dismissed
        page.goto(server.url + "/#/runs/no-such-run")
        expect(page.locator("#run-title")).to_have_text("Run not found")
        expect(notice).to_be_visible()
        page.get_by_role("button", name="Dismiss the message").click()
        expect(notice).to_be_hidden()
        log.assert_clean()


def test_the_console_asks_for_a_token_once_and_keeps_it(tmp_path: Path) -> None:
    pepper = b"console-test-pepper"
    token = new_token()
    with console_server(tmp_path, auth=True, pepper=pepper) as (server, store):
        Tokens(store).create("alice", hash_token(token, pepper), name="console test")
        with console_page(server) as (page, log):
            page.goto(server.url + "/")
            dialog = page.get_by_role("dialog", name="API token")
            expect(dialog).to_be_visible()
            dialog.get_by_label("Token").fill(token)
            dialog.get_by_role("button", name="Save token").click()
            expect(dialog).to_be_hidden()
            expect(page.get_by_role("combobox", name="Formula")).to_contain_text("release")

            _start_release(page, "3.1.0")
            expect(page.locator("#interaction section.interaction")).to_be_visible()
            (run,) = store.list_runs().items
            assert run.owner == "alice"

            page.reload()  # the token stays in this browser: no second prompt
            expect(page.locator(f"#runs li[data-run='{run.id}']")).to_be_visible()
            expect(page.get_by_role("dialog", name="API token")).to_be_hidden()
            log.assert_clean()
