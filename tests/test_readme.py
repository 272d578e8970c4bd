"""README.md and every page of docs/, run as written: each ``bash`` and ``python`` block, in a fresh copy of
the repository.

For: keeping the README and the docs true (every ``docs/**/*.md`` is picked up, a page added later too).
Each block runs in its own copy of the tracked files (``.venv`` and ``.venv-phoenix`` linked, so ``./dev``
installs nothing; mypy's cache copied, so ``./dev test`` checks every file against it rather than from
nothing), with no ``PLANGATE_*`` variable set and without ``.venv/bin`` on the PATH, as on a new user's
machine. The blocks share nothing, so a parallel run spreads them over its workers. An HTML comment right
above a block says what the test does where a block cannot run as is (``<!-- readme-test: A | B -->``):

- ``env NAME=VALUE``: run it with that variable (the scripted model where a key would be needed);
- ``replace OLD => NEW``: run it with ``OLD`` replaced (``./dev test`` is only collected: this test is in it);
- ``parse (why)``: only parse it (it needs a real model's key or server);
- ``serve``: start it with a free ``--port`` added to its ``serve`` line, probe it, stop it (and all it
  started);
- ``needs postgres``: skipped with ``PLANGATE_TEST_POSTGRES=off``, as the other PostgreSQL tests (the
  servers it starts with ``./dev services`` are stopped, whatever happens);
- ``local model (why)``: it runs the bundled model, so its test is a ``local_model`` test (``./dev
  test-local``; deselected with ``-m "not local_model"``).

Also here: the demo the README describes, continued with the commands it prints. Not for: what the blocks
do in detail (the tests of each part).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spread]

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
BLOCK_TIMEOUT = 420
"""Seconds a block may take (``./dev test --collect-only`` runs ruff and a cold mypy)."""
LOCAL_BLOCK_TIMEOUT = 900
"""Seconds a block on the bundled model may take (a copilot turn on a loaded two-core machine: minutes)."""

_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"^<!-- readme-test: (.*) -->$")
_KNOWN = ("env", "replace", "parse", "serve", "needs", "local")


def pages() -> list[Path]:
    """The files whose blocks run: README.md, then every page of docs/ (sub-folders included), sorted."""
    return [README, *sorted(DOCS.rglob("*.md"))]


@dataclass
class Block:
    """A fenced block of a page: its language, its text, where it starts, and what the test does."""

    lang: str
    code: str
    line: int
    directives: list[tuple[str, str]] = field(default_factory=list)
    page: str = "README.md"

    @property
    def id(self) -> str:
        prefix = "" if self.page == "README.md" else f"{self.page}:"
        return f"{prefix}{self.lang}-line{self.line}"

    @property
    def where(self) -> str:
        """The page and line, as messages name them (``docs/agents.md line 12``)."""
        return f"{self.page} line {self.line}"

    def env(self) -> dict[str, str]:
        found = {}
        for key, value in self.directives:
            if key == "env":
                name, _, setting = value.partition("=")
                found[name] = setting
        return found

    def has(self, key: str) -> bool:
        return any(k == key for k, _ in self.directives)

    def text(self) -> str:
        code = self.code
        for key, value in self.directives:
            if key == "replace":
                old, _, new = value.partition(" => ")
                assert old in code, f"{self.where}: nothing to replace: {old!r}"
                code = code.replace(old, new)
        return code


def page_blocks(path: Path) -> list[Block]:
    """Every fenced block of the page ``path``, with the directive of the comment right above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(REPO).as_posix()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        start = index
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
        directive = _DIRECTIVE.match(lines[start - 1]) if start > 0 else None
        parts = [part.strip() for part in directive.group(1).split(" | ")] if directive else []
        directives = [(part.split(" ", 1)[0], part.partition(" ")[2]) for part in parts]
        code = "\n".join(lines[start + 1 : end]) + "\n"
        found.append(Block(match.group(1), code, start + 1, directives, page))
        index = end + 1
    return found


def readme_blocks() -> list[Block]:
    """Every fenced block of README.md and of the docs pages, page by page."""
    return [block for path in pages() for block in page_blocks(path)]


RUNNABLE = [block for block in readme_blocks() if block.lang in ("bash", "python")]


