"""CPU seconds per test, whatever the machine's load: ``pytest --cpu-durations=N`` lists the N tests that
cost the most processor time (their setup, call and teardown together).

Wall-clock durations (``--durations``) on a shared machine say as much about the neighbours as about the
test. This counts the user and system time of the test process (every thread of it) and of its children
that ended and were waited for within the test (``getrusage``'s ``RUSAGE_CHILDREN``: the command lines,
servers and workers a test started and stopped). A server the session keeps (Redis, Phoenix, llama.cpp's) is
counted when the session stops it, on a line of its own (the last test's teardown, where that happens), and
a daemon (PostgreSQL's, started by pg_ctl) never: a test's use of them is not in its figure. Under
``pytest-xdist`` each worker measures its own tests and the figures travel to the controller with the
reports.

Not for: asserting timings (no test does); profiling inside a test (use ``cProfile`` or callgrind).
"""

from __future__ import annotations

import resource
from collections.abc import Generator

import pytest

_KEY = "cpu_seconds"
_SESSION_END = "cpu_seconds_session_end"  # the last test's teardown: the session's fixtures end there too


def _cpu_seconds() -> float:
    spent = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        spent += usage.ru_utime + usage.ru_stime
    return spent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("terminal reporting").addoption(
        "--cpu-durations",
        type=int,
        default=None,
        metavar="N",
        help="list the N tests that used the most CPU seconds (the process's and its children's)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    if item.config.getoption("cpu_durations") is None:
        return
    report = outcome.get_result()
    started = item.stash.get(_started, None)
    if started is not None:
        key = _SESSION_END if call.when == "teardown" and item.stash.get(_last, False) else _KEY
        report.user_properties.append((key, _cpu_seconds() - started))


_started = pytest.StashKey[float]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_started] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_started] = _cpu_seconds()
    yield


_last = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    item.stash[_started] = _cpu_seconds()
    item.stash[_last] = nextitem is None
    yield


class _Tally:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key in (_KEY, _SESSION_END):
                name = report.nodeid if key == _KEY else f"{report.nodeid} (teardown, the session's end)"
                self.seconds[name] = self.seconds.get(name, 0.0) + float(value)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        count = terminalreporter.config.getoption("cpu_durations")
        ranked = sorted(self.seconds.items(), key=lambda item: item[1], reverse=True)
        shown = ranked if count == 0 else ranked[:count]
        total = sum(self.seconds.values())
        terminalreporter.write_sep("=", f"most CPU seconds {len(shown)} (of {total:.0f} s in all)")
        for nodeid, seconds in shown:
            terminalreporter.write_line(f"{seconds:8.2f}s  {nodeid}")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("cpu_durations") is not None:
        config.pluginmanager.register(_Tally(), "cpu-durations-tally")
