"""``./dev``'s setup: extras installed once satisfy every later command that needs some of them.

The script runs for real, in a copy of what it reads (itself, ``pyproject.toml``, ``scripts/``), on a
stand-in ``.venv`` whose ``uv`` only records what it was asked to install and whose ``plangate`` only says
it ran: what is tested is whether ``./dev`` installs, not the installation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy2(REPO / "dev", root / "dev")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO / "scripts", root / "scripts")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    _script(bin_dir / "python", f'exec {sys.executable} "$@"')
    _script(bin_dir / "uv", f'echo "$*" >> {root / "installs.log"}')
    _script(bin_dir / "plangate", 'echo "plangate ran: $*"; echo "PLANGATE_PROG=$PLANGATE_PROG"')
    return root


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)


def _dev(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PLANGATE_")}
    environment.update(env)
    return subprocess.run(
        ["./dev", *args], cwd=project, env=environment, capture_output=True, text=True, timeout=120
    )


def _installs(project: Path) -> list[str]:
    log = project / "installs.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_command_needing_a_subset_of_the_installed_extras_installs_nothing(project: Path) -> None:
    # what ./dev test does first: the test extras (dev includes server, mcp, postgres, ...)
    first = _dev(project, "check-condition", PLANGATE_DEMO_EXTRAS="dev")
    assert first.returncode == 0, first.stderr
    assert len(_installs(project)) == 1 and "-e .[" in _installs(project)[0]
    assert ",server," in _installs(project)[0].replace("[", ",").replace("]", ",")

    # then the demo's extras, a subset: nothing is installed again
    again = _dev(project, "plangate", "--version", PLANGATE_DEMO_EXTRAS="server,mcp")
    assert again.returncode == 0, again.stderr
    assert "plangate ran: --version" in again.stdout
    assert len(_installs(project)) == 1


def test_an_extra_never_installed_is_installed_with_the_earlier_ones(project: Path) -> None:
    assert _dev(project, "plangate", "runs", PLANGATE_DEMO_EXTRAS="server").returncode == 0
    assert _dev(project, "plangate", "runs", PLANGATE_DEMO_EXTRAS="mcp").returncode == 0

    installs = _installs(project)
    assert len(installs) == 2
    assert installs[1].endswith("-e .[mcp,server]")  # the earlier extra kept, the new one added


def test_dev_plangate_runs_the_cli_and_names_itself_for_the_commands_it_prints(project: Path) -> None:
    done = _dev(project, "plangate", "status", "run_x", PLANGATE_DEMO_EXTRAS="server")
    assert done.returncode == 0, done.stderr
    # setup's own output never mixes into the command's stdout (run=$(./dev plangate run ... -q) works)
    assert done.stdout.splitlines() == ["plangate ran: status run_x", "PLANGATE_PROG=./dev plangate"]


def test_the_tests_setup_installs_the_tooling_groups_and_a_later_reinstall_keeps_them(project: Path) -> None:
    # ./dev test-local sets up what the tests need (its pytest then finds no tests in this copy)
    _dev(project, "test-local", PLANGATE_TEST_EXTRAS="dev")
    first = _installs(project)
    assert len(first) == 1, first
    assert "--group bench --group llama-server -e .[" in first[0]
    extras = first[0].split("-e .[", 1)[1].rstrip("]").split(",")
    assert "dev" in extras and "bench" not in extras and "llama-server" not in extras  # groups, not extras

    # the requirements change: everything is brought up to date, the groups installed before included
    with (project / "pyproject.toml").open("a", encoding="utf-8") as handle:
        handle.write("\n# changed\n")
    assert _dev(project, "plangate", "--version", PLANGATE_DEMO_EXTRAS="server").returncode == 0
    installs = _installs(project)
    assert len(installs) == 2 and "--group bench --group llama-server -e .[" in installs[1]


def test_the_setup_makes_phoenix_a_virtualenv_of_its_own_once(project: Path) -> None:
    first = _dev(project, "setup", PLANGATE_TEST_EXTRAS="dev")
    assert first.returncode == 0, first.stderr
    phoenix = [line for line in _installs(project) if ".venv-phoenix" in line]
    assert phoenix == [
        f"venv --quiet --python {project}/.venv/bin/python {project}/.venv-phoenix",
        f"pip install --quiet --python {project}/.venv-phoenix/bin/python --group phoenix",
    ]
    assert not any("--group phoenix" in line for line in _installs(project) if "-e .[" in line)  # not .venv

    again = _dev(project, "setup", PLANGATE_TEST_EXTRAS="dev")
    assert again.returncode == 0, again.stderr
    assert [line for line in _installs(project) if ".venv-phoenix" in line] == phoenix  # installed once
