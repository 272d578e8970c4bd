"""The console's security headers in a real headless Chromium: a strict Content-Security-Policy on the page,
its scripts and styles and every API answer, ``nosniff`` and no framing; the views work under it with no
violation reported, and a script a bug might inject inline is blocked (and reported, so the check can fail).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import console_page, console_server
from playwright.sync_api import Response, expect

from plangate.server._headers import CONTENT_SECURITY_POLICY

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_every_response_carries_the_policy_and_every_view_works_under_it(tmp_path: Path) -> None:
    responses: list[Response] = []
    with console_server(tmp_path) as (server, _), console_page(server) as (page, log):
        page.on("response", lambda response: responses.append(response))
        first = page.goto(server.url + "/")
        assert first is not None
        headers = first.headers
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert "'unsafe-inline'" not in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"
        expect(page.get_by_role("combobox", name="Formula")).to_be_visible()

        # A formula run's page (its DAG, the approval card), then the copilot's view with the chart library.
        page.get_by_role("combobox", name="Formula").select_option("release")
        page.get_by_label("version").fill("2.0.0")
        page.get_by_role("button", name="Start formula run").click()
        expect(page.locator("#interaction section.interaction")).to_be_visible()
        page.goto(server.url + "/#/ask")
        expect(page.locator("#nav-ask")).to_be_visible()
        page.goto(server.url + "/#/")
        expect(page.locator("#nav-runs")).to_be_visible()
        log.assert_clean()

        own = [r for r in responses if r.url.startswith(server.url)]
        assert any(r.url.endswith(".js") for r in own) and any("/v1/" in r.url for r in own)
        for response in own:
            assert response.headers.get("x-content-type-options") == "nosniff", response.url
            assert response.headers.get("content-security-policy") == CONTENT_SECURITY_POLICY, response.url

        # What the policy is for: an inline script is not run, and the violation is heard.
        page.evaluate(
            "() => { const s = document.createElement('script'); s.textContent = 'window.injected = 1';"
            " document.body.append(s); }"
        )
        page.wait_for_timeout(200)
        assert page.evaluate("window.injected") is None
        assert any("script-src" in violation for violation in log.violations), log.violations


def test_the_api_docs_keep_their_page_without_the_consoles_policy(tmp_path: Path) -> None:
    with console_server(tmp_path) as (server, _), console_page(server) as (page, _log):
        docs = page.request.get(server.url + "/docs")
        assert docs.status == 200
        assert "content-security-policy" not in docs.headers
        assert docs.headers["x-content-type-options"] == "nosniff"
