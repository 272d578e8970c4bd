"""Throwaway PostgreSQL and Redis servers in a temporary folder, on free loopback ports.

For: the test session (``tests/services_plugin.py`` starts them once and stops them at the end) and
developers (``./dev services`` starts both and prints their URLs; ``./dev services stop`` stops them).
Not for: production servers. Only the standard library, so it runs before the project is installed.

PostgreSQL refuses to run as root: when this runs as root, the cluster belongs to the ``postgres`` user
(made by Debian's package), else to ``nobody``. Both servers listen on 127.0.0.1 only, trust local
connections (no password), and keep nothing worth keeping: PostgreSQL without fsync (a commit survives
the server's crash, not the machine's), Redis without snapshots or an append-only file.

Usage::

    python scripts/services.py start [--state FILE] [--env]   # start both, print the URLs (--env: only as
                                                              # export lines, for eval), remember them in FILE
    python scripts/services.py stop [--state FILE]            # stop what start started, delete its folder
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_STATE = Path(".plangate") / "services.json"
# Redis processes this process started, kept so that they are waited for (a dropped Popen of a live process
# is a ResourceWarning) and stopped by the same object that started them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
POSTGRES_USER = "plangate"
POSTGRES_DB = "plangate"
_START_TIMEOUT = 60


class ServiceError(RuntimeError):
    """A server could not be found, started or stopped; the message says which and why."""


# -- finding programs and ports ------------------------------------------------------------------------------


def postgres_bin() -> Path:
    """The folder of PostgreSQL's server programs (``initdb``, ``pg_ctl``): on PATH, else Debian's place."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    # Debian keeps the server programs out of PATH, one folder per major version; the newest wins.
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name)
    )
    if candidates:
        return candidates[-1].parent
    raise ServiceError(
        "PostgreSQL's server programs (initdb, pg_ctl) were not found on PATH nor in /usr/lib/postgresql; "
        "install them (Debian: apt-get install postgresql-15, which ./dev does as root)"
    )


def redis_bin() -> Path:
    """The ``redis-server`` program."""
    found = shutil.which("redis-server")
    if found is None:
        raise ServiceError(
            "redis-server was not found on PATH; install it (Debian: apt-get install redis-server, which "
            "./dev does as root)"
        )
    return Path(found)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _service_user() -> pwd.struct_passwd | None:
    """Who runs PostgreSQL when this process is root (None when it is not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServiceError("running as root, and no 'postgres' nor 'nobody' user exists to run PostgreSQL as")


# -- PostgreSQL ----------------------------------------------------------------------------------------------


@dataclass
class Postgres:
    """A PostgreSQL cluster started by ``Postgres.start``: where it lives and how to reach it."""

    folder: str
    bin: str
    port: int
    uid: int | None = None
    gid: int | None = None

    @property
    def data(self) -> Path:
        return Path(self.folder) / "data"

    @property
    def url(self) -> str:
        """The URL of the ``plangate`` database (user ``plangate``, no password)."""
        return self.database_url(POSTGRES_DB)

    def database_url(self, database: str) -> str:
        """The URL of one of the cluster's databases."""
        return f"postgresql://{POSTGRES_USER}@127.0.0.1:{self.port}/{database}"

    @classmethod
    def start(cls, folder: Path) -> Postgres:
        """Make a cluster in ``folder/data`` and start it on a free port, with a ``plangate`` database.

        Raises:
            ServiceError: initdb or the server failed; the message carries their output.
        """
        user = _service_user()
        folder.mkdir(parents=True, exist_ok=True)
        try:
            return cls._started(folder, user)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # a server that did not start leaves nothing behind
            raise

    @classmethod
    def _started(cls, folder: Path, user: pwd.struct_passwd | None) -> Postgres:
        if user is not None:
            os.chown(folder, user.pw_uid, user.pw_gid)
        server = cls(
            str(folder),
            str(postgres_bin()),
            0,
            None if user is None else user.pw_uid,
            None if user is None else user.pw_gid,
        )
        # fmt: off
        server._run(
            "initdb", "-D", str(server.data), "-U", POSTGRES_USER, "-A", "trust", "-E", "UTF8",
            "--locale=C", "--no-sync", "--no-instructions",
        )
        # fmt: on
        for attempt in range(3):
            server.port = free_port()
            try:
                server.pg_ctl("start")
                break
            except ServiceError:
                if attempt == 2:
                    raise  # a port taken between the probe and the start is the usual cause: try another
        try:
            server._run(
                "createdb", "-h", "127.0.0.1", "-p", str(server.port), "-U", POSTGRES_USER, POSTGRES_DB
            )
        except BaseException:
            server.pg_ctl("stop", mode="immediate")
            raise
        return server

    def pg_ctl(self, action: str, *, mode: str = "fast") -> None:
        """``start``, ``stop`` or ``restart`` the server (``mode``: fast or immediate, as for pg_ctl)."""
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off "
            "-c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB"
        )
        args = ["pg_ctl", "-D", str(self.data), "-l", str(Path(self.folder) / "postgres.log"), "-w"]
        args += ["-t", str(_START_TIMEOUT), "-s"]
        if action in ("stop", "restart"):
            args += ["-m", mode]
        if action in ("start", "restart"):
            args += ["-o", options]
        self._run(*args, action)

    def stop(self) -> None:
        """Stop the server (if it runs) and delete its folder."""
        try:
            if (self.data / "postmaster.pid").exists():
                self.pg_ctl("stop", mode="immediate")  # no shutdown checkpoint: the data goes anyway
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [str(Path(self.bin) / program), *args]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=_START_TIMEOUT + 30,
                cwd=self.folder,
                env={**os.environ, "HOME": self.folder, "LC_ALL": "C"},
                user=self.uid,
                group=self.gid,
                extra_groups=[] if self.uid is not None else None,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServiceError(f"{program} failed: {exc}") from None
        if done.returncode != 0:
            log = Path(self.folder) / "postgres.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ServiceError(
                f"{program} {' '.join(args)} exited with {done.returncode}: {done.stderr.strip()}"
                + (f"\n-- server log:\n{tail}" if tail else "")
            )


