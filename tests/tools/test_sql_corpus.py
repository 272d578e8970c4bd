"""The SQL corpora: every hostile query is refused and changes nothing; every analytical query runs.

Both walls are tested on their own: the guard (``check_read_only``, and ``db_query`` end to end) and the
read-only SQLite connection with the guard bypassed, so a gap in one is caught even if the other holds.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path

import pytest

from plangate.tools import ToolRegistry
from plangate.tools.data import DataSourceError, DataSources, QueryLimits, data_tools, register_shop
from plangate.tools.data.sqlite import SqliteSource
from plangate.tools.sql_guard import check_read_only

FIXTURES = Path(__file__).parent / "fixtures"
_HEADER = re.compile(r"^-- case(?P<escaped>\(escaped\))?: (?P<title>.+)$")
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\t|\\n")


def _unescape(match: re.Match[str]) -> str:
    if match.group(1):
        return chr(int(match.group(1), 16))
    return "\t" if match.group(0) == "\\t" else "\n"


def load_cases(name: str) -> list[tuple[str, str]]:
    """(title, sql) for each case of a corpus file (format described at the top of each file)."""
    cases: list[tuple[str, bool, list[str]]] = []
    for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
        header = _HEADER.match(line)
        if header:
            cases.append((header.group("title"), bool(header.group("escaped")), []))
        elif cases:
            cases[-1][2].append(line)
    loaded = []
    for title, escaped, lines in cases:
        sql = "\n".join(lines).strip("\n")
        loaded.append((title, _ESCAPE.sub(_unescape, sql) if escaped else sql))
    return loaded


HOSTILE = load_cases("hostile.sql")
ANALYTICAL = load_cases("analytical.sql")
STRAY_FILES = [
    Path("/tmp/plangate-hostile-attach.db"),
    Path("/tmp/plangate-hostile-copy.db"),
    Path("/tmp/plangate-hostile-out.txt"),
    Path("/tmp/plangate-hostile-copy.csv"),
]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_corpora_are_large_enough_and_distinct() -> None:
    assert len(HOSTILE) >= 60
    assert len(ANALYTICAL) >= 30
    assert len({sql for _, sql in HOSTILE}) == len(HOSTILE)
    assert len({title for title, _ in HOSTILE}) == len(HOSTILE)
    assert len({sql for _, sql in ANALYTICAL}) == len(ANALYTICAL)
    assert all(sql.strip() for _, sql in ANALYTICAL)


@pytest.fixture(scope="module")
def shop_copy_module(tmp_path_factory: pytest.TempPathFactory, shop_db: Path) -> Path:
    target = tmp_path_factory.mktemp("shop") / "shop.db"
    target.write_bytes(shop_db.read_bytes())
    return target


@pytest.mark.parametrize(("title", "sql"), HOSTILE, ids=[title for title, _ in HOSTILE])
def test_hostile_queries_are_refused_with_a_reason(title: str, sql: str) -> None:
    verdict = check_read_only(sql)
    assert not verdict.allowed, f"{title}: allowed"
    assert verdict.reason.strip()


@pytest.mark.parametrize(("title", "sql"), HOSTILE, ids=[title for title, _ in HOSTILE])
def test_hostile_queries_through_db_query_change_nothing(
    shop_copy_module: Path, title: str, sql: str
) -> None:
    sources = DataSources()
    sources.register("shop", shop_copy_module)
    registry = ToolRegistry(data_tools(sources))
    before = file_digest(shop_copy_module)
    result = asyncio.run(registry.call("db_query", {"source": "shop", "sql": sql}))
    assert (result.status, result.error_code) == ("blocked", "sql_refused"), title
    assert result.observation.startswith("query refused by the read-only guard: ")
    assert file_digest(shop_copy_module) == before
    assert [path for path in STRAY_FILES if path.exists()] == []


@pytest.mark.parametrize(("title", "sql"), HOSTILE, ids=[title for title, _ in HOSTILE])
def test_hostile_queries_with_the_guard_bypassed_still_change_nothing(
    shop_copy_module: Path, title: str, sql: str
) -> None:
    source = SqliteSource("shop", shop_copy_module)
    before = file_digest(shop_copy_module)
    try:
        source.run_unguarded(sql, QueryLimits(timeout_s=5))
    except DataSourceError:
        pass
    assert file_digest(shop_copy_module) == before, title
    assert sorted(path.name for path in shop_copy_module.parent.iterdir()) == ["shop.db"]
    assert [path for path in STRAY_FILES if path.exists()] == []


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("DELETE FROM orders", "not authorized"),
        ("UPDATE products SET unit_price = 0", "not authorized"),
        ("INSERT INTO regions VALUES (9, 'x', 'y')", "not authorized"),
        ("DROP TABLE orders", "not authorized"),
        ("CREATE TEMP TABLE scratch (x)", "not authorized"),
        ("ATTACH DATABASE '/tmp/plangate-hostile-attach.db' AS evil", "not authorized"),
        ("VACUUM INTO '/tmp/plangate-hostile-copy.db'", "authoriz"),
        ("PRAGMA writable_schema = 1", "not authorized"),
        ("PRAGMA query_only = 0", "not authorized"),
        ("WITH x AS (SELECT 1) DELETE FROM orders", "not authorized"),
        ("BEGIN IMMEDIATE", "not authorized"),
        ("SELECT load_extension('/tmp/evil.so')", "not authorized"),
        ("SELECT zeroblob(10)", "not authorized"),
        ("SELECT * FROM pragma_table_info('orders')", "not authorized"),
        ("SELECT 1; DELETE FROM orders", "one statement at a time"),
        # Naming a JSON table function lets its schema bookkeeping through, and nothing else.
        ("DELETE FROM orders WHERE order_id IN (SELECT value FROM json_each('[1]'))", "not authorized"),
        ("UPDATE sqlite_master SET sql = '' WHERE name IN (SELECT key FROM json_tree('[1]'))", "may not"),
        ("INSERT INTO regions SELECT value, 'x', 'y' FROM json_each('[9]')", "not authorized"),
    ],
)
def test_the_read_only_connection_refuses_writes_on_its_own(shop_copy: Path, sql: str, message: str) -> None:
    source = SqliteSource("shop", shop_copy)
    before = file_digest(shop_copy)
    with pytest.raises(DataSourceError, match=message):
        source.run_unguarded(sql, QueryLimits())
    assert file_digest(shop_copy) == before


@pytest.fixture(scope="module")
def shop_registry() -> ToolRegistry:
    sources = DataSources()
    register_shop(sources)
    return ToolRegistry(data_tools(sources))


@pytest.mark.parametrize(("title", "sql"), ANALYTICAL, ids=[title for title, _ in ANALYTICAL])
def test_analytical_queries_are_allowed_and_run(shop_registry: ToolRegistry, title: str, sql: str) -> None:
    verdict = check_read_only(sql)
    assert verdict.allowed, f"{title}: {verdict.reason}"
    result = asyncio.run(shop_registry.call("db_query", {"source": "shop", "sql": sql}))
    assert result.status == "done", f"{title}: {result.observation}"
    assert isinstance(result.data, dict)
    rows = result.data["rows"]
    assert isinstance(rows, list) and rows, title
