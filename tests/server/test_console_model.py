"""The console says which model the server's runs use, and why it cannot run when it is missing (a real
headless Chromium on the real server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import console_page, console_server
from playwright.sync_api import expect

from plangate.models import ScriptedModel

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_the_console_names_a_model_that_cannot_run_here_and_what_it_needs(tmp_path: Path) -> None:
    with (
        console_server(tmp_path, model="openai:gpt-4o-mini") as (server, _),
        console_page(server) as (page, log),
    ):
        page.goto(server.url + "/")
        shown = page.locator("#model-state")
        expect(shown).to_have_text(
            "model: openai:gpt-4o-mini, not available here: openai:gpt-4o-mini needs an API key: set "
            "OPENAI_API_KEY or pass api_key="
        )
        expect(shown).to_have_class("muted model-missing")
        # formulas that need no model are offered all the same
        expect(page.get_by_role("combobox", name="Formula")).to_contain_text("release")
        log.assert_clean()


def test_the_console_names_the_model_it_runs_with(tmp_path: Path) -> None:
    model = ScriptedModel(["hello"], name="scripted:console")
    with console_server(tmp_path, model=model) as (server, _), console_page(server) as (page, log):
        page.goto(server.url + "/")
        shown = page.locator("#model-state")
        expect(shown).to_have_text("model: scripted:console")
        expect(shown).to_have_class("muted")
        log.assert_clean()
