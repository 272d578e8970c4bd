"""What the server's copilot tests share: op streams the scripted copilot model writes, and a model that
writes them for every turn (the ops for the copilot's requests, an answer for the answer step's)."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

from plangate.models import ModelRequest, ScriptedModel

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data"
SHOP_DB = DATA / "shop.db"
CHINOOK_DB = DATA / "chinook.sqlite"

QUESTION = "Which 3 regions had the highest revenue in 2025?"
ANSWER = "East led with 1,328,137.93, then West with 899,479.59 and South with 495,110.24."
GOLD_ROWS = [["East", 1328137.93], ["West", 899479.59], ["South", 495110.24]]


def lines(*ops: dict[str, object]) -> str:
    """Ops as newline-delimited JSON."""
    return "\n".join(json.dumps(op) for op in ops) + "\n"


def answer_step(needs: str) -> dict[str, object]:
    prompt = f"Question: {{{{question}}}}\nRows: {{{{steps.{needs}.output.rows}}}}"
    return {"op": "add_step", "step": {"id": "answer", "needs": [needs], "llm": {"prompt": prompt}}}


DONE = {"op": "done", "explanation": "query, then answer", "run": True}

REVENUE_OPS = lines(
    {"op": "plan", "summary": "Revenue per region in 2025, top 3"},
    {
        "op": "add_step",
        "step": {
            "id": "revenue",
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
    },
    answer_step("revenue"),
    DONE,
)

GENRES_SQL = (
    "SELECT g.Name AS genre, count(*) AS tracks FROM Track t JOIN Genre g ON g.GenreId = t.GenreId "
    "GROUP BY g.Name ORDER BY tracks DESC LIMIT 3"
)
GENRES_LOOK = lines({"op": "look", "table": "Track"})
GENRES_OPS = lines(
    {
        "op": "add_step",
        "step": {
            "id": "genres",
            "tool": {"name": "db_query", "args": {"source": "chinook", "sql": GENRES_SQL}},
        },
    },
    answer_step("genres"),
    DONE,
)
GENRES_ANSWER = "Rock has 1,297 tracks, Latin 579 and Metal 374."


class CopilotScript:
    """A scripted model for whole turns: ``ops`` for every copilot request, ``answer`` for the others;
    ``first`` (a ``look``) answers the first copilot request of each turn when given; ``answers``, when
    given, are the answer step's replies in order (the last one again once they run out).

    ``hold``: when set, the copilot request waits (on the turn's own thread) until it is set, so a test can
    act while a turn is in flight.
    """

    def __init__(
        self,
        ops: str = REVENUE_OPS,
        answer: str = ANSWER,
        hold: threading.Event | None = None,
        first: str | None = None,
        answers: list[str] | None = None,
    ):
        self.ops = ops
        self.answers = list(answers or [])
        self.first = first
        self.answer = answer
        self.hold = hold
        self.entered = threading.Event()
        self.model = ScriptedModel(self._respond)

    def _respond(self, request: ModelRequest) -> str:
        if request.purpose == "copilot":
            self.entered.set()
            if self.hold is not None and not self.hold.wait(30):
                raise TimeoutError("the test never released the held copilot request")
            if self.first is not None and not _after_look(request):
                return self.first
            return self.ops
        if self.answers:
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return self.answer


def _after_look(request: ModelRequest) -> bool:
    return any(message.role == "assistant" and '"look"' in message.content for message in request.messages)


def data_dir(tmp_path: Path) -> Path:
    """A data directory holding a copy of Chinook, a file that is not a database and a hidden folder."""
    folder = tmp_path / "data"
    (folder / ".private").mkdir(parents=True)
    shutil.copyfile(CHINOOK_DB, folder / "chinook.sqlite")
    shutil.copyfile(CHINOOK_DB, folder / ".private" / "secret.sqlite")
    (folder / "notes.db").write_text("these are notes, not a database\n" * 20)
    return folder
