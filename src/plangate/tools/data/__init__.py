"""The built-in ``data`` toolkit: named data sources, read-only SQL and the ``db_schema``/``db_query`` tools.

Example::

    sources = DataSources()
    register_shop(sources)
    registry = ToolRegistry(data_tools(sources))
"""

from __future__ import annotations

from plangate.tools.data.results import (
    ColumnInfo,
    DataSourceError,
    ForeignKey,
    QueryLimits,
    QueryRefused,
    QueryResult,
    QueryTimeout,
    SchemaInfo,
    TableInfo,
)
from plangate.tools.data.sources import DataSource, DataSources, register_shop, shop_db_path
from plangate.tools.data.toolkit import data_tools

__all__ = [
    "ColumnInfo",
    "DataSource",
    "DataSourceError",
    "DataSources",
    "ForeignKey",
    "QueryLimits",
    "QueryRefused",
    "QueryResult",
    "QueryTimeout",
    "SchemaInfo",
    "TableInfo",
    "data_tools",
    "register_shop",
    "shop_db_path",
]
