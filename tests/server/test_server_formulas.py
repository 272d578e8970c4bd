"""``/v1/formulas``, ``/v1/formulas/check`` and ``/v1/tools``: what the server runs, and checking first."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from server_helpers import write_formula


def test_formulas_on_the_search_path_are_listed_with_their_vars(client: TestClient) -> None:
    items = {item["name"]: item for item in client.get("/v1/formulas").json()["items"]}

    assert {"release", "base-release", "review", "audit"} <= set(items)
    release = items["release"]
    assert (release["type"], release["description"]) == (
        "workflow",
        "Test, build, approve and publish a release",
    )
    assert release["vars"]["version"] == {
        "description": "Version to release, like 1.4.0",
        "required": True,
        "pattern": r"^\d+\.\d+\.\d+$",
    }
    assert release["vars"]["channel"]["enum"] == ["stable", "beta"]
    assert items["review"]["type"] == "expansion"


def test_a_formula_whose_tools_the_server_lacks_says_which_and_cannot_start(client: TestClient) -> None:
    # served with tools.py alone (the example tools): plan-week also needs the demo's data and week planner
    items = {item["name"]: item for item in client.get("/v1/formulas").json()["items"]}

    assert items["plan-week"]["missing_tools"] == ["db_query", "place"]
    assert {name for name, item in items.items() if item["missing_tools"]} == {"plan-week"}
    refused = client.post("/v1/runs", json={"kind": "formula", "formula": "plan-week"})
    assert refused.status_code == 422
    assert "unknown tool 'db_query'" in refused.json()["detail"]
    assert "unknown tool 'place'" in refused.json()["detail"]


def test_the_first_formula_of_a_name_wins_and_a_broken_file_is_listed_with_its_error(
    client: TestClient, workdir: Path
) -> None:
    # ./formulas comes after the server's --path, so the examples' release wins over this one.
    write_formula(workdir / "formulas", "release", 'formula = "release"\ndescription = "shadowed"\n')
    write_formula(workdir / "formulas", "broken", 'formula = "broken"\nstepz = []\n')

    items = {item["name"]: item for item in client.get("/v1/formulas").json()["items"]}

    assert items["release"]["description"] == "Test, build, approve and publish a release"
    assert "stepz" in items["broken"]["error"]
    assert "type" not in items["broken"]


def test_checking_a_formula_by_name_reports_its_issues(client: TestClient) -> None:
    good = client.post("/v1/formulas/check", json={"formula": "release", "vars": {"version": "1.0.0"}}).json()
    bad = client.post(
        "/v1/formulas/check", json={"formula": "release", "vars": {"channel": "nightly"}}
    ).json()

    assert (good["ok"], good["steps"], good["issues"]) == (True, 4, [])
    assert bad["ok"] is False
    assert {issue["code"] for issue in bad["issues"]} == {"missing-var", "var-enum"}


def test_checking_a_formula_from_its_text(client: TestClient) -> None:
    source = """
formula = "draft"
[[steps]]
id = "a"
tool = { name = "notify", args = { message = "hi" } }
[[steps]]
id = "b"
needs = ["a"]
gate = { condition = "a.status == 'complete' and c.status == 'complete'" }
tool = { name = "shout", args = {} }
"""
    checked = client.post("/v1/formulas/check", json={"source": source}).json()

    assert (checked["formula"], checked["ok"], checked["steps"]) == ("draft", False, 2)
    assert {(i["code"], i["path"]) for i in checked["issues"]} == {
        ("unknown-step", "steps[1].gate.condition"),
        ("unknown-tool", "steps[1].tool.name"),
    }


def test_text_that_is_not_a_formula_is_reported_as_issues_not_an_error(client: TestClient) -> None:
    not_toml = client.post("/v1/formulas/check", json={"source": "formula = "})
    bad_schema = client.post(
        "/v1/formulas/check", json={"source": 'formula = "x"\n[[steps]]\nid = "a"\nneds = []\n'}
    )

    assert not_toml.status_code == 200
    assert not_toml.json()["ok"] is False
    assert not_toml.json()["issues"][0]["code"] == "load-error"
    assert "invalid TOML" in not_toml.json()["issues"][0]["message"]
    assert [(i["code"], i["path"]) for i in bad_schema.json()["issues"]] == [("schema", "steps[0].neds")]


def test_the_tool_catalogue_has_json_schemas_and_effects(client: TestClient) -> None:
    items = {item["name"]: item for item in client.get("/v1/tools").json()["items"]}

    assert items["publish"]["effect"] == "write"
    assert items["run_tests"]["effect"] == "read"
    parameters = items["publish"]["parameters"]
    assert parameters["type"] == "object"
    assert set(parameters["properties"]) == {"artifact", "channel", "owner", "notes"}
    assert parameters["required"] == ["artifact"]
    assert (items["publish"]["domain"], items["publish"]["pack"]) == ("core", "core")