# -- Redis ---------------------------------------------------------------------------------------------------


@dataclass
class Redis:
    """A Redis server started by ``Redis.start`` (no persistence), and how to reach it."""

    folder: str
    port: int
    pid: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @classmethod
    def start(cls, folder: Path) -> Redis:
        """Start redis-server on a free port with its files in ``folder``; wait until it answers PING.

        Raises:
            ServiceError: it did not start or did not answer in time.
        """
        folder.mkdir(parents=True, exist_ok=True)
        program = redis_bin()
        for attempt in range(3):
            port = free_port()
            # fmt: off
            command = [
                str(program), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(folder), "--logfile", str(folder / "redis.log"),
                "--daemonize", "no",
            ]
            # fmt: on
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # outlives ./dev services; stopped by pid
            )
            server = cls(str(folder), port, process.pid)
            deadline = time.monotonic() + _START_TIMEOUT
            while time.monotonic() < deadline and process.poll() is None:
                if ping(server.port):
                    _CHILDREN[process.pid] = process
                    return server
                time.sleep(0.05)
            if process.poll() is None:
                process.kill()
            process.wait()
            if attempt == 2:
                log = folder / "redis.log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                shutil.rmtree(folder, ignore_errors=True)
                raise ServiceError(f"redis-server did not answer PING on port {port}:\n{tail}")
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop the server (if it runs) and delete its folder."""
        child = _CHILDREN.pop(self.pid, None)
        try:
            if child is not None:
                child.terminate()
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                return
            os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(self.pid):
                time.sleep(0.02)
            if _alive(self.pid):
                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def ping(port: int, timeout: float = 1.0) -> bool:
    """Whether a Redis server on 127.0.0.1:``port`` answers PING with PONG."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False  # our own child, now reaped
    except ChildProcessError:
        pass  # not our child (started by an earlier ./dev services): ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- the command line ----------------------------------------------------------------------------------------


def new_folder(prefix: str = "plangate-services-") -> Path:
    """A fresh temporary folder (in the system's temp dir, which a non-root PostgreSQL user can reach)."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def start(state: Path) -> dict[str, str]:
    """Start both servers, remember them in ``state``; their URLs."""
    if state.exists():
        raise ServiceError(
            f"services are already running (see {state}); stop them first with ./dev services stop"
        )
    folder = new_folder()
    os.chmod(folder, 0o755)  # the PostgreSQL user (not root) must reach its own subfolder
    try:
        postgres = Postgres.start(folder / "postgres")
        try:
            redis = Redis.start(folder / "redis")
        except BaseException:
            postgres.stop()
            raise
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(
        json.dumps({"folder": str(folder), "postgres": asdict(postgres), "redis": asdict(redis)}, indent=2)
    )
    return {"postgres": postgres.url, "redis": redis.url}


def stop(state: Path) -> bool:
    """Stop what ``start`` started (False when nothing was started)."""
    if not state.exists():
        return False
    saved = json.loads(state.read_text())
    try:
        Postgres(**saved["postgres"]).stop()
    finally:
        Redis(**saved["redis"]).stop()
        shutil.rmtree(saved["folder"], ignore_errors=True)
        state.unlink()
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Throwaway PostgreSQL and Redis servers for development.")
    parser.add_argument("action", choices=["start", "stop"], nargs="?", default="start")
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE, help="where to remember them")
    parser.add_argument("--env", action="store_true", help="print only export lines (for eval)")
    options = parser.parse_args(argv)
    try:
        if options.action == "stop":
            stopped = stop(options.state)
            print("services stopped" if stopped else f"no services were started ({options.state})")
            return 0
        urls = start(options.state)
    except ServiceError as exc:
        print(f"services: {exc}", file=sys.stderr)
        return 1
    exports = (
        f"export PLANGATE_STORE={urls['postgres']}\n"
        f"export PLANGATE_BROKER={urls['redis']}\n"
        f"export PLANGATE_TEST_POSTGRES={urls['postgres']}\n"
        f"export PLANGATE_TEST_REDIS={urls['redis']}"
    )
    if options.env:
        print(exports)
        print("services: stop them with ./dev services stop", file=sys.stderr)
        return 0
    print(f"PostgreSQL: {urls['postgres']}")
    print(f"Redis:      {urls['redis']}")
    print("\nTo use them (the store, and the tests instead of servers of their own):")
    print(exports)
    print("\nStop them with: ./dev services stop")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
