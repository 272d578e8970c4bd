"""The ops of a one-query copilot turn on the bundled shop data, for the server processes the tests start."""

from __future__ import annotations

import json

OPS = "\n".join(
    json.dumps(op)
    for op in [
        {"op": "plan", "summary": "count the orders"},
        {
            "op": "add_step",
            "step": {
                "id": "n",
                "tool": {
                    "name": "db_query",
                    "args": {"source": "shop", "sql": "SELECT count(*) AS n FROM orders"},
                },
            },
        },
        {
            "op": "add_step",
            "step": {"id": "answer", "needs": ["n"], "llm": {"prompt": "Rows: {{steps.n.output.rows}}"}},
        },
        {"op": "done", "explanation": "count", "run": True},
    ]
)
