"""No traceback for what a user can cause: every command, run as a real process against a PostgreSQL store
nobody listens on, a SQLite store in a missing folder and in a read-only one, a broker nobody listens on and
a tools file that does not exist, prints one ``error:`` line saying what to do and exits with a documented
code (``plangate.cli._console``: 2 a mistake, 3 a store or broker that cannot be used). A command that reads
runs never creates the store it looked for, and names it."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from plangate.cli._console import EXIT_UNREACHABLE, EXIT_USAGE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # some 70 real processes in all

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "formulas"
TOOLS = f"{EXAMPLES / 'tools.py'}:registry"
PLANGATE = str(Path(sys.executable).parent / "plangate")
NO_POSTGRES = "postgresql://nobody@127.0.0.1:{port}/nodb"
NO_BROKER = "redis://127.0.0.1:{port}/0"
DOCUMENTED = {0, 1, EXIT_USAGE, EXIT_UNREACHABLE, 4}

READING = [
    ["status", "run_x"],
    ["runs"],
    ["events", "run_x"],
    ["approve", "run_x"],
    ["reject", "run_x"],
    ["answer", "run_x", "yes"],
    ["resume", "run_x"],
    ["cancel", "run_x"],
    ["complete", "run_x", "step"],
]


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "done.json").write_text(json.dumps([json.dumps({"action": "done"}), "Done."]), "utf-8")
    return tmp_path


def creating(home: Path) -> list[list[str]]:
    """The commands that create runs (or serve them), each able to start on its own."""
    model = f"scripted:{home / 'done.json'}"
    return [
        ["run", "release", "--path", str(EXAMPLES), "--tools", TOOLS, "--var", "version=1.4.0", "--detach"],
        ["agent", "Say hello", "-m", model, "--mode", "react", "--detach"],
        ["ask", "How many orders are there?", "-m", model],
        ["serve", "--port", str(closed_port())],
        ["worker", "--broker", NO_BROKER.format(port=closed_port())],
    ]


def env_of(home: Path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith(("PLANGATE_", "OPENAI_", "ANTHROPIC_"))}
    values.update(PLANGATE_MODEL=f"scripted:{home / 'done.json'}", HOME=str(home))
    return values


def run_all(
    home: Path, commands: list[list[str]]
) -> list[tuple[list[str], subprocess.CompletedProcess[str]]]:
    """Each command as its own ``plangate`` process, a few at a time, each bounded in time."""

    def one(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PLANGATE, *args], env=env_of(home), cwd=home, capture_output=True, text=True, timeout=120
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(zip(commands, pool.map(one, commands), strict=True))


def assert_one_message(args: list[str], done: subprocess.CompletedProcess[str], *, says: str) -> None:
    said = done.stdout + done.stderr
    assert "Traceback" not in said, f"{args}: {said}"
    assert done.returncode in DOCUMENTED - {0}, f"{args}: exit {done.returncode}: {said}"
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, f"{args}: {done.stderr}"
    assert says in errors[0], f"{args}: {errors[0]}"


def test_an_unreachable_postgresql_store_is_one_message_and_exit_3(home: Path) -> None:
    store = NO_POSTGRES.format(port=closed_port())
    commands = [[*c, "--store", store] for c in READING + creating(home)]
    for args, done in run_all(home, commands):
        assert_one_message(args, done, says="cannot connect to the store at")
        assert done.returncode == EXIT_UNREACHABLE, args
        assert "error connecting" not in done.stderr  # no log line of the pool beside the message


def test_a_store_in_a_missing_folder_is_not_created_by_a_command_that_reads(home: Path) -> None:
    path = home / "missing" / "runs.db"
    commands = [[*c, "--store", f"sqlite:///{path}"] for c in READING]
    for args, done in run_all(home, commands):
        assert_one_message(args, done, says=f"no store at {path} (nothing was created there)")
        assert done.returncode == EXIT_USAGE, args
    assert not (home / "missing").exists()


def test_an_empty_file_is_no_store_to_a_command_that_reads_and_stays_empty(home: Path) -> None:
    # Before, a reading command made a store of it (260 KB of tables in a file named by mistake).
    path = home / "empty.db"
    path.touch()
    for args, done in run_all(home, [[*c, "--store", str(path)] for c in READING]):
        assert_one_message(args, done, says=f"no store at {path} (an empty file) (nothing was created there)")
        assert done.returncode == EXIT_USAGE, args
    assert path.stat().st_size == 0


def test_a_database_of_other_tables_is_refused_by_every_command_and_left_as_it_was(home: Path) -> None:
    path = home / "data.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
    conn.close()
    before = path.read_bytes()
    commands = [[*c, "--store", str(path)] for c in READING + creating(home)[:3]]
    for args, done in run_all(home, commands):
        assert_one_message(args, done, says="is not a plangate store: it holds other tables (orders)")
    assert path.read_bytes() == before


def test_a_command_that_creates_runs_makes_the_missing_folder_and_goes_on(home: Path) -> None:
    path = home / "new" / "runs.db"
    run, agent, ask = creating(home)[:3]
    for args, done in run_all(home, [[*c, "--store", f"sqlite:///{path}"] for c in (run, agent, ask)]):
        assert "Traceback" not in done.stderr, f"{args}: {done.stderr}"
        assert done.returncode in DOCUMENTED, f"{args}: {done.stderr}"
    assert path.is_file()


def read_only_folder(home: Path) -> Path:
    """A folder this process cannot write in: a chmod'ed one, or (as root, whom permissions do not stop)
    a read-only file system's."""
    folder = home / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").touch()
    except OSError:
        return folder
    (folder / "probe").unlink()
    for candidate in (Path("/sys"), Path("/proc")):
        try:
            (candidate / "plangate-probe.db").touch()
        except OSError:
            return candidate
    pytest.skip("no folder this process cannot write in")


