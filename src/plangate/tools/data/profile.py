"""The values of a source's category columns: the distinct texts a short text column holds.

For: telling which of a question's words are values the data holds (``cancelled`` in ``orders.status``), so
that a filter can be written only with a real column and a real value. Columns with more than a few dozen
distinct values (names, emails, addresses) are left out. Not for: any query a user asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from plangate.tools.data.results import DataSourceError, QueryLimits, TableInfo
from plangate.tools.data.sources import DataSource

MAX_VALUES = 40
"""Distinct values a column may have to count as a category column."""
MAX_ROWS = 2_000_000
"""Tables with more rows are not profiled (their scans cost more than a turn should spend)."""
_TEXT_WORDS = ("char", "text", "clob", "string")


@dataclass(frozen=True, slots=True)
class CategoryColumn:
    """A text column with few distinct values, and those values."""

    table: str
    column: str
    values: tuple[str, ...]

    @property
    def name(self) -> str:
        """``table.column``."""
        return f"{self.table}.{self.column}"


def _quote(name: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))


def category_columns(
    source: DataSource, tables: list[TableInfo], limits: QueryLimits
) -> list[CategoryColumn]:
    """Every text column of ``tables`` with at most ``MAX_VALUES`` distinct values (keys left out); a column
    the database cannot scan within the limits is skipped."""
    found: list[CategoryColumn] = []
    for table in tables:
        if table.row_count is not None and table.row_count > MAX_ROWS:
            continue
        keys = {key.column for key in table.foreign_keys}
        for column in table.columns:
            kind = column.type.lower()
            if column.primary_key or column.name in keys or not any(word in kind for word in _TEXT_WORDS):
                continue
            sql = (
                f"SELECT DISTINCT {_quote(column.name)} FROM {_quote(table.name)} "
                f"WHERE {_quote(column.name)} IS NOT NULL LIMIT {MAX_VALUES + 1}"
            )
            try:
                result = source.query(sql, limits)
            except DataSourceError:
                continue
            values = [row[0] for row in result.rows if isinstance(row[0], str) and row[0].strip()]
            if 0 < len(values) <= MAX_VALUES and len(result.rows) <= MAX_VALUES:
                found.append(CategoryColumn(table.name, column.name, tuple(values)))
    return found


__all__ = ["MAX_VALUES", "CategoryColumn", "category_columns"]
