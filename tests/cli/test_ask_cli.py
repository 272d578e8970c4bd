"""``plangate ask`` from the command line: the turn shown live, ``--json``, ``--save``, and bad input."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from plangate.cli import _ask, _continue, _formula, _inspect, _loading, _start
from plangate.copilot._conversations import Conversations
from plangate.store import SQLiteStore

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
QUESTION = "Which 3 regions had the highest revenue in 2025?"
REVENUE = {
    "op": "add_step",
    "step": {
        "id": "revenue",
        "title": "Revenue per region",
        "tool": {
            "name": "db_aggregate",
            "args": {
                "source": "shop",
                "table": "order_items",
                "measures": [
                    {
                        "agg": "sum",
                        "column": "order_items.unit_price",
                        "times": "order_items.quantity",
                        "as": "revenue",
                    }
                ],
                "group_by": ["regions.name"],
                "period": {"column": "orders.order_date", "from": "2025", "to": "2025"},
                "order_by": [{"column": "revenue", "desc": True}],
                "limit": 3,
            },
        },
    },
}
ANSWER = {
    "op": "add_step",
    "step": {
        "id": "answer",
        "needs": ["revenue"],
        "llm": {"prompt": "{{question}} {{steps.revenue.output.columns}} {{steps.revenue.output.rows}}"},
    },
}
OPS = "\n".join(
    json.dumps(op)
    for op in [
        {"op": "plan", "summary": "Revenue per region, 2025, top 3"},
        REVENUE,
        ANSWER,
        {"op": "done", "explanation": "sum, then answer", "run": True},
    ]
)
GOOD = "East led with 1,328,137.93, then West (899,479.59) and South (495,110.24)."


@pytest.fixture
def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """The root command."""

    _ask.register(root)
    _formula.register(root)
    _start.register(root)
    _continue.register(root)
    _inspect.register(root)
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("PLANGATE_MODEL", "PLANGATE_TOOLS", "PLANGATE_DATA", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLANGATE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    return tmp_path


def script(home: Path, name: str, *responses: str) -> str:
    path = home / f"{name}.json"
    path.write_text(json.dumps(list(responses)), encoding="utf-8")
    return f"scripted:{path}"


def invoke(app: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_ask_shows_the_formula_growing_the_run_the_review_and_the_answer(
    app: typer.Typer, home: Path
) -> None:
    model = script(home, "m", OPS, GOOD)
    code, out, err = invoke(app, "ask", QUESTION, "--data", str(DATA / "shop.db"), "--model", model)
    assert code == 0 and err == f"copilot model: {model} (--model)\n"
    lines = [line.rstrip() for line in out.splitlines()]
    start = lines.index("attempt 1")
    assert lines[start + 1] == "plan Revenue per region, 2025, top 3"
    assert lines[start + 2].startswith('+ revenue db_aggregate {"source": "shop", "table": "order_items"')
    assert lines[start + 3].startswith("+ answer llm: {{question}}")
    assert lines[start + 4 : start + 13] == [
        "done sum, then answer",
        "check passed (2 steps)",
        "run running 2 steps",
        "  revenue running",
        "  revenue complete: db_aggregate: 3 rows",
        "  answer running",
        "  answer complete: llm: 74 characters",
        "run completed: all 2 steps finished",
        "review: clean",
    ]
    assert any(GOOD in line for line in lines)
    assert any("East" in line and "1,328,137.93" in line for line in lines)  # the rows, as a table, as read
    assert lines[-1].startswith("turn turn_")
    # the turn's usage: the generation's call and the answer step's, two calls in all
    assert re.search(r" · [\d,]+ tokens in, [\d,]+ out$", lines[-1]), lines[-1]


def test_json_prints_one_object_with_the_turn(app: typer.Typer, home: Path) -> None:
    code, out, _ = invoke(
        app,
        "ask",
        QUESTION,
        "--data",
        str(DATA / "shop.db"),
        "--model",
        script(home, "m", OPS, GOOD),
        "--json",
    )
    assert code == 0
    turn = json.loads(out)
    assert {"turn_id", "status", "answer", "attempts", "result", "formula"} <= set(turn)
    assert (turn["status"], turn["answer"]) == ("done", GOOD)
    assert turn["attempts"] == [
        {"status": "done", "reason": "answered from the data", "review": {"severity": "ok", "signals": []}}
    ]
    assert turn["result"]["columns"] == ["name", "revenue"] and turn["result"]["rows"][0][0] == "East"
    assert [s["id"] for s in turn["formula"]["steps"]] == ["revenue", "answer"]
    # its usage: the generation's call and the answer step's (no cost without [prices])
    assert turn["usage"]["calls"] == 2 and turn["usage"]["models"].keys() == {
        "scripted:" + str(home / "m.json")
    }
    assert "cost" not in turn["usage"]
    with SQLiteStore(home / "runs.db") as store:
        assert Conversations(store).get_turn(turn["turn_id"]).answer == GOOD
        assert store.get_run(turn["run_id"]).outcome["usage"] == turn["usage"]  # type: ignore[index]


def test_a_turns_budget_and_prices_come_from_its_flags_or_plangate_toml(app: typer.Typer, home: Path) -> None:
    model = script(home, "m", OPS, GOOD)
    shop = str(DATA / "shop.db")
    # the generation's call is made; its formula run would pass the budget: it is not started
    code, out, _ = invoke(
        app, "ask", QUESTION, "--data", shop, "--model", model, "--json", "--max-tokens", "1"
    )
    assert code == 1
    turn = json.loads(out)
    assert turn["status"] == "failed" and turn["reason"].startswith(
        "The turn reached its budget (max_tokens 1;"
    )
    assert turn["usage"]["calls"] == 1
    code, _, err = invoke(app, "ask", QUESTION, "--data", shop, "--model", model, "--max-cost", "0.5")
    assert code == 2 and f"ask max_cost: the model {model!r} has no price" in err

    (home / "plangate.toml").write_text(
        f'[budget]\nmax_cost = 0.5\n[prices."{model}"]\ninput = 1\noutput = 2\n'
    )
    code, out, _ = invoke(app, "ask", QUESTION, "--data", shop, "--model", model)
    assert code == 0, out
    last = out.rstrip().splitlines()[-1]
    assert re.search(r" · [\d,]+ tokens in, [\d,]+ out · cost 0\.\d{6}$", last), last


def test_without_data_the_bundled_shop_data_is_asked(app: typer.Typer, home: Path) -> None:
    code, out, _ = invoke(app, "ask", QUESTION, "--model", script(home, "m", OPS, GOOD), "--json")
    assert code == 0 and json.loads(out)["status"] == "done"


def test_save_writes_a_formula_that_check_and_run_accept(
    app: typer.Typer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = invoke(
        app, "ask", QUESTION, "--model", script(home, "m", OPS, GOOD), "--save", "top-regions"
    )
    assert code == 0 and "formula saved to formulas/top-regions.formula.toml" in out
    saved = home / "formulas" / "top-regions.formula.toml"
    assert "plangate run top-regions --tools plangate.tools.data.env:registry" in saved.read_text(
        encoding="utf-8"
    )
    monkeypatch.setenv("PLANGATE_DATA", f"shop={DATA / 'shop.db'}")
    code, out, _ = invoke(
        app, "formula", "check", "top-regions", "--tools", "plangate.tools.data.env:registry"
    )
    assert code == 0 and "no issues" in out
    code, out, _ = invoke(
        app,
        "run",
        "top-regions",
        "--tools",
        "plangate.tools.data.env:registry",
        "--model",
        script(home, "answer", "East first."),
        "--json",
    )
    assert code == 0, out
    result = json.loads(out)
    assert result["status"] == "completed"
    # the saved formula declared the question it was made for, with that question as its default
    with SQLiteStore(home / "runs.db") as store:
        run = store.get_run(result["run_id"])
        assert run.input["vars"] == {"question": QUESTION}


def test_save_never_replaces_a_file(app: typer.Typer, home: Path) -> None:
    # Before, the turn ran (every model call of it), then the save failed and the command exited 0.
    (home / "formulas").mkdir()
    (home / "formulas" / "mine.formula.toml").write_text("# keep me\n", encoding="utf-8")
    code, out, err = invoke(app, "ask", QUESTION, "--model", script(home, "m", OPS, GOOD), "--save", "mine")
    assert code == 2 and "exists already" in err and "--save: --save:" not in err
    assert out == ""  # refused before the turn: nothing was asked
    assert (home / "formulas" / "mine.formula.toml").read_text(encoding="utf-8") == "# keep me\n"


def test_a_name_that_cannot_be_saved_is_refused_before_the_turn(app: typer.Typer, home: Path) -> None:
    model = script(home, "m", OPS, GOOD)
    code, out, err = invoke(app, "ask", QUESTION, "--model", model, "--save", "../evil")
    assert code == 2 and "a formula name may hold letters" in err and "--save: --save:" not in err
    assert out == ""
    assert not (home / "evil.formula.toml").exists()


def test_a_save_that_fails_after_the_turn_exits_1(app: typer.Typer, home: Path) -> None:
    (home / "formulas").write_text("a file where the folder would be\n", encoding="utf-8")
    code, out, err = invoke(app, "ask", QUESTION, "--model", script(home, "m", OPS, GOOD), "--save", "kept")
    assert "East" in out  # the turn ran and answered
    assert code == 1 and "error: --save: cannot write formulas/kept.formula.toml" in err


def test_an_unusable_turn_exits_1_and_says_why(app: typer.Typer, home: Path) -> None:
    model = script(home, "m", OPS, "East: 9,999,999.", OPS, "East: 8,888,888.")
    code, out, _ = invoke(app, "ask", QUESTION, "--model", model)
    assert code == 1
    assert "invented_number" in out and "no answer:" in out and "retrying" in out


def test_a_degraded_review_the_policy_does_not_retry_announces_no_retry(app: typer.Typer, home: Path) -> None:
    # leaked markup is degraded and no rebuilt workflow fixes it: the turn keeps its one attempt
    code, out, _ = invoke(app, "ask", QUESTION, "--model", script(home, "m", OPS, GOOD + " <br>"), "--json")
    assert code == 0 and len(json.loads(out)["attempts"]) == 1
    code, out, _ = invoke(app, "ask", QUESTION, "--model", script(home, "n", OPS, GOOD + " <br>"))
    lines = [line.strip() for line in out.splitlines()]
    assert "review (degraded)" in lines and "leaked_markup" in out
    assert "retry" not in out.replace("Retry", "").lower(), out


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("missing.db", "no data at 'missing.db'"),
        ("postgresql://u:pw@127.0.0.1:1/db", "cannot open postgresql://u:***@127.0.0.1:1/db"),
    ],
)
def test_data_that_cannot_be_opened_is_a_failed_turn_not_a_traceback(
    app: typer.Typer, home: Path, data: str, message: str
) -> None:
    code, out, _ = invoke(app, "ask", "How many orders?", "--data", data, "--model", script(home, "m", OPS))
    assert code == 1 and message in " ".join(out.split()) and "Traceback" not in out


def test_an_unknown_conversation_is_a_one_line_error(app: typer.Typer, home: Path) -> None:
    code, out, err = invoke(
        app, "ask", QUESTION, "--conversation", "conv_nope", "--model", script(home, "m", OPS)
    )
    assert code == 2 and out == "" and err.splitlines()[-1].startswith("error: no conversation 'conv_nope'")


def test_a_conversation_continues_across_commands(app: typer.Typer, home: Path) -> None:
    _, out, _ = invoke(app, "ask", QUESTION, "--model", script(home, "a", OPS, GOOD), "--json")
    first = json.loads(out)
    _, out, _ = invoke(
        app,
        "ask",
        "And the bottom one?",
        "--model",
        script(home, "b", OPS, GOOD),
        "--json",
        "--conversation",
        first["conversation_id"],
    )
    assert json.loads(out)["conversation_id"] == first["conversation_id"]


def test_the_model_named_in_the_environment_is_used(
    app: typer.Typer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = script(home, "m", OPS, GOOD)
    monkeypatch.setattr(_loading, "default_model_spec", lambda: (spec, "no API key"))
    code, _, err = invoke(app, "ask", QUESTION, "--json")
    assert code == 0 and err == f"copilot model: {spec} (no API key)\n"


def test_a_chinook_question_from_the_command_line(app: typer.Typer, home: Path) -> None:
    ops = "\n".join(
        json.dumps(op)
        for op in [
            {
                "op": "add_step",
                "step": {
                    "id": "n",
                    "tool": {
                        "name": "db_query",
                        "args": {
                            "source": "chinook",
                            "sql": "SELECT count(*) AS invoices FROM Invoice WHERE InvoiceDate LIKE '2023%'",
                        },
                    },
                },
            },
            {
                "op": "add_step",
                "step": {"id": "answer", "needs": ["n"], "llm": {"prompt": "{{steps.n.output.rows}}"}},
            },
            {"op": "done", "explanation": "count", "run": True},
        ]
    )
    code, out, _ = invoke(
        app,
        "ask",
        "How many invoices in 2023?",
        "--data",
        str(DATA / "chinook.sqlite"),
        "--model",
        script(home, "m", ops, "83 invoices."),
        "--json",
    )
    turn = json.loads(out)
    with closing(sqlite3.connect(DATA / "chinook.sqlite")) as connection:
        expected = connection.execute(
            "SELECT count(*) FROM Invoice WHERE InvoiceDate LIKE '2023%'"
        ).fetchall()
    assert (
        code == 0
        and turn["result"]["rows"] == [list(row) for row in expected]
        and turn["answer"] == "83 invoices."
    )
