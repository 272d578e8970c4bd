"""Runs advanced by real Celery workers on PostgreSQL and Redis: handed over, answered, taken over.

Each test starts real worker processes (``worker_proc.py``, or ``plangate worker`` itself) and defends one
promise: a run is advanced only by the worker holding its lease; a duplicate or re-delivered message never
makes a second advancer (celery#5306, #5935); a worker child killed mid-task does not acknowledge its
message as done (celery#1628); a killed worker's run is taken over within 15 s; a paused worker's late
commit is refused. Writes are counted by the write tool itself (``fault_writes``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import fault_tools
import pytest
from prometheus_client.parser import text_string_to_metric_families
from worker_helpers import FORMULAS, Workers, approve_open, submit_agent, submit_formula, until

from plangate.events import StepStateEvent
from plangate.store import TERMINAL_STATUSES, Store
from plangate.workers import RunQueue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PLANGATE = str(Path(sys.executable).with_name("plangate"))
TOOLS = f"{Path(fault_tools.__file__).resolve()}:registry"


def _ran(store: Store, run_id: str, step_id: str) -> int:
    """How many times the step was started (its ``running`` transitions)."""
    return sum(
        1
        for event in store.events(run_id)
        if isinstance(event, StepStateEvent) and event.step_id == step_id and event.status == "running"
    )


def _holder_pid(store: Store, run_id: str) -> int | None:
    lease = store.get_lease(run_id)
    if lease is None or lease.expires_at <= time.time():
        return None
    return int(lease.holder.rsplit(":", 3)[1])


def test_the_command_line_hands_a_run_to_a_worker_and_an_answer_hands_it_on(
    store: Store, store_url: str, broker: str, tmp_path: Path
) -> None:
    env = {**os.environ, "FAULT_DB": store_url, "PLANGATE_STORE": store_url}
    log = open(tmp_path / "worker.log", "wb")
    # fmt: off
    worker = subprocess.Popen(
        [PLANGATE, "worker", "--broker", broker, "--tools", TOOLS, "--path", str(FORMULAS),
         "--concurrency", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    # fmt: on
    log.close()
    try:
        handed = subprocess.run(
            [PLANGATE, "run", "chaos", "--path", str(FORMULAS), "--tools", TOOLS, "--var", "label=cli",
             "--broker", broker, "--json"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert handed.returncode == 0, handed.stderr
        run_id = __import__("json").loads(handed.stdout)["run_id"]
        until(lambda: store.get_run(run_id).status == "waiting", 90, "the worker to reach the approval")
        (approval,) = store.list_interactions(status="open", run_id=run_id)
        answered = subprocess.run(
            [PLANGATE, "approve", approval.id, "--broker", broker], capture_output=True, text=True, env=env,
            timeout=60,
        )  # fmt: skip
        assert answered.returncode == 0, answered.stderr
        assert "continues on a worker" in answered.stdout
        until(lambda: bool(store.list_interactions(status="open", run_id=run_id)), 60, "the write's consent")
        (consent,) = store.list_interactions(status="open", run_id=run_id)
        assert consent.kind == "confirm" and consent.tool is not None and consent.tool.name == "record"
        subprocess.run([PLANGATE, "approve", consent.id, "--broker", broker], env=env, timeout=60, check=True)
        until(lambda: store.get_run(run_id).status == "completed", 60, "the run to complete")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    assert fault_tools.executions(store_url) == {f"{run_id}:first-write:1": 1, consent.id: 1}
    assert "advanced " in (tmp_path / "worker.log").read_text()


def test_a_worker_started_in_a_project_runs_the_tools_of_its_plangate_toml_mcp_servers(
    store: Store, store_url: str, broker: str, tmp_path: Path
) -> None:
    # Before, `plangate worker` read plangate.toml only with --config, and refused a file with [[mcp]]
    # servers ("workers do not start MCP servers"): an MCP tool could run in-process but not on a worker.
    project = tmp_path / "project"
    (project / "formulas").mkdir(parents=True)
    (project / "plangate.toml").write_text(
        f'store = "{store_url}"\n[[mcp]]\nname = "time"\ncommand = {json.dumps(sys.executable)}\n'
        'args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]\neffect_default = "read"\n',
        encoding="utf-8",
    )
    step = {"id": "now", "tool": {"name": "time_get_current_time", "args": {"timezone": "Europe/Paris"}}}
    formula = {"formula": "clock", "steps": [step]}
    (project / "formulas" / "clock.formula.json").write_text(json.dumps(formula), encoding="utf-8")
    unset = ("PLANGATE_STORE", "PLANGATE_CONFIG", "PLANGATE_TOOLS")
    env = {key: value for key, value in os.environ.items() if key not in unset}
    log = open(tmp_path / "worker.log", "wb")
    # fmt: off
    worker = subprocess.Popen(
        [PLANGATE, "worker", "--broker", broker, "--path", "formulas", "--concurrency", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=project, start_new_session=True,
    )
    # fmt: on
    log.close()
    try:
        handed = subprocess.run(
            [PLANGATE, "run", "clock", "--path", "formulas", "--broker", broker, "--json"],
            capture_output=True, text=True, env=env, cwd=project, timeout=90,
        )  # fmt: skip
        assert handed.returncode == 0, handed.stderr
        run_id = json.loads(handed.stdout)["run_id"]
        until(lambda: store.get_run(run_id).status in TERMINAL_STATUSES, 90, "the worker to run the step")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    logged = (tmp_path / "worker.log").read_text(errors="replace")
    assert "worker: tools time_get_current_time, time_convert_time" in logged
    assert store.get_run(run_id).status == "completed", logged[-2000:]
    (result,) = [e for e in store.events(run_id) if isinstance(e, StepStateEvent) and e.status == "complete"]
    assert result.output is not None and result.output.get("timezone") == "Europe/Paris", result.output


def test_an_agent_run_asks_consent_and_its_write_runs_once_on_a_worker(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    workers.wait_ready(workers.start())
    run_id = submit_agent(store, queue, "agent-one")
    until(lambda: store.get_run(run_id).status == "waiting", 60, "the agent to ask for consent")
    (consent,) = store.list_interactions(status="open", run_id=run_id)
    assert consent.tool is not None and consent.tool.arguments == {"label": "agent-one"}
    assert fault_tools.executions(store_url) == {}  # approving is not running: the worker runs it
    assert approve_open(store, queue) == 1
    until(lambda: store.get_run(run_id).status == "completed", 60, "the agent to finish")
    assert fault_tools.executions(store_url) == {consent.id: 1}


def test_a_killed_worker_s_run_is_taken_over_within_15_seconds(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    first = workers.start(ttl=10)
    workers.wait_ready(first)
    run_id = submit_formula(store, queue, "slow", seconds=20, label="taken-over")
    until(lambda: _holder_pid(store, run_id) is not None, 60, "the first worker to lease the run")
    second = workers.start(ttl=10)
    workers.wait_ready(second)
    held_by = store.get_lease(run_id)
    assert held_by is not None
    workers.kill(first)
    killed_at = time.monotonic()
    until(
        lambda: (lease := store.get_lease(run_id)) is not None and lease.generation > held_by.generation,
        15,
        "another worker to take the run over",
        every=0.05,
    )
    took = time.monotonic() - killed_at
    until(lambda: store.get_run(run_id).status == "completed", 90, "the run to complete")
    assert took < 15
    assert _ran(store, run_id, "work") == 2  # cut off by the kill, run again by the new holder
    assert fault_tools.executions(store_url) == {f"{run_id}:write:1": 1}


def test_a_duplicate_message_while_a_worker_holds_the_run_is_dropped(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    for proc in [workers.start(), workers.start()]:
        workers.wait_ready(proc)
    run_id = submit_formula(store, queue, "slow", seconds=3, label="duplicate")
    until(lambda: _holder_pid(store, run_id) is not None, 60, "a worker to lease the run")
    for _ in range(3):
        queue.enqueue(run_id)
    until(lambda: store.get_run(run_id).status == "completed", 60, "the run to complete")
    logs = "".join(workers.log(proc) for proc in workers.procs)
    assert logs.count(f"dropped {run_id}") >= 3
    assert _ran(store, run_id, "work") == 1
    assert fault_tools.executions(store_url) == {f"{run_id}:write:1": 1}


def test_a_message_redelivered_after_the_visibility_timeout_makes_no_second_advancer(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    # celery#5306 / #5935: with acks_late, Redis hands a message whose worker is still busy with it to
    # another worker once the visibility timeout passed. Here it does (2 s, an advance of 8 s), with no
    # reaper: the copy must find the lease held and be dropped.
    options = {"visibility": 2, "reap": 0, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
    for proc in [workers.start(**options), workers.start(**options)]:
        workers.wait_ready(proc)
    run_id = submit_formula(store, queue, "slow", seconds=8, label="redelivered")
    until(lambda: store.get_run(run_id).status == "completed", 120, "the run to complete")
    logs = "".join(workers.log(proc) for proc in workers.procs)
    assert logs.count("] received") >= 2, "the message was never re-delivered: nothing tested"
    assert f"dropped {run_id}" in logs
    assert _ran(store, run_id, "work") == 1
    assert fault_tools.executions(store_url) == {f"{run_id}:write:1": 1}


def test_a_killed_worker_child_puts_its_message_back_instead_of_acknowledging_it(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    # celery#1628: a pool process killed mid-task (the OOM killer) used to be acknowledged as done; with
    # task_reject_on_worker_lost its message goes back to the queue. No reaper: only the broker can save it.
    proc = workers.start(reap=0, concurrency=1)
    workers.wait_ready(proc)
    run_id = submit_formula(store, queue, "slow", seconds=4, label="child")
    until(lambda: _holder_pid(store, run_id) is not None, 60, "the worker's child to lease the run")
    # Killed while its step works (not between the lease and the step's start, which a loaded machine can
    # stretch): the step then starts once more after the message comes back.
    until(lambda: _ran(store, run_id, "work") == 1, 60, "the worker's child to start the slow step")
    child = _holder_pid(store, run_id)
    assert child is not None and child != proc.pid
    os.kill(child, signal.SIGKILL)
    until(lambda: store.get_run(run_id).status == "completed", 90, "the run to complete after the kill")
    assert "WorkerLostError" in workers.log(proc)
    assert _ran(store, run_id, "work") == 2
    assert fault_tools.executions(store_url) == {f"{run_id}:write:1": 1}


def test_a_worker_paused_past_its_lease_commits_nothing_when_it_wakes(
    store: Store, store_url: str, queue: RunQueue, workers: Workers
) -> None:
    paused = workers.start(ttl=2)
    workers.wait_ready(paused)
    run_id = submit_formula(store, queue, "slow", seconds=3, label="paused")
    # Paused while its step works (not between the lease and reading the run, which a loaded machine can
    # stretch: woken, it would find the run completed and end with nothing to commit, refused by nothing).
    until(lambda: _ran(store, run_id, "work") == 1, 60, "the worker to start the slow step")
    workers.kill(paused, signal.SIGSTOP)
    other = workers.start(ttl=2)
    workers.wait_ready(other)
    until(lambda: store.get_run(run_id).status == "completed", 90, "the other worker to finish the run")
    events = store.last_seq(run_id)
    workers.kill(paused, signal.SIGCONT)
    until(lambda: "lost the run's lease" in workers.log(paused), 30, "the woken worker to be refused")
    assert store.last_seq(run_id) == events  # its late commit was refused
    assert fault_tools.executions(store_url) == {f"{run_id}:write:1": 1}


def test_a_server_with_a_broker_serves_the_same_api_while_workers_advance_its_runs(
    store: Store, store_url: str, broker: str, workers: Workers
) -> None:
    from fastapi.testclient import TestClient

    from plangate.server import create_app

    workers.wait_ready(workers.start())
    app = create_app(store, fault_tools.registry, auth=False, search_paths=[FORMULAS], broker=broker)
    with TestClient(app) as client:
        body = {"kind": "formula", "formula": "chaos", "vars": {"label": "api"}}
        created = client.post("/v1/runs", json=body)
        assert created.status_code == 201, created.text
        run_id = created.json()["run"]["id"]
        for _ in range(2):  # the approval, then the write's consent
            until(lambda: bool(store.list_interactions(status="open", run_id=run_id)), 60, "a question")
            (asked,) = store.list_interactions(status="open", run_id=run_id)
            answered = client.post(f"/v1/interactions/{asked.id}", json={"kind": "approve"})
            assert answered.status_code == 200, answered.text
        until(lambda: store.get_run(run_id).status == "completed", 60, "the run to complete")
        steps = client.get(f"/v1/runs/{run_id}").json()["steps"]
    assert {step["status"] for step in steps} == {"complete"}
    assert sum(fault_tools.executions(store_url).values()) == 2


def test_an_answer_while_a_worker_runs_another_branch_is_taken_by_that_worker_without_stopping_it(
    store: Store, store_url: str, broker: str, workers: Workers
) -> None:
    # Before, the answer was refused with 409 (RunLeased) until the run waited: the worker held the run's
    # lease while its other branch worked. Now the server stores it and the worker applies it between two
    # of its passes; the working branch goes on, run once.
    from fastapi.testclient import TestClient

    from plangate.server import create_app

    workers.wait_ready(workers.start(ttl=10))
    app = create_app(store, fault_tools.registry, auth=False, search_paths=[FORMULAS], broker=broker)
    with TestClient(app) as client:
        created = client.post("/v1/runs", json={"kind": "formula", "formula": "branches"})
        assert created.status_code == 201, created.text
        run_id = created.json()["run"]["id"]
        until(lambda: bool(store.list_interactions(status="open", run_id=run_id)), 60, "the approval")
        until(lambda: _ran(store, run_id, "work") == 1, 60, "the other branch to work")
        assert _holder_pid(store, run_id) is not None  # a worker advances the run now
        (asked,) = store.list_interactions(status="open", run_id=run_id)

        answered = client.post(f"/v1/interactions/{asked.id}", json={"kind": "approve"})

        assert answered.status_code == 200, answered.text
        assert store.get_interaction(asked.id).status == "resolved"
        assert store.get_run(run_id).status == "running"  # the branch that works was not stopped
        until(lambda: store.get_run(run_id).status == "completed", 90, "the run to complete")
    assert _ran(store, run_id, "work") == 1
    assert fault_tools.executions(store_url) == {f"{run_id}:write:1": 1}


def test_a_workers_metrics_count_what_its_pool_processes_advanced(
    store: Store, queue: RunQueue, workers: Workers
) -> None:
    port = _free_port()
    workers.wait_ready(workers.start(metrics_port=port))
    run_id = submit_agent(store, queue, "agent-metrics")
    until(lambda: store.get_run(run_id).status == "waiting", 60, "the agent to ask for consent")
    # the worker may still hold the run's lease for a moment after its status says waiting: approve_open
    # skips a run it cannot take yet, so it is asked again until the approval is committed
    until(lambda: approve_open(store, queue) == 1, 30, "the consent to be committed")
    until(lambda: store.get_run(run_id).status == "completed", 60, "the agent to finish")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    ended = ("plangate_runs_ended_total", (("code", "done"), ("kind", "agent"), ("status", "completed")))
    assert samples.get(ended) == 1
    # The approval was committed here, as a server commits it, so the worker did not count it.
    assert samples.get(("plangate_consents_total", (("kind", "confirm"), ("resolution", "approve")))) is None
    assert samples.get(("plangate_tool_calls_total", (("status", "done"), ("tool", "record")))) == 1


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
