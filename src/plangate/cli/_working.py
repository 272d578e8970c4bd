"""What a person sees while a model works: a spinner with the phase and the seconds it has taken, and a
word when the machine is too busy for the local model to answer quickly.

For: ``Working`` (a rich spinner on stderr, only when both stdout and stderr are a terminal: nothing is
added to ``--json`` or piped output), ``phase_of`` (the phase a run's event says it is in) and
``busy_advice`` (the ``PLANGATE_LOCAL_THREADS`` advice when the load average is above the CPUs). Not for:
the lines printed for a run's events (``_events.py``, ``_ask.py``).
"""

from __future__ import annotations

import os
import time
from types import TracebackType

from rich.console import Console, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner

from plangate.cli._console import err, out
from plangate.events import Event, StatusEvent, ToolCallEvent
from plangate.models import Model

THREADS_ENV = "PLANGATE_LOCAL_THREADS"
"""``plangate.models.local.THREADS_ENV``, named here: that module needs llama-cpp-python, which the CLI does
not (a server or a remote model runs without the ``local`` extra)."""

PHASES = {
    "route": "routing the request",
    "plan": "planning",
    "execute": "working on the plan",
    "scope": "reading the data's schema",
    "generate": "writing the query",
    "check": "checking the query",
    "run": "running the query",
    "review": "reviewing the answer",
}
"""What each stage of a run's status events is called on the spinner."""


def phase_of(event: Event) -> str | None:
    """The phase ``event`` says its run is in now (None: it says nothing of one)."""
    if isinstance(event, ToolCallEvent):
        return f"calling {event.tool}"
    if isinstance(event, StatusEvent):
        return PHASES.get(event.stage)
    return None


class Working:
    """A spinner, ``<phase> · <seconds> s``, shown while a model works, on a terminal only.

    Args:
        phase: the first phase shown.
        console: where it is drawn (stderr).
        shown: whether to draw it (default: both stdout and stderr are a terminal).
    """

    def __init__(self, phase: str = "thinking", *, console: Console = err, shown: bool | None = None) -> None:
        self.phase = phase
        self.began = time.monotonic()
        self.shown = (out.is_terminal and console.is_terminal) if shown is None else shown
        self._spinner = Spinner("dots", style="cyan")
        self._live = Live(self, console=console, refresh_per_second=4, transient=True)

    def text(self) -> str:
        """What the spinner says now."""
        return f"{self.phase} · {time.monotonic() - self.began:.0f} s"

    def __rich__(self) -> RenderableType:
        self._spinner.text = escape(self.text())
        return self._spinner

    def set(self, phase: str | None) -> None:
        """Say the run is in ``phase`` now (None: unchanged)."""
        if phase:
            self.phase = phase

    def note(self, event: Event) -> None:
        """Follow the phase ``event`` names."""
        self.set(phase_of(event))

    def pause(self) -> None:
        """Stop drawing (a question is asked in the terminal)."""
        if self._live.is_started:
            self._live.stop()

    def resume(self) -> None:
        """Draw again after :meth:`pause`."""
        if self.shown and not self._live.is_started:
            self._live.start()

    def __enter__(self) -> Working:
        self.resume()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.pause()


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def busy_advice(
    model: Model | str | None, *, load: float | None = None, cpus: int | None = None
) -> str | None:
    """The advice to give when the local model runs on a machine busier than its CPUs (None: not busy, or
    not the local model, or the load cannot be read). ``load`` and ``cpus`` default to the machine's."""
    name = model.name if isinstance(model, Model) else model or ""
    local = name == "local" or name.startswith("local:")
    if not local:
        return None
    try:
        load = os.getloadavg()[0] if load is None else load
    except OSError:
        return None
    cpus = _cpus() if cpus is None else cpus
    if load <= cpus:
        return None
    threads = os.environ.get(THREADS_ENV, "").strip()
    now = f" (it is {threads})" if threads else ""
    return (
        f"the machine is busy: load average {load:.1f} on {cpus} CPU{'s' * (cpus != 1)}, so the local model "
        f"answers slowly; {THREADS_ENV}=1 keeps it to one thread, which stalls least on shared CPUs{now}"
    )


def say_if_busy(model: Model | str | None, *, json: bool) -> None:
    """Print :func:`busy_advice` on stderr when there is some (not with ``--json``)."""
    advice = None if json else busy_advice(model)
    if advice is not None:
        err.print(f"[yellow]note:[/] {escape(advice)}")


__all__ = ["PHASES", "Working", "busy_advice", "phase_of", "say_if_busy"]
