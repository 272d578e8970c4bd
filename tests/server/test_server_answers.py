"""An answer never re-runs a step: the server hands it to the run's task, or continues only the branch that
waited; start-up recovery adopts sub-runs left running and takes each run's lease first."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from server_helpers import example_tools, idle, wait_until, write_formula

from plangate.store import TERMINAL_STATUSES, LeaseBook, Store
from plangate.tools import ToolRegistry, tool


class Holds:
    """Async tools that run until released (polled: the test releases them from its own thread), counting
    every start; ``write`` is a write tool, the others read."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started: list[str] = []
        self.written: list[str] = []

    def registry(self) -> ToolRegistry:
        holds = self

        @tool
        async def hold(name: str = "hold") -> dict[str, Any]:
            """Wait until the test releases it."""
            holds.started.append(name)
            while not holds.release.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.005)
            return {"held": name}

        @tool(effect="write")
        async def write(name: str) -> dict[str, Any]:
            """Write something, once; a held name waits to be released first."""
            holds.started.append(f"write:{name}")
            while name.startswith("held") and not holds.release.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.005)
            holds.written.append(name)
            return {"written": name}

        registry = example_tools()
        registry.register(hold)
        registry.register(write)
        return registry


PARALLEL = """
formula = "parallel"

[[steps]]
id = "long"
tool = { name = "hold", args = { name = "long" } }

[[steps]]
id = "ask"
human = { prompt = "Go on?" }

[[steps]]
id = "after"
needs = ["long", "ask"]
tool = { name = "notify", args = { message = "both done" } }
"""


def _start(client: TestClient, formula: str, **extra: object) -> str:
    response = client.post("/v1/runs", json={"kind": "formula", "formula": formula, **extra})
    assert response.status_code == 201, response.text
    return str(response.json()["run"]["id"])


