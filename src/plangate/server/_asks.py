"""Copilot turns as server-side jobs: started by ``POST /v1/ask``, watched through their run's events.

For: ``AskJobs``, which checks a question before anything is stored, starts the turn as a task of the
``Runs`` facade keyed by its ``ask`` run (so a cancel, the server's shutdown and its start-up recovery treat
it like any other run; the turn holds its run's lease throughout, whether or not the server hands its other
runs to workers: a turn reads this server's data sources, so it runs here), and
answers with the turn's ids once its ``ask`` run is stored; the JSON views of turns (a running one read
from its run) and conversations; and ``chart_of``, which says whether a result is a series worth a chart.
Not for: what a turn does (``plangate.copilot``) or the owners' sources (``_sources.py``).

One turn writes a conversation at a time (``copilot/_turn_order.py``, in the store, whichever servers take
the messages): a message to a conversation whose turn has not ended is refused, waits after it, or cancels
it first, as ``double_texting`` says.

Each turn runs on a thread with an event loop of its own: the copilot commits its events and builds its
prompts and grammars synchronously, and none of that may hold up the server's loop (its streams, its
heartbeats). Cancelling the task cancels the turn on its loop, which stores it as cancelled, and waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import JsonValue

from plangate.config import BudgetConfig, ModelPrice
from plangate.copilot import Copilot
from plangate.copilot._conversations import Conversation, Conversations, TurnRecord
from plangate.copilot._store import SNAPSHOT_VERSION
from plangate.copilot._turn_order import TurnOrder
from plangate.errors import InteractionError, NotFoundError
from plangate.models import Model
from plangate.runs import Runs
from plangate.runs.quotas import DoubleTexting
from plangate.runs.usage import Budget
from plangate.server._problems import public_issues
from plangate.server._public import public_text, public_usage
from plangate.server._sources import BUILTIN, SourceRegistry
from plangate.store import LeaseBook, RunRecord, RunStatus, Store

_T = TypeVar("_T")
_RUNNING_PAGE = 200
MAX_CHART_POINTS = 200
MAX_CHART_SERIES = 4
MAX_BAR_SERIES = 2
"""Bars of more series than this hide each other."""
_PERIOD = re.compile(r"\d{4}(?:-(?:\d{2}|Q[1-4]|H[12]|W\d{2})(?:-\d{2})?)?")


@dataclass(frozen=True)
class Started:
    """A turn that was started: its ids, known at once."""

    turn_id: str
    run_id: str
    conversation_id: str
    source: str
    queued: bool = False

    def view(self, retry_of: str | None = None) -> dict[str, JsonValue]:
        """The answer of ``POST /v1/ask`` (and of a retry)."""
        data: dict[str, JsonValue] = {
            "turn_id": self.turn_id,
            "run_id": self.run_id,
            "conversation_id": self.conversation_id,
            "source": self.source,
            "status": "queued" if self.queued else "running",
            "events": f"/v1/runs/{self.run_id}/events",
            "turn": f"/v1/turns/{self.turn_id}",
        }
        if retry_of is not None:
            data["retry_of"] = retry_of
        return data


class AskJobs:
    """Starts and shows copilot turns for the server.

    Args:
        store: the server's store (turns, their runs, conversations).
        runs: runs each turn as a task, keyed by its ``ask`` run.
        sources: the owners' data sources.
        model: the copilot model when a request names none (None: the default model).
        leases: the server's lease book, which each turn's ``ask`` run is held under.
        prices: what each model's tokens cost (``[prices]``): a turn's cost.
        budget: the budget of turns whose request names none (``[budget]``).
    """

    def __init__(
        self,
        store: Store,
        runs: Runs,
        sources: SourceRegistry,
        model: Model | str | None,
        leases: LeaseBook,
        *,
        prices: Mapping[str, ModelPrice] | None = None,
        budget: BudgetConfig | None = None,
    ) -> None:
        self.store = store
        self.runs = runs
        self.sources = sources
        self.model = model
        self.leases = leases
        self.prices = dict(prices or {})
        self.budget = budget if budget is not None else BudgetConfig()

    async def start(
        self,
        owner: str,
        question: str,
        source: str | None,
        conversation: str | None,
        model: str | None = None,
        *,
        double_texting: DoubleTexting = "reject",
        budget: Budget | None = None,
    ) -> Started:
        """Check the question, the source, the model, the budget (``max_tokens`` / ``max_cost``; the
        server's ``[budget]`` for those it leaves out) and the conversation, then start the turn; while
        another turn of the conversation has not ended, ``double_texting`` says what this one does.

        Raises:
            ConfigError: an empty question, an unusable model spec, or a budget that cannot be held to (a
                ``max_cost`` for a model without a price): nothing stored.
            NotFoundError: the source or the conversation is not this owner's (nothing stored).
            InteractionError: a turn of the conversation still runs and ``double_texting`` is ``reject``.
        """
        name = source or BUILTIN
        limits = budget if budget is not None else Budget()
        copilot, prepared = await asyncio.to_thread(
            self._prepare, owner, question, name, conversation, model, limits
        )
        queued = await self._take_place(prepared.conversation_id, prepared.run_id, double_texting)
        try:
            run_id = await self.runs.run_here(
                prepared.run_id, _on_own_loop(lambda: copilot.run_turn(prepared))
            )
        except BaseException:
            await asyncio.to_thread(TurnOrder(self.store).withdraw, prepared.run_id)
            raise
        return Started(prepared.turn_id, run_id, prepared.conversation_id, name, queued)

    async def _take_place(self, conversation_id: str, run_id: str, mode: DoubleTexting) -> bool:
        """The new turn's place in its conversation: first (False), or after the turns not ended yet (True:
        it waits), each of which ``cancel`` cancels first; ``reject`` refuses it instead.

        Raises:
            InteractionError: ``reject``, and a turn of the conversation has not ended.
        """
        order = TurnOrder(self.store)
        holder = await asyncio.to_thread(order.claim, conversation_id, run_id, queue=mode != "reject")
        if holder is None:
            return False
        if mode == "reject":
            raise InteractionError(
                f"conversation {conversation_id!r} has a turn that has not ended (run {holder!r}); nothing "
                "was stored: ask again once it ended, or with double_texting 'queue' or 'cancel'"
            )
        if mode == "cancel":
            for earlier in await asyncio.to_thread(order.ahead, conversation_id, run_id):
                await self._cancel(earlier)
        return True

    async def _cancel(self, run_id: str) -> None:
        with contextlib.suppress(InteractionError, NotFoundError):  # it ended meanwhile
            run = await asyncio.to_thread(self.store.get_run, run_id)
            await self.runs.cancel(run, "a newer message to the conversation cancelled it")

    def _prepare(
        self,
        owner: str,
        question: str,
        name: str,
        conversation: str | None,
        model: str | None,
        limits: Budget,
    ) -> tuple[Copilot, Any]:
        sources = self.sources.sources_for(owner, name)
        copilot = Copilot(
            model=model or self.model,
            store=self.store,
            sources=sources,
            owner=owner,
            leases=self.leases,
            prices=self.prices,
            **self.budget.for_run(limits.max_tokens, limits.max_cost),
        )
        return copilot, copilot.prepare(question, name, conversation=conversation)

    async def retry(self, owner: str, turn_id: str, *, double_texting: DoubleTexting = "reject") -> Started:
        """Ask a finished turn's question again, about the same source, in the same conversation, with the
        same model.

        Raises:
            NotFoundError: no such turn for this owner, or its source is gone.
            InteractionError: the turn is still running (or, with ``reject``, another turn of its
                conversation is).
        """
        record = await asyncio.to_thread(self._finished, owner, turn_id)
        own = self.model.name if isinstance(self.model, Model) else self.model
        return await self.start(
            owner,
            record.question,
            record.source or BUILTIN,
            record.conversation_id,
            record.model if record.model and record.model != own else None,  # the model it was asked with
            double_texting=double_texting,
        )

    def _finished(self, owner: str, turn_id: str) -> TurnRecord:
        try:
            return Conversations(self.store).get_turn(turn_id, owner=owner)
        except NotFoundError:
            if self._running_run(owner, turn_id=turn_id) is not None:
                raise InteractionError(f"turn {turn_id!r} is still running: retry it once it ended") from None
            raise

    # -- views (plain functions: the routes call them in the thread pool) -----------------------------------

    def turn(self, owner: str, turn_id: str) -> dict[str, JsonValue]:
        """The turn, stored or still running.

        Raises:
            NotFoundError: no such turn for this owner.
        """
        try:
            return self._stored_view(Conversations(self.store).get_turn(turn_id, owner=owner))
        except NotFoundError:
            run = self._running_run(owner, turn_id=turn_id)
            if run is None:
                raise NotFoundError(f"no turn {turn_id!r}") from None
            return self._running_view(run)

    def conversations(self, owner: str, limit: int, cursor: str | None) -> dict[str, JsonValue]:
        """One page of the owner's conversations, most recent first."""
        page = Conversations(self.store).list_conversations(owner=owner, limit=limit, cursor=cursor)
        return {"items": [_conversation_view(item) for item in page.items], "next_cursor": page.next_cursor}

    def conversation(self, owner: str, conversation_id: str) -> dict[str, JsonValue]:
        """The conversation with its turns, oldest first, a running one last.

        Raises:
            NotFoundError: no such conversation for this owner.
        """
        found = Conversations(self.store).get_conversation(conversation_id, owner=owner)
        turns: list[JsonValue] = [
            self._stored_view(record)
            for record in Conversations(self.store).list_turns(conversation_id, owner=owner)
        ]
        stored = {turn["id"] for turn in turns if isinstance(turn, dict)}
        for run in self._running_runs(owner):
            given = run.input
            if given.get("conversation_id") == conversation_id and given.get("turn_id") not in stored:
                turns.append(self._running_view(run))
        return {"conversation": _conversation_view(found), "turns": turns}

    def _running_runs(self, owner: str) -> list[RunRecord]:
        """The owner's turns not stored yet: running, or queued behind another turn of their conversation."""
        statuses: list[RunStatus] = ["queued", "running"]
        return self.store.list_runs(kind="ask", status=statuses, owner=owner, limit=_RUNNING_PAGE).items

    def _running_run(self, owner: str, *, turn_id: str) -> RunRecord | None:
        return next((run for run in self._running_runs(owner) if run.input.get("turn_id") == turn_id), None)

    def _formula_runs(self, run_id: str) -> list[JsonValue]:
        children = self.store.list_runs(parent_run_id=run_id, kind="formula", limit=10).items
        return [child.id for child in sorted(children, key=lambda child: child.created_at)]

    def _stored_view(self, record: TurnRecord) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = record.model_dump(mode="json", exclude={"owner"})
        data["reason"] = public_text(record.reason)
        data["model"] = public_text(record.model)
        data["attempts"] = [_attempt_view(attempt) for attempt in record.model_dump(mode="json")["attempts"]]
        data["chart"] = chart_of(record.result)
        data["running"] = False
        data["runs"] = self._formula_runs(record.run_id)
        data["usage"] = self._usage(record.run_id)
        return data

    def _usage(self, run_id: str) -> JsonValue:
        """The turn's usage and cost, as its run's outcome keeps them (None: no call reported any)."""
        try:
            outcome = self.store.get_run(run_id).outcome
        except NotFoundError:
            return None
        usage = None if outcome is None else outcome.get("usage")
        return public_usage(usage) if isinstance(usage, dict) else None

    def _running_view(self, run: RunRecord) -> dict[str, JsonValue]:
        given = run.input
        snapshot = self.store.get_snapshot(run.id)
        attempts: list[JsonValue] = []
        if snapshot is not None:
            with contextlib.suppress(Exception):  # a snapshot this version cannot read shows no attempts
                items = snapshot.checked_state(SNAPSHOT_VERSION).get("attempts")
                attempts = (
                    [_attempt_view(item) for item in items if isinstance(item, dict)]
                    if isinstance(items, list)
                    else []
                )
        return {
            "id": str(given.get("turn_id", "")),
            "conversation_id": str(given.get("conversation_id", "")),
            "run_id": run.id,
            "question": str(given.get("question", run.name)),
            "status": "queued" if run.status == "queued" else "running",
            "reason": "",
            "answer": "",
            "result": {"columns": [], "rows": []},
            "formula": None,
            "source": str(given.get("data", "")),
            "model": public_text(str(given.get("model", ""))),
            "created_at": run.created_at,
            "finished_at": None,
            "attempts": attempts,
            "chart": None,
            "running": True,
            "runs": self._formula_runs(run.id),
            "usage": None,
        }


