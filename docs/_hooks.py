"""mkdocs hooks of the docs site (``hooks:`` in mkdocs.yml): the nav lists the pages it knows, and adapts to
the pages there are.

For: pages listed in ``mkdocs.yml``'s nav whose file does not exist yet are left out of it (a section left
empty goes too), and every page of ``docs/`` the nav does not list is added at its end, so that a new page
shows up without a warning of ``--strict``; and the Sphinx roles of docstrings (``:class:`Tool```) are
shown as the code they name. Not for: the pages' content.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

NavItem = str | dict[str, Any]

# ``:class:`~plangate.x.Tool``` as mkdocstrings renders it: the role's text, then the name in <code>.
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj|py:\w+):<code>(~?)([^<]*)</code>")


def present(nav: list[NavItem], exists: Any) -> list[NavItem]:
    """``nav`` without the pages ``exists(path)`` says are missing, and without sections left empty."""
    kept: list[NavItem] = []
    for item in nav:
        if isinstance(item, str):
            if exists(item):
                kept.append(item)
            continue
        ((title, value),) = item.items()
        if isinstance(value, list):
            children = present(value, exists)
            if children:
                kept.append({title: children})
        elif not isinstance(value, str) or "://" in value or exists(value):
            kept.append(item)
    return kept


def listed(nav: list[NavItem]) -> set[str]:
    """Every page path ``nav`` names."""
    found: set[str] = set()
    for item in nav:
        values = [item] if isinstance(item, str) else list(item.values())
        for value in values:
            if isinstance(value, list):
                found |= listed(value)
            elif isinstance(value, str):
                found.add(value)
    return found


def unlisted(nav: list[NavItem], docs: Path) -> list[str]:
    """The pages of ``docs`` (``*.md``, sub-folders included) that ``nav`` does not name, sorted."""
    names = listed(nav)
    pages = (page.relative_to(docs).as_posix() for page in docs.rglob("*.md"))
    return sorted(page for page in pages if page not in names)


def on_config(config: Any) -> Any:
    """Fit the configured nav to the pages of ``docs_dir``."""
    docs = Path(config["docs_dir"])
    nav = present(config["nav"] or [], lambda page: (docs / page).is_file())
    extra = unlisted(nav, docs)
    if extra:
        nav.append({"More": extra})
    config["nav"] = nav
    return config


def plain_roles(html: str) -> str:
    """``html`` with each Sphinx role shown as its name in code (``~a.b.C`` as ``C``)."""

    def name(match: re.Match[str]) -> str:
        target = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
        return f"<code>{target}</code>"

    return _ROLE.sub(name, html)


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML with the docstrings' Sphinx roles made plain."""
    return plain_roles(html)
