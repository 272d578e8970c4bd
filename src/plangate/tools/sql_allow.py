"""What a read-only query may call and read, per dialect: an allow-list, never a deny list.

For: the functions a question about data needs — aggregates, math, string, date/time, conditional, JSON
reading and window functions — as sqlglot's typed function classes (one class covers every spelling a
dialect parses into it: ``substr`` and ``substring``, ``now()`` and ``current_timestamp``) plus, per dialect,
the names sqlglot leaves untyped (``julianday``, ``date_part``); the function names SQLite's own authorizer
may let through (the second wall); and the relations no query may read (system catalogs and statistics).
Not for: walking a query (``sql_guard.py``) or opening connections (``tools/data``).

Anything not listed is refused, so a function PostgreSQL adds in its next release, or one of the thousands
it has today (``pg_create_physical_replication_slot``, ``pg_stat_reset``, ``table_to_xml``,
``current_setting``), cannot run through a data source. What is left out on purpose: functions that read
the server rather than the data (``version()``, ``current_user``, ``current_setting``), change anything
(sequences, advisory locks, replication, notifications, configuration), read files or large objects, run
SQL given as a string (``query_to_xml``, ``dblink``), dump whole relations (``*_to_xml``), or build huge
values from a small query (``repeat``, ``space``, ``lpad``, ``zeroblob``, ``randomblob``, ``hex``).
"""

from __future__ import annotations

from typing import Final, Literal

from sqlglot import exp

Dialect = Literal["sqlite", "postgres"]

_AGGREGATES = (
    "AnyValue", "ApproxDistinct", "ArgMax", "ArgMin", "ArrayAgg", "Avg", "BitwiseAndAgg", "BitwiseOrAgg",
    "BitwiseXorAgg", "Corr", "Count", "CountIf", "CovarPop", "CovarSamp", "First", "GroupConcat",
    "JSONArrayAgg", "JSONBObjectAgg", "JSONObjectAgg", "Kurtosis", "Last", "LogicalAnd", "LogicalOr", "Max",
    "Median", "Min", "Mode", "PercentileCont", "PercentileDisc", "Quantile", "RegrAvgx", "RegrAvgy",
    "RegrCount", "RegrIntercept", "RegrR2", "RegrSlope", "RegrSxx", "RegrSxy", "RegrSyy", "Skewness",
    "Stddev", "StddevPop", "StddevSamp", "Sum", "Variance", "VariancePop", "Grouping",
)
_WINDOW = (
    "CumeDist", "DenseRank", "FirstValue", "Lag", "LastValue", "Lead", "NthValue", "Ntile", "PercentRank",
    "Rank", "RowNumber",
)
_MATH = (
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atan2", "Atanh", "Cbrt", "Ceil", "Cos", "Cosh", "Cot",
    "Degrees", "Exp", "Floor", "Greatest", "IsInf", "IsNan", "Least", "Ln", "Log", "Pi", "Pow", "Radians",
    "Rand", "Round", "SafeDivide", "Sign", "Sin", "Sinh", "Sqrt", "Tan", "Tanh", "Trunc", "WidthBucket",
)
_STRING = (
    "Ascii", "BitLength", "ByteLength", "Chr", "Concat", "ConcatWs", "Contains", "EndsWith", "Format",
    "Initcap", "Left", "Length", "Levenshtein", "Lower", "MD5", "Overlay", "RegexpCount", "RegexpExtract",
    "RegexpILike", "RegexpLike", "RegexpReplace", "RegexpSubstr", "Replace", "Reverse", "Right",
    "SplitPart", "StartsWith", "StrPosition", "Substring", "Translate", "Trim", "Unicode", "Upper",
)
_DATES = (
    "AddMonths", "CurrentDate", "CurrentTime", "CurrentTimestamp", "Date", "DateAdd", "DateBin", "DateDiff",
    "DateFromParts", "DateStrToDate", "DateSub", "DateToDateStr", "DateTrunc", "Datetime", "DatetimeAdd",
    "DatetimeDiff", "DatetimeSub", "DatetimeTrunc", "Day", "DayOfMonth", "DayOfWeek", "DayOfWeekIso",
    "DayOfYear", "Dayname", "Extract", "Hour", "JustifyDays", "JustifyHours", "JustifyInterval", "LastDay",
    "Localtime", "Localtimestamp", "MakeInterval", "Minute", "Month", "Monthname", "MonthsBetween",
    "Quarter", "Second", "StrToDate", "StrToTime", "StrToUnix", "Time", "TimeAdd", "TimeDiff",
    "TimeFromParts", "TimeStrToDate", "TimeStrToTime", "TimeStrToUnix", "TimeSub", "TimeToStr",
    "TimeToTimeStr", "TimeToUnix", "TimeTrunc", "Timestamp", "TimestampAdd", "TimestampDiff",
    "TimestampFromParts", "TimestampSub", "TimestampTrunc", "ToChar", "ToNumber", "TsOrDsAdd", "TsOrDsDiff",
    "TsOrDsToDate", "TsOrDsToDateStr", "TsOrDsToDatetime", "TsOrDsToTime", "TsOrDsToTimestamp",
    "UnixToStr", "UnixToTime", "UnixToTimeStr", "Week", "WeekOfYear", "Year", "GenerateSeries",
    "ExplodingGenerateSeries", "GenerateDateArray",
)
_CONDITIONAL = (
    "And", "Case", "Cast", "Coalesce", "EqualNull", "Exists", "If", "Nullif", "Nvl2", "Or", "TryCast",
    "Typeof", "Xor", "Collate",
)
_JSON_AND_ARRAYS = (
    "Array", "ArrayContains", "ArrayContainedBy", "ArrayOverlaps", "ArraySize", "ArrayToString", "Explode",
    "JSONArray", "JSONArrayContains", "JSONBContains", "JSONBExists", "JSONBExtract", "JSONBExtractScalar",
    "JSONExtract", "JSONExtractArray", "JSONExtractScalar", "JSONFormat", "JSONKeys", "JSONObject",
    "JSONType", "ParseJSON", "StringToArray", "Unnest",
)

