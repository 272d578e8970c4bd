"""The console's Ask view in a real headless Chromium against the real server, on the scripted model.

A person asks a question in the chat, watches the workflow appear and run, and reads the answer, the rows as
a table and as a chart, and the review's signals; retries a turn whose answer was unusable; registers a data
source; and closes the page in the middle of a turn, which goes on on the server and is there, finished,
when the conversation is opened again. Screenshots go to ``artifacts/console/``.
"""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import pytest
from ask_helpers import ANSWER, CHINOOK_DB, QUESTION, REVENUE_OPS, CopilotScript
from console_helpers import console_page, console_server, screenshot
from playwright.sync_api import Page, expect

from plangate.config import ModelPrice
from plangate.copilot._conversations import Conversations

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the server's data directory is the cwd; the example tools write under .plangate/demo there
    monkeypatch.chdir(tmp_path)


def _ask(page: Page, question: str) -> None:
    page.get_by_label("Question").fill(question)
    page.get_by_role("button", name="Ask", exact=True).click()


def test_a_question_in_the_chat_shows_the_workflow_the_answer_the_table_and_the_chart(tmp_path: Path) -> None:
    script = CopilotScript()
    prices = {"scripted": ModelPrice(input=1.0, output=2.0)}
    with (
        console_server(tmp_path, model=script.model, prices=prices) as (server, store),
        console_page(server) as (page, log),
    ):
        page.goto(server.url + "/#/ask")
        expect(page.get_by_role("link", name="Ask")).to_have_attribute("aria-current", "page")
        expect(page.get_by_label("Data source", exact=True)).to_have_value("shop")
        _ask(page, QUESTION)

        turn = page.locator("#chat li.turn").first
        expect(turn).to_have_attribute("data-status", "done")
        expect(turn.locator(".question-text")).to_have_text(QUESTION)
        expect(turn.locator(".answer")).to_have_text(ANSWER)
        # the workflow, as the DAG view draws it, with the states its run left
        expect(turn.locator("li.step[data-step='revenue']")).to_have_attribute("data-status", "complete")
        expect(turn.locator("li.step[data-step='answer']")).to_have_attribute("data-status", "complete")
        expect(turn.locator("li.step[data-step='answer']")).to_contain_text("after revenue")
        # the rows as a table, and as a bar chart drawn by uPlot
        rows = turn.locator(".result-table tbody tr")
        expect(rows).to_have_count(3)
        expect(rows.nth(0)).to_contain_text("East")
        expect(turn.locator(".result-table thead")).to_contain_text("revenue")
        chart = turn.locator(".ask-chart")
        expect(chart).to_have_attribute("data-kind", "bar")
        expect(chart.locator("canvas")).to_have_count(1)
        expect(chart.locator(".u-legend")).to_contain_text("revenue")
        box = chart.locator("canvas").bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
        # what its model calls used and cost: the generation's call and the answer step's
        usage = turn.get_by_label("Usage")
        expect(usage).to_have_text(
            re.compile(r"^[\d,]+ tokens in, [\d,]+ out in 2 model calls \(scripted\) · cost 0\.\d{6}$")
        )
        conversations = Conversations(store)
        [asked] = conversations.list_turns(conversations.list_conversations().items[0].id)
        stored = store.get_run(asked.run_id).outcome["usage"]  # the turn's run's outcome keeps it
        shown = f"{stored['input_tokens']:,} tokens in, {stored['output_tokens']:,} out"
        assert usage.inner_text().startswith(shown) and f"cost {stored['cost']:.6f}" in usage.inner_text()
        # the address now names the conversation, which is listed
        conversation = Conversations(store).list_conversations().items[0]
        assert page.evaluate("location.hash") == f"#/ask/{conversation.id}"
        expect(page.locator("#conversations li")).to_have_count(1)
        expect(page.locator("#conversations li").first).to_contain_text(QUESTION)
        screenshot(page, "ask-turn-done.png")

        # a follow-up joins the conversation
        _ask(page, "And which region came last?")
        expect(page.locator("#chat li.turn")).to_have_count(2)
        expect(page.locator("#chat li.turn").nth(1)).to_have_attribute("data-status", "done")
        assert Conversations(store).get_conversation(conversation.id).turns == 2
        log.assert_clean()


