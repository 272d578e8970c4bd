"""What a grammar-constrained model reads: a short prompt, since the grammar carries the op format and the
prompt only has to say what to put in it; and the short message that hands the check's errors back.

For: text only, built from plain values, on a short context window (the schema described in fewer
characters than the full prompt's). Not for: the full op protocol of the models that write ops freely
(``plangate.copilot._prompt``) or the grammar (``_constrained``).
"""

from __future__ import annotations

from collections.abc import Sequence

from plangate.copilot._prompt import issue_list, metrics_text, schema_text
from plangate.copilot._scope import Scope
from plangate.formulas import Issue
from plangate.models import Message

SCHEMA_CHARS_SMALL = 3_500
"""The longest schema description in the prompt of a small constrained model, whose context window is
short."""

_CONSTRAINED = """You answer questions about the data source {source} with one structured query.
Fill it in from the question:
- measures: what to compute. count of a table's key for "how many"; sum of a price column times a quantity
  column of the same table for revenue or sales; avg for "average"; or a metric by name when one is offered.
- group_by: the column of "per X", "by X", "which X".
- period: the date column of the time the question names (its bounds are given).
- filters: a value the question names (a status, a category), when one is offered.
- order_by: the measure ("sum", "count", "avg") with desc true for highest, top, most, best.
- limit: the N of "top N" or "N regions", else 100.

Examples, on another database:
Question: Which 2 cities had the highest sales in 2023?
{example_sales}
Question: How many orders per channel in March 2024?
{example_count}

{schema}
{metrics}"""
_EXAMPLE_SALES = (
    '{"op": "add_step", "step": {"id": "query", "title": "Sales per city in 2023", "tool": {"name": '
    '"db_aggregate", "args": {"source": "demo", "measures": [{"agg": "sum", "column": "sales.price", '
    '"times": "sales.quantity"}], "group_by": ["stores.city"], "period": {"column": "sales.sold_on", '
    '"from": "2023", "to": "2023"}, "filters": [], "order_by": [{"column": "sum", "desc": true}], '
    '"limit": 2}}}}'
)
_EXAMPLE_COUNT = (
    '{"op": "add_step", "step": {"id": "query", "title": "Orders per channel", "tool": {"name": '
    '"db_aggregate", "args": {"source": "demo", "measures": [{"agg": "count", "column": "sales.sale_id"}], '
    '"group_by": ["sales.channel"], "period": {"column": "sales.sold_on", "from": "2024-03", "to": '
    '"2024-03"}, "filters": [], "order_by": [{"column": "count", "desc": true}], "limit": 100}}}}'
)


def messages(scope: Scope, question: str, instruction: str | None) -> list[Message]:
    """The opening messages of a generation: the short prompt, then the question (or the retry's
    instruction, which restates it). The conversation's history is left out: the window is short."""
    system = _CONSTRAINED.format(
        source=scope.name,
        schema=schema_text(scope, SCHEMA_CHARS_SMALL),
        example_sales=_EXAMPLE_SALES,
        example_count=_EXAMPLE_COUNT,
        metrics=metrics_text(scope),
    )
    ask = instruction or question
    return [Message("system", system), Message("user", f"Question: {ask}")]


def repair_text(issues: Sequence[Issue]) -> str:
    """The message that hands the check's errors back: the model writes its query again, whole."""
    return f"The query has problems:\n{issue_list(issues)}\nWrite the workflow again, fixed."


__all__ = ["SCHEMA_CHARS_SMALL", "messages", "repair_text"]