CATEGORIES: Final[dict[str, tuple[str, ...]]] = {
    "aggregate": _AGGREGATES,
    "window": _WINDOW,
    "math": _MATH,
    "string": _STRING,
    "date/time": _DATES,
    "conditional": _CONDITIONAL,
    "JSON": _JSON_AND_ARRAYS,
}
"""The typed function classes a query may use, by what they are for (class names, looked up in sqlglot so
that a release that drops one does not break the import)."""

ALLOWED_CLASSES: Final[frozenset[type[exp.Func]]] = frozenset(
    node
    for names in CATEGORIES.values()
    for name in names
    if isinstance(node := getattr(exp, name, None), type) and issubclass(node, exp.Func)
)

_COMMON_NAMES = frozenset({
    "abs", "avg", "ceil", "ceiling", "coalesce", "count", "floor", "greatest", "least", "length", "lower",
    "max", "min", "mod", "nullif", "power", "replace", "round", "sign", "sqrt", "sum", "trim", "ltrim",
    "rtrim", "upper", "substr", "substring", "exp", "ln", "log", "log10", "log2", "pi", "trunc", "random",
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value",
    "last_value", "nth_value", "concat", "concat_ws", "instr", "char_length", "octet_length",
})

ANONYMOUS_NAMES: Final[dict[Dialect, frozenset[str]]] = {
    "sqlite": _COMMON_NAMES
    | frozenset({
        "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff", "printf", "format",
        "ifnull", "iif", "total", "group_concat", "string_agg", "char", "unicode", "typeof", "likely",
        "unlikely", "likelihood", "json", "jsonb", "json_extract", "jsonb_extract", "json_array_length",
        "json_type", "json_valid", "json_each", "json_tree", "json_object", "jsonb_object", "json_array",
        "jsonb_array", "json_group_array", "json_group_object", "json_quote", "median", "percentile",
        "percentile_cont", "percentile_disc", "acos", "asin", "atan", "atan2", "cos", "sin", "tan", "degrees",
        "radians", "soundex",
    }),
    "postgres": _COMMON_NAMES
    | frozenset({
        "date_part", "age", "to_date", "to_timestamp", "to_number", "to_char", "make_date", "make_time",
        "make_timestamp", "make_timestamptz", "make_interval", "date_bin", "date_trunc", "isfinite",
        "justify_days", "justify_hours", "justify_interval", "clock_timestamp", "statement_timestamp",
        "transaction_timestamp", "timeofday", "btrim", "initcap", "split_part", "strpos", "position", "left",
        "right", "reverse", "translate", "regexp_match", "regexp_matches", "regexp_replace", "regexp_like",
        "regexp_count", "regexp_substr", "regexp_split_to_array", "regexp_split_to_table", "string_to_array",
        "string_to_table", "array_to_string", "array_length", "array_position", "array_positions",
        "array_lower", "array_upper", "cardinality", "unnest", "div", "cbrt", "degrees", "radians",
        "width_bucket",
        "scale", "num_nulls", "num_nonnulls", "bool_and", "bool_or", "every", "string_agg", "array_agg",
        "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg", "mode", "percentile_cont",
        "percentile_disc", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp", "corr",
        "covar_pop", "covar_samp", "regr_slope", "regr_intercept", "regr_r2", "regr_count",
        "json_build_object", "jsonb_build_object", "json_build_array", "jsonb_build_array", "to_json",
        "to_jsonb", "row_to_json", "json_array_length", "jsonb_array_length", "json_typeof", "jsonb_typeof",
        "json_extract_path", "jsonb_extract_path", "json_extract_path_text", "jsonb_extract_path_text",
        "json_array_elements", "jsonb_array_elements", "json_array_elements_text",
        "jsonb_array_elements_text", "json_each", "jsonb_each", "json_each_text", "jsonb_each_text",
        "json_object_keys", "jsonb_object_keys", "jsonb_path_exists", "jsonb_path_query_first",
        "jsonb_strip_nulls", "generate_series", "md5", "format", "acos", "asin", "atan", "atan2", "cos",
        "sin", "tan", "cot", "sinh", "cosh", "tanh", "gcd", "lcm",
    }),
}
"""Functions sqlglot parses as untyped (``exp.Anonymous``) that a query may call, by dialect, lower case."""