def test_a_store_in_a_read_only_folder_is_one_message(home: Path) -> None:
    path = read_only_folder(home) / "runs.db"
    for args, done in run_all(home, [[*c, "--store", str(path)] for c in READING + creating(home)[:4]]):
        reading = args[0] in {c[0] for c in READING}
        assert_one_message(args, done, says="no store at" if reading else "check that the folder exists")
        assert done.returncode == (EXIT_USAGE if reading else EXIT_UNREACHABLE), args


def test_an_unreachable_broker_is_one_message_or_the_run_waits_for_the_reaper(home: Path) -> None:
    broker = NO_BROKER.format(port=closed_port())
    store = f"sqlite:///{home / 'runs.db'}"
    run, agent = creating(home)[:2]
    started = run_all(home, [[*c, "--store", store, "--broker", broker] for c in (run, agent)])
    for args, done in started:
        # the run is stored; the broker being down is said, and the workers' reaper hands it on later
        assert done.returncode == 0, f"{args}: {done.stderr}"
        assert "Traceback" not in done.stderr and "the reaper" in done.stdout + done.stderr, args
    worker = ["worker", "--broker", broker.replace("//", "//:s3cret@"), "--store", store]
    approve = ["approve", "run_x", "--broker", broker, "--store", store]
    (_, stopped), (_, refused) = run_all(home, [worker, approve])
    assert_one_message(worker, stopped, says="cannot reach the workers' broker at 127.0.0.1:")
    assert stopped.returncode == EXIT_UNREACHABLE
    assert "s3cret" not in stopped.stderr
    assert_one_message(approve, refused, says=f"no interaction and no run 'run_x' in the store at {home}")


def test_a_missing_tools_file_is_one_message_and_exit_2(home: Path) -> None:
    missing = f"{home / 'nowhere' / 'tools.py'}:registry"
    store = f"sqlite:///{home / 'runs.db'}"
    model = f"scripted:{home / 'done.json'}"
    commands = [
        ["run", "release", "--path", str(EXAMPLES), "--var", "version=1.4.0", "--store", store],
        ["agent", "Say hello", "-m", model, "--store", store],
        ["formula", "check", "release", "--path", str(EXAMPLES), "--var", "version=1.4.0"],
        ["serve", "--port", str(closed_port()), "--store", store],
        ["worker", "--broker", NO_BROKER.format(port=closed_port()), "--store", store],
    ]
    for args, done in run_all(home, [[*c, "--tools", missing] for c in commands]):
        assert_one_message(args, done, says=f"no such file '{home / 'nowhere' / 'tools.py'}'")
        assert done.returncode == EXIT_USAGE, args
