"""The copilot on data nobody here made: Chinook (a music store, 11 tables, invoices 2021-2025, MIT licence,
copied to examples/data/ with its licence).

Each question is answered end to end by the scripted model replaying an op stream a model could write
(structured queries and raw SQL, joins of two to four tables, periods, a question with no data); the rows
the turn rests on must equal what gold SQL returns, and the answers pass the number guard.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from copilot_helpers import DONE, aggregate_step, answer_step, assert_stored_whole, gold, lines, query_step

from plangate.copilot import ask
from plangate.models import ScriptedModel
from plangate.store import SQLiteStore, Store

CHINOOK = Path(__file__).resolve().parents[2] / "examples" / "data" / "chinook.sqlite"
LICENCE = CHINOOK.with_name("chinook.LICENSE.md")

CASES = [
    pytest.param(
        "Which 5 genres earned the most?",
        [
            {"op": "plan", "summary": "Sum invoice lines per genre, top 5"},
            aggregate_step(
                "genres",
                source="chinook",
                table="InvoiceLine",
                measures=[
                    {
                        "agg": "sum",
                        "column": "InvoiceLine.UnitPrice",
                        "times": "InvoiceLine.Quantity",
                        "as": "revenue",
                    }
                ],
                group_by=["Genre.Name"],
                order_by=[{"column": "revenue", "desc": True}],
                limit=5,
            ),
        ],
        "SELECT g.Name, sum(il.UnitPrice * il.Quantity) AS revenue FROM InvoiceLine il JOIN Track t "
        "USING (TrackId) "
        "JOIN Genre g USING (GenreId) GROUP BY g.Name ORDER BY revenue DESC LIMIT 5",
        "Rock earned the most (826.65), then Latin (382.14), Metal (261.36), Alternative & Punk (241.56) and "
        "TV Shows (93.53).",
        id="top-genres-three-table-join",
    ),
    pytest.param(
        "How many invoices were issued in 2023?",
        [{"op": "look", "table": "Invoice"}],
        "SELECT count(*) FROM Invoice WHERE InvoiceDate >= '2023-01-01' AND InvoiceDate < '2024-01-01'",
        "83 invoices were issued in 2023.",
        id="count-in-a-year-after-a-look",
    ),
    pytest.param(
        "Which 3 billing countries had the highest invoice totals in 2024?",
        [
            aggregate_step(
                "countries",
                source="chinook",
                table="Invoice",
                measures=[{"agg": "sum", "column": "Invoice.Total", "as": "total"}],
                group_by=["Invoice.BillingCountry"],
                period={"column": "Invoice.InvoiceDate", "from": "2024", "to": "2024"},
                order_by=[{"column": "total", "desc": True}],
                limit=3,
            )
        ],
        "SELECT BillingCountry, sum(Total) AS total FROM Invoice WHERE InvoiceDate >= '2024-01-01' "
        "AND InvoiceDate < '2025-01-01' GROUP BY BillingCountry ORDER BY total DESC LIMIT 3",
        "In 2024 the USA billed 127.98, Brazil 53.46 and Canada 42.57.",
        id="top-n-with-a-period",
    ),
    pytest.param(
        "Which artist has the most albums?",
        [
            aggregate_step(
                "artists",
                source="chinook",
                table="Album",
                measures=[{"agg": "count", "column": "*"}],
                group_by=["Artist.Name"],
                order_by=[{"column": "count", "desc": True}],
                limit=1,
            )
        ],
        "SELECT ar.Name, count(*) AS n FROM Album al JOIN Artist ar USING (ArtistId) GROUP BY ar.Name "
        "ORDER BY n DESC LIMIT 1",
        "Iron Maiden has the most albums: 21.",
        id="group-by-a-joined-table",
    ),
    pytest.param(
        "Which support rep looks after the most customers?",
        [
            query_step(
                "reps",
                "chinook",
                "SELECT e.FirstName || ' ' || e.LastName AS rep, count(*) AS customers FROM Customer c "
                "JOIN Employee e ON e.EmployeeId = c.SupportRepId GROUP BY rep ORDER BY customers "
                "DESC LIMIT 1",
            )
        ],
        "SELECT e.FirstName || ' ' || e.LastName, count(*) FROM Customer c JOIN Employee e "
        "ON e.EmployeeId = c.SupportRepId GROUP BY 1 ORDER BY 2 DESC LIMIT 1",
        "Jane Peacock looks after the most customers: 21.",
        id="raw-sql-join",
    ),
    pytest.param(
        "How many different Rock tracks were sold in 2022?",
        [
            aggregate_step(
                "rock",
                source="chinook",
                table="InvoiceLine",
                measures=[{"agg": "count_distinct", "column": "InvoiceLine.TrackId", "as": "tracks"}],
                filters=[{"column": "Genre.Name", "op": "=", "value": "Rock"}],
                period={"column": "Invoice.InvoiceDate", "from": "2022", "to": "2022"},
            )
        ],
        "SELECT count(DISTINCT il.TrackId) FROM InvoiceLine il JOIN Invoice i USING (InvoiceId) "
        "JOIN Track t USING (TrackId) JOIN Genre g USING (GenreId) WHERE g.Name = 'Rock' "
        "AND i.InvoiceDate >= '2022-01-01' AND i.InvoiceDate < '2023-01-01'",
        "157 different Rock tracks were sold in 2022.",
        id="four-tables-a-filter-and-a-period",
    ),
    pytest.param(
        "What is the average track length per media type, longest first?",
        [
            aggregate_step(
                "lengths",
                source="chinook",
                table="Track",
                measures=[{"agg": "avg", "column": "Track.Milliseconds", "as": "avg_ms"}],
                group_by=["MediaType.Name"],
                order_by=[{"column": "avg_ms", "desc": True}],
            )
        ],
        "SELECT m.Name, avg(t.Milliseconds) AS a FROM Track t JOIN MediaType m USING (MediaTypeId) "
        "GROUP BY m.Name "
        "ORDER BY a DESC",
        "Protected MPEG-4 video files are longest on average (2,342,940 ms); MPEG audio files "
        "average 265,574 ms.",
        id="average-per-group",
    ),
]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = SQLiteStore(tmp_path / "store.db")
    yield opened  # type: ignore[misc]
    opened.close()


def test_the_copy_keeps_its_licence() -> None:
    text = LICENCE.read_text(encoding="utf-8")
    assert "Copyright (c) 2008-2024 Luis Rocha" in text and "Permission is hereby granted" in text


@pytest.mark.parametrize(("question", "ops", "gold_sql", "answer"), CASES)
def test_questions_on_chinook_are_answered_from_the_right_rows(
    store: Store, question: str, ops: list[dict[str, object]], gold_sql: str, answer: str
) -> None:
    responses: list[str] = []
    if ops[0].get("op") == "look":  # the model looks first, then writes the workflow
        responses.append(lines(*ops))
        ops = [
            aggregate_step(
                "n",
                source="chinook",
                table="Invoice",
                measures=[{"agg": "count", "column": "*"}],
                period={"column": "Invoice.InvoiceDate", "from": "2023", "to": "2023"},
            )
        ]
    step_id = str(ops[-1]["step"]["id"])  # type: ignore[index]
    responses += [lines(*ops, answer_step(step_id), DONE), answer]
    turn = ask(question, CHINOOK, model=ScriptedModel(responses), store=store)
    assert turn.source == "chinook"
    assert (turn.status, turn.reason) == ("done", "answered from the data"), turn.reason
    assert turn.answer == answer
    assert turn.result.rows == gold(CHINOOK, gold_sql)
    assert_stored_whole(store, turn)


def test_a_question_chinook_has_no_data_for_is_not_answered_with_a_number(store: Store) -> None:
    ops = lines(
        aggregate_step(
            "n",
            source="chinook",
            table="Invoice",
            measures=[{"agg": "sum", "column": "Invoice.Total"}],
            period={"column": "Invoice.InvoiceDate", "from": "2030", "to": "2030"},
        ),
        answer_step("n"),
        DONE,
    )
    turn = ask(
        "What was the invoice total in 2030?",
        CHINOOK,
        model=ScriptedModel([ops, "The total in 2030 was 1,234.50.", ops, "It was 1,234.50."]),
        store=store,
    )
    assert turn.status == "unusable" and turn.answer == ""
    kinds = {kind for attempt in turn.attempts for kind in attempt.review.kinds()}
    assert {"no_rows_in_range", "invented_number"} <= kinds
    assert "Invoice.InvoiceDate has rows from 2021-01-01 to 2025-12-22" in turn.attempts[0].review.summary()
