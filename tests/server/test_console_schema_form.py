"""The console's argument editor (a form built from a tool's JSON schema), run in a real headless Chromium.

The module is loaded from the real server into a blank page and given a schema with every field kind it
handles: string, integer, number, boolean, enum, a nullable string, and an array (raw JSON fallback).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from console_helpers import PageLog, console_page, console_server
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "what it is called"},
        "count": {"type": "integer"},
        "ratio": {"type": "number", "default": 1.5},
        "urgent": {"type": "boolean"},
        "level": {"enum": ["low", "high"]},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "count"],
}
STORED = {"title": "weekly", "count": 2, "tags": ["a"], "legacy": True}


@pytest.fixture
def form_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Page, PageLog]]:
    monkeypatch.chdir(tmp_path)
    with console_server(tmp_path) as (server, _store), console_page(server) as (page, log):
        page.goto(server.url + "/app.css")  # any page of the server: the module is imported from there
        page.evaluate(
            """async ([schema, stored]) => {
                const { argumentsForm } = await import("/schemaform.js");
                document.body.replaceChildren();
                window.form = argumentsForm(schema, stored);
                document.body.append(window.form.element);
            }""",
            [SCHEMA, STORED],
        )
        yield page, log


def _read(page: Page) -> object:
    return page.evaluate(
        "() => { try { return window.form.read(); } catch (e) { return 'error: ' + e.message; } }"
    )


def test_each_field_kind_gets_an_input_prefilled_from_the_stored_call(
    form_page: tuple[Page, PageLog],
) -> None:
    page, log = form_page
    expect(page.get_by_label("title")).to_have_value("weekly")
    expect(page.get_by_label("title")).to_have_attribute("required", "")
    expect(page.get_by_role("spinbutton", name="count")).to_have_value("2")
    expect(page.get_by_role("spinbutton", name="ratio")).to_have_attribute("placeholder", "default: 1.5")
    expect(page.get_by_role("checkbox", name="urgent")).not_to_be_checked()
    expect(page.get_by_role("combobox", name="level")).to_have_value("")  # optional enum: not set
    expect(page.get_by_role("textbox", name="note")).to_have_value("")
    expect(page.get_by_label("tags")).to_have_value('[\n  "a"\n]')
    # unchanged, the form gives back the stored call (fields the schema does not name included)
    assert _read(page) == STORED
    log.assert_clean()


def test_edited_fields_are_read_back_with_their_json_types(form_page: tuple[Page, PageLog]) -> None:
    page, log = form_page
    page.get_by_role("spinbutton", name="count").fill("3")
    page.get_by_role("spinbutton", name="ratio").fill("0.25")
    page.get_by_role("checkbox", name="urgent").check()
    page.get_by_role("combobox", name="level").select_option("high")
    page.get_by_role("textbox", name="note").fill("bring snacks")
    page.get_by_label("tags").fill('["a", "b"]')

    assert _read(page) == {
        "title": "weekly",
        "count": 3,
        "ratio": 0.25,
        "urgent": True,
        "level": "high",
        "note": "bring snacks",
        "tags": ["a", "b"],
        "legacy": True,
    }
    log.assert_clean()


def test_bad_values_are_refused_with_the_field_named(form_page: tuple[Page, PageLog]) -> None:
    page, log = form_page
    page.get_by_role("spinbutton", name="count").fill("2.5")
    assert _read(page) == "error: count: expected a whole number, got 2.5."
    page.get_by_role("spinbutton", name="count").fill("")
    assert _read(page) == "error: count: a whole number is required."
    page.get_by_role("spinbutton", name="count").fill("4")
    page.get_by_label("tags").fill("[oops")
    message = _read(page)
    assert isinstance(message, str) and message.startswith("error: tags: not valid JSON")
    log.assert_clean()


def test_the_whole_call_can_be_edited_as_raw_json_and_back(form_page: tuple[Page, PageLog]) -> None:
    page, log = form_page
    page.get_by_role("spinbutton", name="count").fill("7")
    page.get_by_label("Edit as JSON").check()
    raw = page.get_by_label("Arguments (JSON)")
    expect(raw).to_be_visible()
    expect(page.get_by_label("title")).to_be_hidden()
    assert '"count": 7' in raw.input_value()

    raw.fill('{"title": "monthly", "count": 1, "level": "low"}')
    assert _read(page) == {"title": "monthly", "count": 1, "level": "low"}

    page.get_by_label("Edit as JSON").uncheck()  # back to the fields, filled from the JSON
    expect(page.get_by_label("title")).to_have_value("monthly")
    expect(page.get_by_role("combobox", name="level")).to_have_value("0")
    assert _read(page) == {"title": "monthly", "count": 1, "level": "low"}

    page.get_by_label("Edit as JSON").check()
    raw.fill("[1, 2]")
    assert _read(page) == 'error: The arguments must be a JSON object, like {"name": "value"}.'
    log.assert_clean()
