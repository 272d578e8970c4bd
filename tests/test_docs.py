"""The docs site: ``mkdocs build --strict`` passes with no warning, its nav fits the pages there are, and the
pages that describe the code (the HTTP API, the configuration, the example files they quote) are current.

For: keeping docs/ buildable and true. Not for: running the pages' code blocks (tests/test_readme.py runs
every block of README.md and docs/**/*.md).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from plangate.config import (
    BudgetConfig,
    Config,
    DataConfig,
    LimitsConfig,
    McpServerConfig,
    ModelPrice,
    OwnerLimits,
    RetentionConfig,
    ScheduleConfig,
    SourceConfig,
    TelemetryConfig,
    WebhooksConfig,
)

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
MKDOCS = Path(sys.executable).with_name("mkdocs")
README_LINES = 250


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(config: Path, site: Path) -> str:
    """Run ``mkdocs build --strict``; fail with its output on a non-zero exit or any warning."""
    if not MKDOCS.is_file():
        pytest.fail(f"{MKDOCS} is missing: the docs extra is not installed (run ./dev setup)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert warnings == [], output
    return output


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    _build(REPO / "mkdocs.yml", tmp_path / "site")
    site = tmp_path / "site"
    for page in ("conditions", "http-api", "configuration", "reference/api", "architecture"):
        assert (site / page / "index.html").is_file(), page
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    # the API reference is rendered from the docstrings, not written by hand
    assert 'id="plangate.agent.Agent"' in api
    assert "Make a <code>Tool</code> from a typed function" in api  # a docstring, its role made plain
    assert ":class:" not in api


def test_the_sphinx_roles_of_docstrings_are_shown_as_code() -> None:
    plain = _hooks().plain_roles
    assert plain(":class:<code>~plangate.agent.AgentResult</code>") == "<code>AgentResult</code>"
    assert plain("a :func:<code>plangate.tools.tool</code>.") == "a <code>plangate.tools.tool</code>."


@pytest.mark.slow
def test_a_page_added_later_joins_the_nav_without_a_warning(tmp_path: Path) -> None:
    """A copy of the site with docs/time-travel.md (listed in the nav), a page nobody listed, and one listed
    that does not exist."""
    copy = tmp_path / "repo"
    (copy / "docs").mkdir(parents=True)
    for page in DOCS.rglob("*"):
        if page.is_file():
            target = copy / "docs" / page.relative_to(DOCS)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(page.read_bytes())
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    listed = "      - Operations: operations.md\n"
    assert listed in config
    config = config.replace(listed, listed + "      - Webhooks: webhooks.md\n")  # a page not written yet
    (copy / "mkdocs.yml").write_text(config, encoding="utf-8")
    (copy / "src").symlink_to(REPO / "src", target_is_directory=True)
    (copy / "docs" / "time-travel.md").write_text("# Time travel\n\nA page of its own.\n", encoding="utf-8")
    (copy / "docs" / "unlisted.md").write_text("# Unlisted\n\nNobody listed it.\n", encoding="utf-8")
    _build(copy / "mkdocs.yml", tmp_path / "site")
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="time-travel/"' in home
    assert 'href="unlisted/"' in home
    assert 'href="observability/"' in home
    assert 'href="webhooks/"' not in home  # listed, but not written yet


def test_the_nav_keeps_only_pages_that_exist() -> None:
    hooks = _hooks()
    nav = [
        {"Home": "index.md"},
        {"Operations": [{"Time travel": "time-travel.md"}, {"Observability": "observability.md"}]},
        {"Later": [{"Operations": "operations.md"}]},
        {"Elsewhere": "https://example.com/"},
    ]
    exists = {"index.md", "time-travel.md"}.__contains__
    assert hooks.present(nav, exists) == [
        {"Home": "index.md"},
        {"Operations": [{"Time travel": "time-travel.md"}]},
        {"Elsewhere": "https://example.com/"},
    ]


def test_every_page_of_docs_is_in_the_configured_nav() -> None:
    """A page of ours missing from mkdocs.yml would only show up under "More": list it where it belongs."""
    hooks = _hooks()
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    named = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", text, re.MULTILINE))
    pages = {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md")}
    assert pages - named == set()
    assert hooks.unlisted([{"x": sorted(named)}], DOCS) == []


def test_the_http_api_page_is_the_apps_schema() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "http_api_docs.py"), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr + "\n(run: python scripts/http_api_docs.py)"


def test_the_http_api_page_lists_every_route() -> None:
    page = (DOCS / "http-api.md").read_text(encoding="utf-8")
    schema = _script().openapi_schema()
    assert len(schema["paths"]) >= 15
    for path, operations in schema["paths"].items():
        for method in operations:
            assert f"### {method.upper()} `{path}`" in page, (method, path)


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("http_api_docs", REPO / "scripts" / "http_api_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _environment_variables() -> set[str]:
    """Every ``PLANGATE_…`` name and provider key the package's code mentions."""
    names: set[str] = set()
    for path in (REPO / "src" / "plangate").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"\b(PLANGATE_[A-Z0-9_]*[A-Z0-9]|[A-Z]+_API_KEY|OPENAI_BASE_URL)\b", text))
    return names


def test_the_configuration_page_names_every_variable_and_key() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    variables = _environment_variables()
    assert {"PLANGATE_MODEL", "PLANGATE_STORE", "OPENAI_API_KEY"} <= variables
    missing = sorted(name for name in variables if f"`{name}`" not in page)
    assert missing == [], f"docs/configuration.md does not name {missing}"
    models = (Config, McpServerConfig, DataConfig, SourceConfig, ModelPrice, BudgetConfig, TelemetryConfig)
    for model in (*models, ScheduleConfig, LimitsConfig, OwnerLimits, RetentionConfig, WebhooksConfig):
        for field in model.model_fields:
            rows = (
                f"| `{field}` |",
                f"| `[{field}]` |",
                f"| `[[{field}]]` |",
            )  # a key, a table, a list of them
            assert any(row in page for row in rows), (
                f"docs/configuration.md: no row for {model.__name__}.{field}"
            )


def test_a_quoted_example_file_is_the_file() -> None:
    """A block starting ``# file: PATH`` is that file of the repository, as it is now."""
    quoted = 0
    for page in [README, *DOCS.rglob("*.md")]:
        for block in re.findall(r"^```\w*\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S):
            first, _, rest = block.partition("\n")
            if first.startswith("# file: "):
                quoted += 1
                path = REPO / first.removeprefix("# file: ").strip()
                assert path.read_text(encoding="utf-8") == rest, (
                    f"{page.name}: {path} changed; quote it again"
                )
    assert quoted >= 1


def test_the_readme_is_a_landing_page() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines; at most {README_LINES}"
    first_block = text.index("```bash")
    assert text[first_block:].splitlines()[1].startswith("./dev demo")  # the two commands come first
    assert "./dev test" in text[first_block:].splitlines()[3]
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (REPO / target).is_file(), f"README.md links to {target}, which does not exist"


def test_getting_started_shows_the_readmes_two_commands() -> None:
    """Its copy is only parsed (the README's runs): it must stay the same block."""

    def first_bash(path: Path) -> str:
        found = re.search(r"^```bash\n(.*?)^```", path.read_text(encoding="utf-8"), re.M | re.S)
        assert found is not None, path
        return found.group(1)

    assert first_bash(DOCS / "getting-started.md") == first_bash(README)
