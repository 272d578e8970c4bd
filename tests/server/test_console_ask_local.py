"""The demo question on the offline local default model (SmolLM2-135M under llama.cpp), through the HTTP API
on a real server and in the console's Ask view in a real headless Chromium: each turn ends with a status
and a reason (an answer, or an honest ``unusable``), and the page shows it. Screenshots go to
``artifacts/console/``.

Marked ``slow`` and ``local_model``: a local turn takes a minute or two on two cores. The model is small;
what is asserted is what the runtime guarantees, not that its answer is right.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from ask_helpers import QUESTION
from console_helpers import console_page, console_server, screenshot
from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.local_model, pytest.mark.timeout(900)]

TURN_MS = 600_000
"""How long the page may take to show a local turn's end."""
STATUSES = {"done", "partial", "unusable", "failed"}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_the_demo_question_on_the_local_model_through_the_api_and_the_console(tmp_path: Path) -> None:
    with console_server(tmp_path, model="local") as (server, store):
        # The API: started at once, ended on the server with a status and a reason.
        with httpx.Client(base_url=server.url, timeout=30) as client:
            started = client.post("/v1/ask", json={"question": QUESTION})
            assert started.status_code == 202, started.text
            deadline = time.monotonic() + TURN_MS / 1000
            while (turn := client.get(started.json()["turn"]).json()["turn"])["running"]:
                assert time.monotonic() < deadline, "the local turn did not end in time"
                time.sleep(1)
        assert turn["status"] in STATUSES and turn["reason"]
        if turn["status"] in ("done", "partial"):
            assert turn["answer"]
        assert store.get_run(turn["run_id"]).status in ("completed", "failed")

        # The console: the same question asked in the chat.
        with console_page(server) as (page, log):
            page.goto(server.url + "/#/ask")
            page.get_by_label("Question").fill(QUESTION)
            page.get_by_role("button", name="Ask", exact=True).click()
            card = page.locator("#chat li.turn").first
            expect(card).to_have_attribute("data-status", "running")
            expect(card.locator("li.step").first).to_be_visible(
                timeout=TURN_MS
            )  # the workflow as it is built
            expect(card).not_to_have_attribute("data-status", "running", timeout=TURN_MS)
            status = card.get_attribute("data-status")
            assert status in STATUSES
            if status in ("done", "partial"):
                expect(card.locator(".answer")).not_to_be_empty()
            else:
                expect(card.locator(".turn-reason")).not_to_be_empty()
            screenshot(page, "ask-local-model.png")
            log.assert_clean()
