"""The web console in a real headless Chromium against the real server: an agent run's write needs consent.

The agent runs on a ``ScriptedModel`` (a test double: no network). It asks to call the ``publish`` write
tool; the person edits one argument in the form built from the tool's JSON schema and approves; the tool runs
with exactly the edited call and the run completes, all seen live in the page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from console_helpers import console_page, console_server, screenshot
from playwright.sync_api import expect

from plangate.models import ScriptedModel

pytestmark = pytest.mark.slow

ARTIFACT = ".plangate/demo/dist/app-1.4.0.txt"


def _decision(action: str, **fields: object) -> str:
    return json.dumps({"action": action, **fields})


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the example tools write under .plangate/demo relative to the working directory
    monkeypatch.chdir(tmp_path)


def test_a_write_is_approved_in_the_page_with_an_edited_argument(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            _decision(
                "continue",
                speak="Publishing the artifact.",
                tool_call={"name": "publish", "arguments": {"artifact": ARTIFACT, "channel": "stable"}},
            ),
            _decision("done", speak="It is out."),
            "Published 1.4.0 to the beta channel.",
        ]
    )
    with console_server(tmp_path, model=model) as (server, store), console_page(server) as (page, log):
        page.goto(server.url + "/")
        page.get_by_role("tab", name="Agent").click()
        page.get_by_label("Prompt").fill("Publish the 1.4.0 artifact")
        page.get_by_label("Mode", exact=True).select_option("react")
        page.get_by_role("button", name="Start agent run").click()

        card = page.locator("#interaction section.interaction")
        expect(card).to_be_visible()
        expect(card.get_by_role("heading")).to_have_text("The run asks you to confirm")
        expect(card).to_contain_text("Allow publish")
        expect(card.locator(".arguments")).to_contain_text('"channel": "stable"')
        expect(page.locator("#run-status")).to_have_text("waiting")
        nothing_published = tmp_path / ".plangate" / "demo" / "published.jsonl"
        assert not nothing_published.exists()

        card.get_by_role("button", name="Edit arguments").click()
        editor = card.get_by_role("group", name="Edit the arguments of publish")
        expect(editor.get_by_label("artifact")).to_have_value(ARTIFACT)  # the stored call, pre-filled
        expect(editor.get_by_label("channel")).to_have_value("stable")
        editor.get_by_label("channel").fill("beta")
        editor.get_by_label("notes").fill("edited in the console")
        screenshot(page, "agent-edit.png")
        editor.get_by_role("button", name="Approve with these arguments").click()

        expect(page.locator("#interaction section.interaction")).to_have_count(0)
        expect(page.locator("#run-status")).to_have_text("completed")
        timeline = page.locator("#timeline")
        expect(timeline.locator("li.event-outcome")).to_contain_text("completed")
        usage = page.get_by_label("Usage")
        shown = re.compile(r"^[\d,]+ tokens in, [\d,]+ out in 3 model calls \(scripted")
        expect(usage).to_contain_text(shown)
        expect(timeline).to_contain_text("approved with edited arguments")
        expect(timeline.locator("li.event-speak").first).to_contain_text("Publishing the artifact.")
        result = timeline.locator("li.event-tool_call .result")
        expect(result).to_have_class("result success")
        screenshot(page, "agent-completed.png")
        log.assert_clean()

        (run,) = store.list_runs(kind="agent").items
        assert run.status == "completed"
        (interaction,) = store.list_interactions(run_id=run.id)
        assert interaction.resolution == {
            "kind": "edit",
            "arguments": {
                "artifact": ARTIFACT,
                "channel": "beta",
                "owner": "",
                "notes": "edited in the console",
            },
        }

    lines = nothing_published.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"artifact": ARTIFACT, "channel": "beta", "owner": "", "notes": "edited in the console"}
    ]


def test_a_planned_run_asks_a_question_that_is_answered_in_the_page(tmp_path: Path) -> None:
    plan = {
        "action": "plan_done",
        "reason": "one question first",
        "plan_steps": [{"content": "Ask which channel to use", "done_when": "the user named a channel"}],
    }
    model = ScriptedModel(
        [
            json.dumps(plan),
            _decision("ask_user", speak="Which channel: stable or beta?"),
            _decision("done", goal_check="the user chose a channel"),
            "You chose beta.",
        ]
    )
    with console_server(tmp_path, model=model) as (server, store), console_page(server) as (page, log):
        page.goto(server.url + "/")
        page.get_by_role("tab", name="Agent").click()
        page.get_by_label("Prompt").fill("Pick a release channel")
        page.get_by_label("Mode", exact=True).select_option("plan")
        page.get_by_role("button", name="Start agent run").click()

        card = page.locator("#interaction section.interaction")
        expect(card.get_by_role("heading")).to_have_text("The run asks you a question")
        expect(card).to_contain_text("Plan step 1")
        expect(card.locator(".prompt")).to_have_text("Which channel: stable or beta?")
        plan_item = page.locator("#timeline li.event-plan")
        expect(plan_item).to_contain_text("Ask which channel to use")
        expect(plan_item).to_contain_text("done when: the user named a channel")

        card.get_by_role("button", name="Send answer").click()  # empty: refused in the page
        expect(card.locator(".card-error")).to_have_text("Write an answer first.")
        card.get_by_label("Your answer").fill("beta, please")
        screenshot(page, "agent-question.png")
        card.get_by_role("button", name="Send answer").click()

        expect(page.locator("#interaction section.interaction")).to_have_count(0)
        expect(page.locator("#run-status")).to_have_text("completed")
        timeline = page.locator("#timeline")
        expect(timeline).to_contain_text("Resolved answered")
        expect(timeline.locator("li.event-speak .speech").last).to_have_text("You chose beta.")
        log.assert_clean()

        (run,) = store.list_runs(kind="agent").items
        (interaction,) = store.list_interactions(run_id=run.id)
        assert interaction.resolution == {"kind": "answer", "text": "beta, please"}
    # the model's next call saw the answer
    assert any("beta, please" in message.content for message in model.requests[2].messages)
