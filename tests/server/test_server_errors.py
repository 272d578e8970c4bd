"""Errors are problem documents, bodies over the limit are refused before parsing, and no client mistake is a
500."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.models import ModelUnavailableError, ScriptedModel
from plangate.store import Store

LIMIT = 1024


@pytest.fixture
def small(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    with TestClient(make_app(auth=False, max_body=LIMIT)) as opened:
        yield opened


def test_a_body_declared_over_the_limit_is_a_413_before_anything_is_parsed(
    small: TestClient, store: Store
) -> None:
    response = small.post(
        "/v1/runs", content=b"{" + b" " * LIMIT + b"}", headers={"Content-Type": "application/json"}
    )

    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == f"the request body is larger than the limit of {LIMIT} bytes"
    assert store.list_runs().items == []


def test_a_chunked_body_that_grows_over_the_limit_is_a_413(small: TestClient, store: Store) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"kind": "formula", "formula": "release", "vars": {"version": "'
        for _ in range(LIMIT // 64 + 1):
            yield b"1" * 64
        yield b'"}}'

    response = small.post("/v1/runs", content=chunks(), headers={"Content-Type": "application/json"})

    assert response.status_code == 413
    assert store.list_runs().items == []


def test_a_body_under_the_limit_goes_through(small: TestClient) -> None:
    response = small.post("/v1/formulas/check", json={"formula": "release", "vars": {"version": "1.0.0"}})

    assert response.status_code == 200
    assert response.json()["ok"] is True


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "field"),
    [
        (
            "post",
            "/v1/runs",
            {"content": b"{oops", "headers": {"Content-Type": "application/json"}},
            422,
            "body",
        ),
        ("post", "/v1/runs", {"json": []}, 422, "body"),
        ("post", "/v1/runs", {"json": {"kind": "agent"}}, 422, "body.prompt"),
        ("post", "/v1/runs", {"json": {"kind": "agent", "prompt": ""}}, 422, "body.prompt"),
        (
            "post",
            "/v1/runs",
            {"json": {"kind": "agent", "prompt": "x", "max_rounds": 0}},
            422,
            "body.max_rounds",
        ),
        (
            "post",
            "/v1/runs",
            {"json": {"kind": "formula", "formula": "release", "vars": []}},
            422,
            "body.vars",
        ),
        ("post", "/v1/formulas/check", {"json": {}}, 422, "body"),
        ("post", "/v1/formulas/check", {"json": {"formula": "a", "source": "b"}}, 422, "body"),
        ("post", "/v1/runs/run_x/cancel", {"json": {"reason": 5}}, 422, "body.reason"),
    ],
)
def test_a_malformed_request_is_a_422_naming_the_field(
    client: TestClient, method: str, path: str, kwargs: dict[str, Any], status: int, field: str
) -> None:
    response = getattr(client, method)(path, **kwargs)

    assert response.status_code == status
    problem = response.json()
    assert set(problem) >= {"type", "title", "status", "detail", "errors"}
    assert problem["status"] == status
    assert problem["errors"][0]["field"] == field
    assert problem["detail"].startswith(field)


def test_unknown_routes_and_methods_are_problem_documents(client: TestClient) -> None:
    missing = client.get("/v1/nothing-here")
    wrong = client.delete("/v1/runs")

    assert (missing.status_code, missing.json()["type"]) == (404, "urn:plangate:problem:not-found")
    assert (wrong.status_code, wrong.json()["type"]) == (405, "urn:plangate:problem:method-not-allowed")


def test_a_value_sent_in_a_bad_field_is_not_echoed(client: TestClient) -> None:
    secret = "sk-live-0123456789abcdef"

    response = client.post("/v1/runs", json={"kind": "formula", "formula": "release", "api_key": secret})

    assert response.status_code == 422
    assert secret not in response.text


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
_FIELDS = ["kind", "prompt", "formula", "vars", "model", "tools", "mode", "max_rounds", "action", "text"]
_BODIES = _JSON | st.dictionaries(
    st.sampled_from(_FIELDS), _JSON | st.sampled_from(["agent", "formula", "release", "approve"]), max_size=5
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(body=_BODIES, target=st.sampled_from(["/v1/runs", "/v1/formulas/check", "/v1/interactions/int_x"]))
def test_no_json_body_makes_the_server_fail(client: TestClient, body: Any, target: str) -> None:
    if target == "/v1/runs" and isinstance(body, dict) and body.get("kind") == "agent":
        body = {**body, "model": "nonexistent-provider:x"}  # never reach a real model
    response = client.post(target, json=body)

    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.json()["status"] == response.status_code


@pytest.mark.parametrize(
    ("target", "body", "where"),
    [
        (
            "/v1/runs",
            r'{"kind":"formula","formula":"release","vars":{"version":"1.0.0","x":"\ud800"}}',
            "vars.x",
        ),
        (
            "/v1/runs",
            r'{"kind":"formula","formula":"release","vars":{"version":"1.2.3","\uDBFF":"x"}}',
            "vars",
        ),
        (
            "/v1/runs",
            r'{"kind":"formula","formula":"release","vars":{"version":["a","b\udc00c"]}}',
            "vars.version.1",
        ),
        (
            "/v1/schedules",
            r'{"name":"s","formula":"release","every":"1m","vars":{"version":"\ud800"}}',
            "vars.version",
        ),
        ("/v1/runs/run_x/fork", r'{"at_round":1,"arguments":{"task":"\ud800"}}', "arguments.task"),
    ],
)
def test_a_string_that_is_no_text_is_a_422_naming_where(
    client: TestClient, store: Store, target: str, body: str, where: str
) -> None:
    # Before, a lone surrogate (valid JSON, no Unicode character) in a free-form field was a 500 when the
    # run's first commit encoded it.
    response = client.post(target, content=body, headers={"Content-Type": "application/json"})

    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["errors"][0]["field"] == f"body.{where}"
    assert "lone surrogate" in problem["detail"]
    assert store.list_runs().items == []


def test_a_surrogate_pair_and_an_escaped_backslash_are_text(client: TestClient, store: Store) -> None:
    vars = r'{"version":"1.0.0","emoji":"\ud83d\ude00","x":"\\ud800"}'
    body = '{"kind":"formula","formula":"release","vars":' + vars + "}"
    response = client.post("/v1/runs", content=body, headers={"Content-Type": "application/json"})

    assert response.status_code == 201, response.text
    run = store.get_run(response.json()["run"]["id"])
    stored = run.input["vars"]
    assert isinstance(stored, dict)
    assert (stored["emoji"], stored["x"]) == ("\U0001f600", "\\ud800")


def _formulas(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "broken.formula.toml").write_text('formula = "broken"\n[[steps]]\nid = "a"\nnope = 1\n')
    child = 'formula = "child"\nextends = ["missing"]\n[[steps]]\nid = "a"\n'
    (folder / "child.formula.toml").write_text(child)
    return folder


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "says"),
    [
        ("post", "/v1/runs", {"kind": "formula", "formula": "nowhere"}, 422, "'nowhere' not found in"),
        ("post", "/v1/runs", {"kind": "formula", "formula": "broken"}, 422, "broken.formula.toml: unknown"),
        ("post", "/v1/runs", {"kind": "formula", "formula": "child"}, 422, "'missing' not found in"),
        ("post", "/v1/formulas/check", {"formula": "nowhere"}, 200, "formula 'nowhere' not found in"),
        ("post", "/v1/formulas/check", {"formula": "broken"}, 200, "broken.formula.toml: unknown field"),
        ("post", "/v1/formulas/check", {"source": 'formula = "x"\nextends = ["broken"]\n'}, 200, "unknown"),
        ("get", "/v1/formulas", None, 200, "unknown field"),
    ],
)
def test_responses_never_show_the_formula_directory_or_the_server_home(
    make_app: Callable[..., FastAPI],
    workdir: Path,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    status: int,
    says: str,
) -> None:
    folder = _formulas(workdir / "secret-place" / "formulas")
    with TestClient(make_app(auth=False, search_paths=[folder])) as client, caplog.at_level(logging.INFO):
        response = client.get(path) if body is None else getattr(client, method)(path, json=body)

    assert response.status_code == status
    text = response.text
    assert says in text  # the message still tells what is wrong, and which file
    for private in (str(workdir), str(folder), str(Path.home())):
        assert private not in text
    if status == 422:
        assert str(folder) in caplog.text  # the whole message, paths included, is in the log


def test_a_formula_steps_reason_shows_no_path_of_a_model_server(
    make_app: Callable[..., FastAPI], workdir: Path
) -> None:
    folder = workdir / "formulas"
    folder.mkdir()
    text = 'formula = "ask"\n[[steps]]\nid = "q"\nllm = { prompt = "Hi?" }\n'
    (folder / "ask.formula.toml").write_text(text)
    upstream = "openai:q: HTTP 500, the provider is unavailable: cannot open /srv/models/weights/qwen.gguf"
    model = ScriptedModel([ModelUnavailableError(upstream, provider="openai:q", status=500)])
    with TestClient(make_app(auth=False, search_paths=[folder], model=model)) as client:
        run_id = client.post("/v1/runs", json={"kind": "formula", "formula": "ask"}).json()["run"]["id"]
        client.portal.call(client.app.state.services.runs.wait_idle, run_id)
        shown = client.get(f"/v1/runs/{run_id}").json()
        stream = client.get(f"/v1/runs/{run_id}/events").text

    (step,) = shown["steps"]
    assert step["status"] == "failed"
    assert "…/qwen.gguf" in step["reason"]  # which file, still
    for text in (json.dumps(shown), stream):
        assert "/srv/models" not in text


def test_a_model_file_of_the_servers_is_named_without_its_path(make_app: Callable[..., FastAPI]) -> None:
    # Before, the run's input, its outcome's usage and its stream named the file of the server's model whole.
    done = json.dumps({"action": "done", "speak": "Hello."})
    model = ScriptedModel([done, "Hello."], name="scripted:/srv/secret-place/responses.json")
    with TestClient(make_app(auth=False, model=model)) as client:
        run_id = client.post("/v1/runs", json={"kind": "agent", "prompt": "hello", "mode": "react"}).json()[
            "run"
        ]["id"]
        client.portal.call(client.app.state.services.runs.wait_idle, run_id)
        shown = client.get(f"/v1/runs/{run_id}").json()
        stream = client.get(f"/v1/runs/{run_id}/events").text

    assert shown["run"]["status"] == "completed", shown["run"]["outcome"]
    assert shown["run"]["input"]["agent"]["model"] == "scripted:…/responses.json"
    assert "scripted:…/responses.json" in shown["run"]["outcome"]["usage"]["models"]
    for text in (json.dumps(shown), stream):
        assert "/srv/secret-place" not in text