def _open_interaction(client: TestClient, run_id: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def opened() -> bool:
        interaction = client.get(f"/v1/runs/{run_id}").json()["interaction"]
        if interaction:
            found.update(interaction)
        return bool(interaction)

    wait_until(opened, what="an interaction to open")
    return found


def test_answering_one_branch_never_reruns_a_step_running_in_another(
    make_app: Callable[..., FastAPI], workdir: Path
) -> None:
    write_formula(workdir / "formulas", "parallel", PARALLEL)
    holds = Holds()
    try:
        with TestClient(make_app(auth=False, tools=holds.registry())) as client:
            run_id = _start(client, "parallel")
            asked = _open_interaction(client, run_id)
            wait_until(lambda: holds.started == ["long"], what="the long step to start")

            answer = client.post(f"/v1/interactions/{asked['id']}", json={"kind": "approve"})

            assert answer.status_code == 200
            assert client.get(f"/v1/runs/{run_id}").json()["active"] is True  # its task went on
            holds.release.set()
            idle(client, run_id)
            shown = client.get(f"/v1/runs/{run_id}").json()
    finally:
        holds.release.set()
    assert shown["run"]["status"] == "completed"
    assert holds.started == ["long"]  # it ran once: the answer did not stop it and start it again


def test_a_write_running_in_one_branch_is_not_repeated_by_an_answer_in_another(
    make_app: Callable[..., FastAPI], workdir: Path, store: Store
) -> None:
    write_formula(
        workdir / "formulas",
        "branches",
        """
formula = "branches"

[[steps]]
id = "pay"
consent = "auto"
tool = { name = "write", args = { name = "held-payment" } }

[[steps]]
id = "ask"
human = { prompt = "Also notify?" }
""",
    )
    holds = Holds()
    try:
        with TestClient(make_app(auth=False, tools=holds.registry())) as client:
            run_id = _start(client, "branches")
            asked = _open_interaction(client, run_id)
            wait_until(lambda: holds.started == ["write:held-payment"], what="the write to start")

            assert client.post(f"/v1/interactions/{asked['id']}", json={"kind": "approve"}).status_code == 200
            holds.release.set()
            idle(client, run_id)
    finally:
        holds.release.set()
    assert store.get_run(run_id).status == "completed"
    assert holds.written == ["held-payment"]
    assert holds.started == ["write:held-payment"]
    assert [i.status for i in store.pending_write_intents(run_id)] == []


def test_a_sub_runs_consent_continues_only_its_branch_while_another_runs(
    make_app: Callable[..., FastAPI], workdir: Path, store: Store
) -> None:
    folder = workdir / "formulas"
    write_formula(
        folder,
        "charge",
        'formula = "charge"\n[[steps]]\nid = "charge"\ntool = { name = "write", args = { name = "card" } }\n',
    )
    write_formula(
        folder,
        "shop",
        """
formula = "shop"

[[steps]]
id = "long"
tool = { name = "hold", args = { name = "long" } }

[[steps]]
id = "pay"
formula = { name = "charge" }
""",
    )
    holds = Holds()
    try:
        with TestClient(make_app(auth=False, tools=holds.registry())) as client:
            run_id = _start(client, "shop")
            asked = _open_interaction(client, run_id)
            assert asked["kind"] == "confirm" and asked["run_id"] != run_id
            assert asked["tool"]["name"] == "write" and asked["tool"]["arguments"] == {"name": "card"}
            assert holds.written == []

            assert client.post(f"/v1/interactions/{asked['id']}", json={"kind": "approve"}).status_code == 200

            # the branch that waited goes on while the other still runs
            wait_until(lambda: holds.written == ["card"], what="the approved write")
            # The tool has written before its step's end is committed: wait for that commit, not for a pass.
            wait_until(lambda: store.get_run(asked["run_id"]).status == "completed", what="the branch's end")
            assert store.get_run(run_id).status == "running"
            holds.release.set()
            idle(client, run_id)
    finally:
        holds.release.set()
    assert store.get_run(run_id).status == "completed"
    assert holds.started == ["long", "write:card"]
    assert holds.written == ["card"]


def test_always_execute_on_a_formula_run_request_runs_writes_unasked(
    make_app: Callable[..., FastAPI], workdir: Path, store: Store
) -> None:
    write_formula(
        workdir / "formulas",
        "charge",
        'formula = "charge"\n[[steps]]\nid = "charge"\ntool = { name = "write", args = { name = "card" } }\n',
    )
    holds = Holds()
    with TestClient(make_app(auth=False, tools=holds.registry())) as client:
        run_id = _start(client, "charge", always_execute=True)
        idle(client, run_id)
        events = client.get(f"/v1/runs/{run_id}/events").text
    assert store.get_run(run_id).status == "completed"
    assert holds.written == ["card"]
    assert "always_execute" in events
    assert store.list_interactions(run_id=run_id) == []


# -- start-up recovery ---------------------------------------------------------------------------------------

FAN = """
formula = "fan"

[[steps]]
id = "list"
tool = { name = "list_regions" }
on_complete = { for_each = "output.regions", formula = "one", vars = { region = "{item}" }, parallel = true }
"""

ONE = """
formula = "one"

[vars.region]
required = true

[[steps]]
id = "work"
tool = { name = "hold", args = { name = "{{region}}" } }
"""


def test_start_up_recovery_adopts_the_sub_runs_a_stopped_server_left_running(
    make_app: Callable[..., FastAPI], workdir: Path, store: Store
) -> None:
    write_formula(workdir / "formulas", "fan", FAN)
    write_formula(workdir / "formulas", "one", ONE)
    holds = Holds()
    try:
        with TestClient(make_app(auth=False, tools=holds.registry())) as first:
            run_id = _start(first, "fan")
            wait_until(lambda: len(holds.started) == 3, what="the three sub-runs to start")
        # the first server stopped mid fan-out: its sub-runs are left running
        subs = sorted(r.id for r in store.list_runs(parent_run_id=run_id).items)
        assert len(subs) == 3 and all(store.get_run(s).status == "running" for s in subs)
        holds.release.set()
        with TestClient(make_app(auth=False, tools=holds.registry())) as second:
            wait_until(lambda: store.get_run(run_id).status in TERMINAL_STATUSES, what="the root to end")
            idle(second, run_id)
    finally:
        holds.release.set()
    assert store.get_run(run_id).status == "completed"
    assert sorted(r.id for r in store.list_runs(parent_run_id=run_id).items) == subs  # adopted, none new
    assert all(store.get_run(s).status == "completed" for s in subs)


def test_start_up_recovery_ends_sub_runs_whose_root_ended(
    make_app: Callable[..., FastAPI], workdir: Path, store: Store
) -> None:
    write_formula(workdir / "formulas", "fan", FAN)
    write_formula(workdir / "formulas", "one", ONE)
    holds = Holds()
    try:
        with TestClient(make_app(auth=False, tools=holds.registry())) as first:
            run_id = _start(first, "fan")
            wait_until(lambda: len(holds.started) == 3, what="the three sub-runs to start")
        # a root ended by something that did not end its sub-runs (an older plangate's cancel)
        with store.transaction(run_id) as tx:
            tx.set_status("cancelled", outcome={"status": "cancelled", "reason": "by hand"})
        with TestClient(make_app(auth=False, tools=holds.registry())):
            pass
    finally:
        holds.release.set()
    subs = store.list_runs(parent_run_id=run_id).items
    assert len(subs) == 3
    assert all(store.get_run(s.id).status == "cancelled" for s in subs)


def test_start_up_recovery_leaves_a_run_whose_lease_another_live_process_holds(
    make_app: Callable[..., FastAPI], workdir: Path, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    write_formula(workdir / "formulas", "parallel", PARALLEL)
    holds = Holds()
    try:
        with TestClient(make_app(auth=False, tools=holds.registry())) as first:
            run_id = _start(first, "parallel")
            wait_until(lambda: holds.started == ["long"], what="the long step to start")
        assert store.get_run(run_id).status == "running"
        other = LeaseBook(store)  # a live holder that is not the next server (this test's own process)
        other.take(run_id)
        seq = store.last_seq(run_id)
        holds.release.set()
        with caplog.at_level(logging.INFO, logger="plangate.runs"):
            with TestClient(make_app(auth=False, tools=holds.registry())) as second:
                idle(second, run_id)
        assert store.last_seq(run_id) == seq  # nothing advanced it
        assert store.get_run(run_id).lease_owner == other.holder
        said = [r.getMessage() for r in caplog.records if r.name == "plangate.runs"]
        assert any(f"left 1 to the live process holding its lease: {run_id}" in line for line in said)
        other.give_back(run_id)
        with TestClient(make_app(auth=False, tools=holds.registry())) as third:
            asked = _open_interaction(third, run_id)
            third.post(f"/v1/interactions/{asked['id']}", json={"kind": "approve"})
            idle(third, run_id)
    finally:
        holds.release.set()
    assert store.get_run(run_id).status == "completed"
    assert store.get_run(run_id).lease_owner is None  # released at the end


def test_an_answer_to_a_run_another_process_holds_is_kept_for_it_and_never_lost(
    client: TestClient, workdir: Path, store: Store
) -> None:
    # The one way to answer: while another process holds the run, the answer is left in the store for it;
    # once that process lets go (here: without taking it), the answer commits here and the run goes on.
    write_formula(
        workdir / "formulas", "ask", 'formula = "ask"\n[[steps]]\nid = "q"\nhuman = { prompt = "Go?" }\n'
    )
    run_id = _start(client, "ask")
    idle(client, run_id)
    asked = _open_interaction(client, run_id)
    other = LeaseBook(store)
    other.take(run_id)
    threading.Timer(3.0, other.give_back, args=(run_id,)).start()

    began = time.monotonic()
    response = client.post(f"/v1/interactions/{asked['id']}", json={"kind": "approve"})

    # the request does not wait for that process (a console's button read "Sending…" meanwhile): the
    # answer is handed on (202) at once, and commits here once that process lets go
    assert time.monotonic() - began < 2.5
    assert response.status_code == 202, response.text
    assert response.json()["accepted"] is True
    assert other.holder not in response.text
    deadline = time.monotonic() + 20
    while store.get_interaction(asked["id"]).status == "open" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert store.get_interaction(asked["id"]).status == "resolved"
    idle(client, run_id)
    assert store.get_run(run_id).status == "completed"