def _attempt_view(attempt: dict[str, JsonValue]) -> JsonValue:
    shown = dict(attempt)
    reason, issues = shown.get("reason"), shown.get("issues")
    if isinstance(reason, str):
        shown["reason"] = public_text(reason)
    if isinstance(issues, list):
        shown["issues"] = public_issues(issues)
    view: JsonValue = shown
    return view


def _conversation_view(conversation: Conversation) -> dict[str, JsonValue]:
    data: dict[str, JsonValue] = conversation.model_dump(mode="json", exclude={"owner"})
    return data


def chart_of(result: JsonValue) -> dict[str, JsonValue] | None:
    """How to chart a result, or None when it is not a series.

    A series: 2 to 200 rows, one column of labels (text, or whole numbers in order such as years or
    months) and 1 to 4 columns of numbers (2 for a bar chart). Labels that are all periods (``2025``,
    ``2025-03``, ``2025-Q1``, a date), or whole numbers, make a line chart; other labels a bar chart.
    """
    if not isinstance(result, dict):
        return None
    columns, rows = result.get("columns"), result.get("rows")
    if not isinstance(columns, list) or not isinstance(rows, list) or not 2 <= len(rows) <= MAX_CHART_POINTS:
        return None
    if not all(isinstance(row, list) and len(row) == len(columns) for row in rows):
        return None
    table = [list(row) for row in rows if isinstance(row, list)]
    numeric = [i for i in range(len(columns)) if _all(table, i, _is_number)]
    labels = [i for i in range(len(columns)) if _all(table, i, lambda v: isinstance(v, str))]
    if labels:
        x = labels[0]
        kind = (
            "line" if _all(table, x, lambda v: isinstance(v, str) and bool(_PERIOD.fullmatch(v))) else "bar"
        )
    elif len(numeric) >= 2 and _ordered_whole(table, numeric[0]):
        x, kind = numeric[0], "line"
    else:
        return None
    series = [i for i in numeric if i != x][: MAX_BAR_SERIES if kind == "bar" else MAX_CHART_SERIES]
    if not series:
        return None
    return {"kind": kind, "x": str(columns[x]), "y": [str(columns[i]) for i in series]}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _all(rows: list[list[JsonValue]], index: int, test: Callable[[object], bool]) -> bool:
    values = [row[index] for row in rows if row[index] is not None]
    return bool(values) and all(test(value) for value in values)