def test_the_readme_has_runnable_blocks_and_every_mark_is_known() -> None:
    assert len([block for block in RUNNABLE if block.page == "README.md"]) >= 4, [b.id for b in RUNNABLE]
    assert len(RUNNABLE) >= 20, [block.id for block in RUNNABLE]
    for block in readme_blocks():
        for key, _ in block.directives:
            assert key in _KNOWN, f"{block.where}: unknown readme-test mark {key!r}"
        if block.lang not in ("bash", "python", "toml", "text"):
            pytest.fail(f"{block.where}: tagged {block.lang!r}; tag it bash, python, toml or text")
    for block in RUNNABLE:
        assert ".venv/bin/plangate" not in block.code, f"{block.where}: use ./dev plangate"


def test_the_runner_picks_up_every_docs_page() -> None:
    found = {block.page for block in readme_blocks()}
    with_blocks = {
        path.relative_to(REPO).as_posix() for path in pages() if "```" in path.read_text(encoding="utf-8")
    }
    assert with_blocks <= found
    assert "docs/getting-started.md" in found


@pytest.mark.parametrize("block", [b for b in readme_blocks() if b.lang == "toml"], ids=lambda b: b.id)
def test_every_toml_block_parses(block: Block) -> None:
    tomllib.loads(block.code)


# -- the copy of the repository ------------------------------------------------------------------------------


def _tracked_files() -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("the README tests copy the repository's tracked files: run them in a git checkout")
    return [name for name in listed.decode().split("\0") if name]


def _installed_extras() -> set[str]:
    stamp = REPO / ".venv" / ".plangate-setup"
    if not stamp.is_file():
        return set()
    parts = stamp.read_text().split()
    return set(parts[1].split(",")) if len(parts) > 1 else set()