def test_a_partial_turn_says_why_beside_the_number_not_below_it(tmp_path: Path) -> None:
    # The query leaves out the year the question names: the figure is shown, and so is why it is not vouched.
    ops = REVENUE_OPS.replace(', "period": {"column": "orders.order_date", "from": "2025", "to": "2025"}', "")
    assert ops != REVENUE_OPS
    script = CopilotScript(ops=ops, answer="East led, then West and South.")
    with console_server(tmp_path, model=script.model) as (server, _), console_page(server) as (page, log):
        page.goto(server.url + "/#/ask")
        _ask(page, QUESTION)
        turn = page.locator("#chat li.turn").first
        expect(turn).to_have_attribute("data-status", "partial")
        answer, reason = turn.locator(".answer-row .answer"), turn.locator(".answer-row .turn-reason")
        expect(reason).to_contain_text("no date bound of the query falls in it")
        expect(answer).to_have_attribute("aria-describedby", reason.get_attribute("id") or "")
        first, second = answer.bounding_box(), reason.bounding_box()
        assert first is not None and second is not None
        assert second["x"] >= first["x"] + first["width"] - 1  # to its right
        assert second["y"] < first["y"] + first["height"]  # on the same line, not under it
        screenshot(page, "ask-turn-partial.png")
        log.assert_clean()


def test_an_unusable_turn_shows_its_signals_and_can_be_retried(tmp_path: Path) -> None:
    invented = "East led with 9,999,999.00 in revenue."
    script = CopilotScript(answers=[invented, invented, ANSWER])
    with console_server(tmp_path, model=script.model) as (server, store), console_page(server) as (page, log):
        page.goto(server.url + "/#/ask")
        _ask(page, QUESTION)
        first = page.locator("#chat li.turn").first
        expect(first).to_have_attribute("data-status", "unusable")
        signal = first.locator(".signals li[data-kind='invented_number']").first
        expect(signal).to_be_visible()
        expect(signal).to_have_attribute("data-severity", "broken")
        expect(signal).to_contain_text("9,999,999")
        expect(first.locator(".turn-reason")).to_contain_text("invented_number")
        expect(first).to_contain_text("2 attempts")
        screenshot(page, "ask-turn-unusable.png")

        first.get_by_role("button", name="Retry this turn").click()
        second = page.locator("#chat li.turn").nth(1)
        expect(second).to_have_attribute("data-status", "done")
        expect(second.locator(".question-text")).to_have_text(QUESTION)
        expect(second.locator(".answer")).to_have_text(ANSWER)
        [turn_a, turn_b] = Conversations(store).list_turns(
            Conversations(store).list_conversations().items[0].id
        )
        assert (turn_a.status, turn_b.status) == ("unusable", "done")
        log.assert_clean()


def test_a_turn_goes_on_when_the_page_is_closed(tmp_path: Path) -> None:
    hold = threading.Event()
    script = CopilotScript(hold=hold)
    with console_server(tmp_path, model=script.model) as (server, _store):
        with console_page(server) as (page, log):
            page.goto(server.url + "/#/ask")
            _ask(page, QUESTION)
            turn = page.locator("#chat li.turn").first
            expect(turn).to_have_attribute("data-status", "running")
            expect(turn.locator(".turn-progress")).to_contain_text("generate")
            assert script.entered.wait(20)
            conversation = page.evaluate("location.hash").rsplit("/", 1)[-1]
            log.assert_clean()
        hold.set()  # the page is gone; the model answers now
        with console_page(server) as (page, log):
            page.goto(f"{server.url}/#/ask/{conversation}")
            turn = page.locator("#chat li.turn").first
            expect(turn).to_have_attribute("data-status", "done")
            expect(turn.locator(".answer")).to_have_text(ANSWER)
            log.assert_clean()


def test_a_data_source_is_registered_from_the_page(tmp_path: Path) -> None:
    shutil.copyfile(CHINOOK_DB, tmp_path / "chinook.sqlite")
    (tmp_path / "notes.db").write_text("not a database\n" * 20)
    with (
        console_server(tmp_path, model=CopilotScript().model) as (server, _store),
        console_page(server) as (
            page,
            log,
        ),
    ):
        page.goto(server.url + "/#/ask")
        page.locator("#source-add-box summary").click()
        page.get_by_label("SQLite file or PostgreSQL URL").fill("notes.db")
        page.get_by_role("button", name="Register").click()
        expect(page.locator("#source-error")).to_contain_text("cannot open notes.db: file is not a database")
        page.get_by_label("SQLite file or PostgreSQL URL").fill("chinook.sqlite")
        page.get_by_role("button", name="Register").click()
        expect(page.locator("#sources li[data-source='chinook']")).to_contain_text("11 tables")
        expect(page.get_by_label("Data source", exact=True)).to_have_value("chinook")
        expect(page.locator("#source-error")).to_have_text("")
        screenshot(page, "ask-sources.png")
        log.assert_clean()