SQLITE_ENGINE_NAMES: Final[frozenset[str]] = ANONYMOUS_NAMES["sqlite"] | frozenset({
    # What SQLite itself calls the typed functions above and the operators that call functions.
    "like", "glob", "->", "->>", "ifnull", "nullif", "sum", "total", "avg", "count", "min",
    "max", "group_concat", "string_agg", "round", "abs", "sign", "iif", "instr", "substr", "substring",
    "upper", "lower", "length", "trim", "ltrim", "rtrim", "replace", "printf", "format", "coalesce",
    "strftime", "date", "time", "datetime", "julianday", "unixepoch", "char", "unicode", "typeof",
    "random", "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value", "json_extract", "concat", "concat_ws", "octet_length",
})
"""The functions SQLite's authorizer lets a query call (the second wall, below the parse): what SQLite
calls each, operators such as LIKE and ``->>`` included, lower case."""

SYSTEM_SCHEMAS: Final[dict[Dialect, frozenset[str]]] = {
    "sqlite": frozenset({"temp"}),
    "postgres": frozenset({"pg_catalog", "information_schema"}),
}
"""Schemas no query may read from, by dialect (besides every PostgreSQL schema whose name starts ``pg_``)."""

SYSTEM_PREFIXES: Final[dict[Dialect, tuple[str, ...]]] = {
    # SQLite's own tables (sqlite_master, sqlite_schema, sqlite_stat1, sqlite_sequence, sqlite_dbpage …)
    # and the table-valued pragmas (pragma_table_info …).
    "sqlite": ("sqlite_", "pragma_"),
    # An unqualified pg_* name resolves to pg_catalog first whatever the search_path: pg_authid,
    # pg_settings, pg_stat_activity, pg_hba_file_rules, pg_shadow, pg_roles …
    "postgres": ("pg_",),
}
"""Relation names no query may read, by prefix, whatever schema they are named in."""


def function_category(node: exp.Func) -> str | None:
    """What an allowed typed function is for (``aggregate``, ``math`` …); None when it is not allowed."""
    name = type(node).__name__
    for category, names in CATEGORIES.items():
        if name in names:
            return category
    return None


def allowed_function(node: exp.Func, dialect: Dialect) -> bool:
    """Whether ``node`` (one call in a parsed query) may run in ``dialect``."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in ANONYMOUS_NAMES[dialect]
    return type(node) in ALLOWED_CLASSES


def system_relation(schema: str, name: str, dialect: Dialect) -> bool:
    """Whether the relation ``schema.name`` (``schema`` empty when unqualified) is a system one."""
    lowered_schema, lowered = schema.lower(), name.lower()
    if lowered_schema in SYSTEM_SCHEMAS[dialect]:
        return True
    if dialect == "postgres" and lowered_schema.startswith("pg_"):
        return True
    return lowered.startswith(SYSTEM_PREFIXES[dialect])


__all__ = [
    "ALLOWED_CLASSES",
    "ANONYMOUS_NAMES",
    "CATEGORIES",
    "SQLITE_ENGINE_NAMES",
    "SYSTEM_PREFIXES",
    "SYSTEM_SCHEMAS",
    "Dialect",
    "allowed_function",
    "function_category",
    "system_relation",
]
