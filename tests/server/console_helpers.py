"""What the web console's browser tests share: a real uvicorn server in a thread, and headless Chromium.

For: starting the HTTP API on a free loopback port with a temporary SQLite store, the example tools and the
example formulas; launching Debian's Chromium through Playwright (never a downloaded browser); recording
what the page did that it should not (script errors, requests that leave the server). Not for: assertions
about the console itself (the ``test_console_*`` modules).

A missing Chromium or Playwright fails the test with the command that installs it: these tests run in CI,
and a browser test that quietly skips proves nothing.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

REPO = Path(__file__).resolve().parents[2]
FORMULAS = REPO / "examples" / "formulas"
EXAMPLE_TOOLS = f"{FORMULAS / 'tools.py'}:registry"
DEMO_TOOLS = f"{FORMULAS / 'demo_tools.py'}:registry"
"""The tools of every example formula, ``plan-week``'s data and week planner included."""
ARTIFACTS = REPO / "artifacts" / "console"

CHROMIUM = os.environ.get("PLANGATE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 20_000
"""How long a test waits for the page to show something (a run's next state arrives in well under this)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LiveServer:
    """An ASGI app served by uvicorn on ``127.0.0.1`` in a background thread, for as long as the ``with``."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", ws="none", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="console-test-server", daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive():
                pytest.fail("the test server stopped during start-up (see the captured log)")
            if time.monotonic() > deadline:
                pytest.fail("the test server did not start within 30 s")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout=5)


@contextmanager
def console_server(
    tmp_path: Path,
    *,
    auth: bool = False,
    model: Any = None,
    pepper: bytes | None = None,
    tools_spec: str = EXAMPLE_TOOLS,
    formulas: tuple[Path, ...] = (),
    prices: Any = None,
) -> Iterator[tuple[LiveServer, Any]]:
    """The real server on a fresh SQLite store in ``tmp_path``, the example tools (``tools_spec``) and
    formulas (and ``prices``, ``[prices]``, for the costs of runs and turns).

    Yields the running server and its store. The caller should ``chdir`` into ``tmp_path`` first: the
    example tools write under ``.plangate/demo`` relative to the working directory.
    """
    from plangate.cli._loading import tools_from
    from plangate.server import create_app
    from plangate.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'console.db'}")
    tools = tools_from([tools_spec])
    app = create_app(
        store,
        tools,
        auth=auth,
        search_paths=[*formulas, FORMULAS],
        tool_specs=[tools_spec],
        model=model,
        root=tmp_path,
        pepper=pepper,
        heartbeat=1.0,
        prices=prices,
    )
    try:
        with LiveServer(app) as server:
            yield server, store
    finally:
        store.close()


@dataclass
class PageLog:
    """What the page did that a test checks for: script errors, requests that left the server, and anything
    the server's Content-Security-Policy blocked."""

    errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert self.errors == [], f"the page raised script errors: {self.errors}"
        assert self.outside == [], f"the page tried to reach other hosts: {self.outside}"
        assert self.violations == [], f"the page broke its Content-Security-Policy: {self.violations}"

    def heard(self, message: Any) -> None:
        text = str(message.text)
        if text.startswith(_VIOLATION) or "Content Security Policy" in text:
            self.violations.append(text)


_VIOLATION = "plangate-csp-violation:"
# Runs before the page's own scripts (Playwright injects it outside the page's policy): every violation the
# browser reports becomes a console message the log collects.
_REPORT_VIOLATIONS = (
    "document.addEventListener('securitypolicyviolation', (e) => console.error("
    f"'{_VIOLATION} ' + e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber));"
)


def _require_browser() -> None:
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"the console tests need Chromium at {CHROMIUM}: apt-get install -y chromium chromium-driver "
            "(or set PLANGATE_CHROMIUM to its path)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail(
            "the console tests need Playwright for Python: pip install playwright (no browser download)"
        )


@contextmanager
def console_page(
    server: LiveServer, *, width: int = 1400, height: int = 1000
) -> Iterator[tuple[Page, PageLog]]:
    """A fresh headless Chromium page; any request to a host other than the server is blocked and logged."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    log = PageLog()

    def gate(route: Route) -> None:
        url = route.request.url
        if url.startswith(server.url + "/") or url.startswith("data:"):
            route.continue_()
        else:
            log.outside.append(url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            context.set_default_timeout(WAIT_MS)
            context.route("**/*", gate)
            context.add_init_script(_REPORT_VIOLATIONS)
            page = context.new_page()
            page.on("pageerror", lambda error: log.errors.append(str(error)))
            page.on("console", log.heard)
            yield page, log
            context.close()
        finally:
            browser.close()


DOCS_SHOTS = REPO / "docs" / "images" / "console"
"""Where the docs' "Server and console" page finds its screenshots (taken by these tests)."""
DOCS_SHOTS_ENV = "PLANGATE_DOCS_SCREENSHOTS"
"""Set to 1 to write the screenshots the docs use into ``docs/images/console/`` too."""
DOCS_SHOT_NAMES = frozenset({"release-waiting.png", "release-completed.png", "agent-question.png"})


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot under ``artifacts/console/`` (kept by CI as a test artefact); with
    ``PLANGATE_DOCS_SCREENSHOTS=1``, the ones the docs show are written into ``docs/images/console/`` too."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get(DOCS_SHOTS_ENV) == "1" and name in DOCS_SHOT_NAMES:
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        (DOCS_SHOTS / name).write_bytes(path.read_bytes())
    return path