def _ordered_whole(rows: list[list[JsonValue]], index: int) -> bool:
    values = [row[index] for row in rows]
    whole = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return len(whole) == len(values) and whole == sorted(whole) and len(set(whole)) == len(whole)


def _on_own_loop(make: Callable[[], Coroutine[Any, Any, _T]]) -> Coroutine[Any, Any, _T]:
    """``make()`` run on a new event loop in a thread of its own; cancelling the awaiting task cancels it
    there and waits for it to finish (a turn stores itself as cancelled)."""

    async def hosted() -> _T:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_T] = loop.create_future()
        inner: dict[str, Any] = {}
        ready = threading.Event()

        # Read once settled, so that an error the turn raised after its task stopped waiting is never
        # reported as unretrieved.
        done.add_done_callback(lambda settled: settled.cancelled() or settled.exception())

        def settle(result: _T | None, error: BaseException | None) -> None:
            if done.done():
                return
            if isinstance(error, asyncio.CancelledError):
                done.cancel()
            elif error is not None:
                done.set_exception(error)
            else:
                done.set_result(result)  # type: ignore[arg-type]

        async def body() -> _T:
            inner["task"] = asyncio.current_task()
            inner["loop"] = asyncio.get_running_loop()
            ready.set()
            return await make()

        def main() -> None:
            try:
                result = asyncio.run(body())
            except BaseException as exc:  # handed to the awaiting task, which re-raises it
                loop.call_soon_threadsafe(settle, None, exc)
            else:
                loop.call_soon_threadsafe(settle, result, None)
            finally:
                ready.set()

        context = contextvars.copy_context()  # the supervisor hears the turn's first commit through it
        thread = threading.Thread(target=context.run, args=(main,), name="plangate-turn", daemon=True)
        thread.start()
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            await asyncio.to_thread(ready.wait, 10)
            if "task" in inner:
                inner["loop"].call_soon_threadsafe(inner["task"].cancel)
            await asyncio.to_thread(thread.join, 60)
            raise

    return hosted()


__all__ = ["AskJobs", "Started", "chart_of"]