def _setup_is_current() -> bool:
    """Whether ``.venv`` was set up for the requirements as they are now (the hash ``./dev`` records).

    Otherwise ``./dev`` in the copy would reinstall the project, editable, from the copy: the real
    ``.venv`` would then import plangate from a temporary folder that is gone once the test ends.
    """
    stamp = REPO / ".venv" / ".plangate-setup"
    if not stamp.is_file():
        return False
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "scripts/build_llama_cpp.sh"):
        digest.update((REPO / name).read_bytes())
    recorded = stamp.read_text().split()
    return bool(recorded) and recorded[0] == digest.hexdigest()[:16]


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A copy of the tracked files; its ``.venv`` and ``.venv-phoenix`` are the real ones (so ``./dev``
    installs nothing) and its ``.mypy_cache`` a copy of the real one, when there is one: mypy compares each
    file with the cache by its hash, so the verdict is the same, without the half minute of a cold start."""
    if not {"local", "server", "postgres", "mcp"} <= _installed_extras() or not _setup_is_current():
        pytest.fail(
            "the README tests run ./dev as a user would: set up with ./dev setup first, again after "
            "pyproject.toml changed (it records the requirements and the extras installed in "
            f"{REPO / '.venv' / '.plangate-setup'})"
        )
    root = tmp_path / "plangate"
    for name in _tracked_files():
        source = REPO / name
        if source.is_file():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    (root / ".venv").symlink_to(REPO / ".venv", target_is_directory=True)
    if (REPO / ".venv-phoenix").is_dir():
        (root / ".venv-phoenix").symlink_to(REPO / ".venv-phoenix", target_is_directory=True)
    if (REPO / ".mypy_cache").is_dir():
        # a copy: mypy in the copy rewrites what it read, and the real cache is not the block's to change
        shutil.copytree(REPO / ".mypy_cache", root / ".mypy_cache")
    return root


def user_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a new user: nothing of plangate's set, ``.venv/bin`` not on the PATH."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PLANGATE_")}
    venv_bin = str(REPO / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep) if part != venv_bin)
    env.pop("VIRTUAL_ENV", None)
    # the test session's own settings, not a user's (a parallel run keeps the local model to one thread:
    # parallel_plugin.py)
    for key in (
        "PLANGATE_TEST_POSTGRES",
        "PLANGATE_TEST_POSTGRES_URL",
        "PLANGATE_CHROMIUM",
        "PLANGATE_LOCAL_THREADS",
    ):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(extra or {})
    return env


def run_bash(script: str, cwd: Path, env: dict[str, str], timeout: float = BLOCK_TIMEOUT) -> str:
    """Run ``script`` with ``bash -euo pipefail`` (a failing command fails the block); returns its output."""
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the block ran past {timeout} s:\n{script}\n{exc.stdout}\n{exc.stderr}")
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"exit {done.returncode}:\n{script}\n--- output ---\n{output}"
    assert "Traceback" not in output, output
    return output


# -- the blocks ---------------------------------------------------------------------------------------------


def _params() -> list[object]:
    marks = {True: [pytest.mark.local_model, pytest.mark.timeout(LOCAL_BLOCK_TIMEOUT + 60)], False: []}
    return [pytest.param(block, id=block.id, marks=marks[block.has("local")]) for block in RUNNABLE]


@pytest.mark.parametrize("block", _params())
def test_every_block_runs_as_written(block: Block, request: pytest.FixtureRequest) -> None:
    if block.has("needs") and os.environ.get("PLANGATE_TEST_POSTGRES", "").lower() == "off":
        pytest.skip("PLANGATE_TEST_POSTGRES=off: no PostgreSQL for this block")
    if block.has("parse"):
        _parse(block)  # no copy of the repository needed
        return
    sandbox: Path = request.getfixturevalue("sandbox")
    env = user_env(block.env())
    timeout = LOCAL_BLOCK_TIMEOUT if block.has("local") else BLOCK_TIMEOUT
    try:
        if block.has("serve"):
            _serve(block, sandbox, env)
        elif block.lang == "python":
            script = sandbox / f"block_line{block.line}.py"
            script.write_text(block.text(), encoding="utf-8")
            python = shlex.quote(str(REPO / ".venv" / "bin" / "python"))
            run_bash(f"{python} {script.name}", sandbox, env, timeout)
        else:
            run_bash(block.text(), sandbox, env, timeout)
    finally:
        if block.has("needs"):
            # a block that failed half-way must not leave its servers running
            stop = ["./dev", "services", "stop"]
            subprocess.run(stop, cwd=sandbox, env=env, capture_output=True, timeout=120)


def _parse(block: Block) -> None:
    if block.lang == "bash":
        checked = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr
    else:
        compile(block.code, f"{block.page}:{block.line}", "exec")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _serve(block: Block, sandbox: Path, env: dict[str, str]) -> None:
    port = _free_port()
    lines = [_with_port(line, port) if " serve " in line else line for line in block.text().splitlines()]
    assert any(f"--port {port}" in line for line in lines), "the serve block has no serve line"
    log = sandbox / "serve.log"
    with log.open("w") as output:
        server = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", "\n".join(lines)],
            cwd=sandbox,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_ready(base, server, log)
        with httpx.Client(base_url=base, timeout=30) as http:
            assert http.get("/v1/runs").status_code == 401  # a token is needed ...
            assert "Start a run" in http.get("/").text  # ... the console is served
            if "token create" not in block.code:
                return
            # The token is the one line the block's `token create` printed on its own.
            printed = log.read_text().splitlines()
            token = next((line.strip() for line in printed if line.startswith("pg_")), "")
            assert token, log.read_text()
            headers = {"Authorization": f"Bearer {token}"}
            if "[[sources]]" in block.code:
                _assert_declared_sources_listed(http, headers, block.code, log)
                return
            listed = http.get("/v1/formulas", headers=headers).json()["items"]
        names = {item["name"]: item for item in listed}
        assert "plan-week" in names and "release" in names
        if "demo_tools.py" in block.code:
            # served with the demo's tools, every formula the console offers can start
            missing = {name: item["missing_tools"] for name, item in names.items() if item["missing_tools"]}
            assert missing == {}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def _assert_declared_sources_listed(
    http: httpx.Client, headers: dict[str, str], code: str, log: Path
) -> None:
    """Every ``[[sources]]`` name the block declares is listed, opened and described, for the token's
    owner."""
    declared = set(re.findall(r'^name = "([^"]+)"', code, re.MULTILINE))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        items = http.get("/v1/sources", headers=headers).json()["items"]
        shown = {item["name"]: item for item in items if item["declared"]}
        if set(shown) == declared and all(item["tables"] > 0 for item in shown.values()):
            return
        time.sleep(0.2)
    pytest.fail(f"the declared sources {sorted(declared)} were not listed with tables:\n{log.read_text()}")


def _with_port(line: str, port: int) -> str:
    """The serve line with ``--port``, before its line continuation when it has one."""
    if line.rstrip().endswith("\\"):
        return f"{line.rstrip()[:-1].rstrip()} --port {port} \\"
    return f"{line} --port {port}"


def _wait_ready(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the server stopped (exit {server.returncode}):\n{log.read_text()}")
        try:
            # a probe has no token: /readyz needs none
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"the server did not answer /readyz within 120 s:\n{log.read_text()}")


# -- the demo, continued as it says -------------------------------------------------------------------------


def _printed_command(output: str) -> str:
    """The first command a run printed to continue it (``answer with: CMD  |  ...``)."""
    found = re.search(r"answer with: (.+?)(?:  \|  |$)", output, re.MULTILINE)
    assert found is not None, output
    return found.group(1)


def _demo_env(script: str) -> dict[str, str]:
    return user_env({"PLANGATE_MODEL": f"scripted:tests/readme/{script}"})


def test_the_demo_says_what_happened_and_goes_on_with_the_commands_it_prints(sandbox: Path) -> None:
    output = run_bash("./dev demo", sandbox, _demo_env("demo.json"))

    assert "■ revenue complete: db_query: 5 rows" in output
    assert "? approval Revenue by region for 2026-06" in output
    approve = _printed_command(output)
    assert approve.startswith("./dev plangate approve int_"), approve

    # the printed command runs as printed: the agent step's round, its question
    output = run_bash(approve, sandbox, _demo_env("demo.json"))
    assert "schedule › round 1 consent place" in output
    assert '? confirm Allow place (Put an unplaced task on the calendar.) with {"day": "wed"' in output
    consent = _printed_command(output)
    assert consent.startswith("./dev plangate approve int_"), consent

    # a started agent step goes on with the model it recorded, unless --model names another
    output = run_bash(f"{consent} --model scripted:tests/readme/demo-done.json", sandbox, user_env())
    lines = output.splitlines()
    assert 'schedule ›   ↳ place {"day": "wed", "slot": "09:00", "task": "review"}' in lines
    assert "schedule ›   ← place review wed 09:00-10:00" in lines
    assert "schedule › outcome: completed (proven)" in lines  # its done_when holds: the placement ran
    assert re.search(r"^run run_\S+ completed: all 3 steps finished( · .+)?$", output, re.MULTILINE), output

    # a second demo starts from a fresh week: its write is not refused as already_placed
    output = run_bash("./dev demo", sandbox, _demo_env("demo.json"))
    output = run_bash(_printed_command(output), sandbox, _demo_env("demo.json"))
    done = f"{_printed_command(output)} --model scripted:tests/readme/demo-done.json"
    output = run_bash(done, sandbox, user_env())
    assert "already_placed" not in output
    assert "schedule ›   ← place review wed 09:00-10:00" in output.splitlines()


@pytest.mark.local_model
@pytest.mark.timeout(3 * LOCAL_BLOCK_TIMEOUT)
def test_the_demo_completes_on_the_default_model_as_getting_started_says(sandbox: Path) -> None:
    """docs/getting-started.md: on the bundled model, the demo's approval, one placement request, then
    ``outcome: completed (proven)`` (one thread, as that page advises for a busy machine)."""
    env = user_env({"PLANGATE_LOCAL_THREADS": "1"})
    output = run_bash("./dev demo", sandbox, env, LOCAL_BLOCK_TIMEOUT)
    assert "? approval Revenue by region for 2026-06" in output
    output = run_bash(_printed_command(output), sandbox, env, LOCAL_BLOCK_TIMEOUT)
    assert "? confirm Allow place" in output, output
    output = run_bash(_printed_command(output), sandbox, env, LOCAL_BLOCK_TIMEOUT)
    assert "schedule › outcome: completed (proven)" in output.splitlines(), output
    assert re.search(r"^run run_\S+ completed: all 3 steps finished( · .+)?$", output, re.MULTILINE), output
