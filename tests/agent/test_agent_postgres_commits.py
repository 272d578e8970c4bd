"""An agent's commits on PostgreSQL under its lease: each round's commit begins from what the last one left
(one round trip, ``Store.commit``), and a write's intent is still committed before its call. What such a
commit does when another writer wrote between two of them is the store's own tests' business
(``tests/store/test_store_commit.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agent_helpers import call, decision

from plangate.agent import Agent
from plangate.interactions import Approve
from plangate.models import ScriptedModel
from plangate.store import LeaseBook, WriteIntent
from plangate.store.postgres import PostgresStore
from plangate.tools import ToolRegistry, current_call, tool


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(postgres_url)
    yield store
    store.close()


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many commits began from what the store knew (``guarded``), and how many read the row first."""
    counts = {"guarded": 0, "read first": 0}

    def wrap(name: str, key: str) -> None:
        inner: Callable[..., Any] = getattr(PostgresStore, name)

        def counted(self: PostgresStore, *args: Any, **kwargs: Any) -> Any:
            counts[key] += 1
            return inner(self, *args, **kwargs)

        monkeypatch.setattr(PostgresStore, name, counted)

    wrap("_guarded", "guarded")
    wrap("transaction", "read first")
    return counts


def test_an_agents_rounds_commit_from_what_its_last_commit_left(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    @tool
    def lookup(page: int) -> str:
        """Read a page."""
        return f"page {page}"

    counts = _counting(monkeypatch)
    model = ScriptedModel([call("lookup", page=i) for i in range(4)] + [decision("done", speak="Read.")])
    agent = Agent(model=model, tools=ToolRegistry([lookup]), store=pg, mode="react", leases=LeaseBook(pg))
    result = agent.run("Read four pages.")
    assert result.status == "completed"
    seqs = [event.seq for event in pg.events(result.run_id)]
    assert seqs == list(range(1, len(seqs) + 1))
    # a commit a round at least (four tool rounds and the answer), none of them reading the run's row first
    assert counts["guarded"] >= 5 and counts["read first"] == 0, counts


def test_a_write_runs_only_once_its_intent_is_committed(pg: PostgresStore, postgres_url: str) -> None:
    reader = PostgresStore(postgres_url)  # another handle: it sees only what was committed
    seen: list[WriteIntent | None] = []

    @tool(effect="write")
    def place(task: str) -> str:
        """Place a task."""
        context = current_call()
        assert context is not None and context.idempotency_key is not None
        seen.append(reader.get_write_intent(context.idempotency_key))
        return f"placed {task}"

    try:
        model = ScriptedModel([call("place", task="t1"), decision("done", speak="Placed.")])
        leases = LeaseBook(pg)
        agent = Agent(model=model, tools=ToolRegistry([place]), store=pg, mode="react", leases=leases)
        result = agent.run("Place t1.")
        assert result.interaction is not None and result.interaction.kind == "confirm"
        result = agent.resume(result.run_id, result.interaction.id, Approve())
        assert result.status == "completed"
        [intent] = seen
        assert intent is not None and intent.status == "intent"
        done = pg.get_write_intent(intent.key)
        assert done is not None and done.status == "done"
    finally:
        reader.close()
