"""The built-in ``data`` toolkit: named data sources, read-only SQL, structured queries, semantic layers
(named metrics and dimensions) and the ``db_schema`` / ``db_query`` / ``db_aggregate`` tools.

Example::

    sources = DataSources()
    register_shop(sources)
    registry = ToolRegistry(data_tools(sources))
"""

from __future__ import annotations

from plangate.tools.data._format import shown_cell, shown_table
from plangate.tools.data.aggregate import (
    AggregateError,
    AggregateQuery,
    CompiledQuery,
    compile_aggregate,
    parse_aggregate,
)
from plangate.tools.data.aggregate_schema import aggregate_parameters, source_parameters
from plangate.tools.data.periods import DateRange, Period, date_ranges, period_between
from plangate.tools.data.results import (
    ColumnInfo,
    DataSourceError,
    ForeignKey,
    QueryLimits,
    QueryRefused,
    QueryResult,
    QueryTimeout,
    SchemaInfo,
    SourceForbidden,
    TableInfo,
)
from plangate.tools.data.semantic import SemanticError, SemanticLayer, load_semantic
from plangate.tools.data.sources import DataSource, DataSources, register_shop, shop_db_path
from plangate.tools.data.toolkit import aggregate_tool, data_tools

__all__ = [
    "AggregateError",
    "AggregateQuery",
    "ColumnInfo",
    "CompiledQuery",
    "DataSource",
    "DataSourceError",
    "DataSources",
    "DateRange",
    "ForeignKey",
    "Period",
    "QueryLimits",
    "QueryRefused",
    "QueryResult",
    "QueryTimeout",
    "SchemaInfo",
    "SemanticError",
    "SemanticLayer",
    "SourceForbidden",
    "TableInfo",
    "aggregate_parameters",
    "aggregate_tool",
    "compile_aggregate",
    "data_tools",
    "date_ranges",
    "load_semantic",
    "parse_aggregate",
    "period_between",
    "register_shop",
    "shop_db_path",
    "shown_cell",
    "shown_table",
    "source_parameters",
]
