"""The run contract: what every engine implements, so nothing above this layer asks what kind a run is.

For: ``RunEngine``, the one surface of agent, formula and copilot runs once they exist — advance a run to
its next wait or its end, take a person's answer, cancel, say whether a run needs advancing, say which tools
it may call — and ``Engines``, the registry that finds the engine of a run by its kind. Creating a run stays
each engine's own call (a formula needs a plan, an agent a prompt, a turn a question); everything after
that goes through this contract. The engines whose runs travel in time say so with the protocols of their
own: ``ForkingEngine`` (a fork or a retry from a point, and where one came from: its ``Origin``) and
``ReplayingEngine`` (a finished run re-executed offline against its record: ``Replayed``). Not for:
scheduling the work (``executor.py``) or the facade the interfaces use (``facade.py``).

Every engine holds the run's lease while it advances a run and fences every commit by it, whatever the
kind: two processes never advance one run, and one that lost the lease commits nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from pydantic import JsonValue

from plangate.errors import ConfigError
from plangate.interactions import Resolution
from plangate.runs.diff import Diff
from plangate.store import Interaction, RunRecord, Transaction
from plangate.tools import ToolRegistry
from plangate.vocab import RunKind, RunStatus

Transactions = Callable[[str], AbstractContextManager[Transaction]]
"""Opens a transaction on a run: ``store.transaction``, or a lease book's, fenced by the lease it holds."""


@dataclass(frozen=True, slots=True)
class Answered:
    """Where a person's answer went, once it is committed (or handed to the process advancing its run).

    Attributes:
        run_id: the run whose step or round asked (an agent step's agent answers for its formula run).
        continuing: something already advances the run with the answer (a live scheduler here, or the
            process holding its lease); False: the run's root must be advanced for the answer to act.
    """

    run_id: str
    continuing: bool


class RunEngine(Protocol):
    """One kind of run: how it is advanced, answered, cancelled and recovered.

    Attributes:
        kind: the kind of run it advances.
        remote: whether workers (``plangate worker``) advance runs of this kind; a kind that is not remote
            is advanced only by the process that started it, and its recovery is that process's too.
        tools: the tools this process offers runs of this kind.
    """

    kind: RunKind
    remote: bool
    tools: ToolRegistry

    async def advance(self, run_id: str) -> RunStatus:
        """Advance the run (a root) to its next wait or its end, under its lease; returns its status then.

        A run whose recorded tools differ from this process's is left ``waiting`` with that reason.

        Raises:
            RunLeased: another live process advances it; nothing changed.
        """
        ...

    async def answer(self, interaction: Interaction, resolution: Resolution, by: str | None) -> Answered:
        """Commit a person's answer to the run's open interaction (or hand it to the live process that
        advances the run), without running what it allows: that runs where the run is advanced next.

        Raises:
            StaleInteraction: it is not open any more; nothing changed.
            InteractionError: the resolution does not fit; nothing changed.
        """
        ...

    def cancel(self, run_id: str, reason: str) -> None:
        """End the run ``cancelled``, with its unfinished sub-runs; its open interaction expires.

        Raises:
            InteractionError: it ended already.
        """
        ...

    def due(self, run: RunRecord) -> bool:
        """Whether a root run needs advancing now (not ended, and not waiting on a person with nothing
        new)."""
        ...

    def tool_names(self, run: RunRecord) -> list[str]:
        """The tools the run may call (what a process needs to advance it)."""
        ...

    def describe(self, run: RunRecord) -> dict[str, JsonValue]:
        """What a run's page shows besides its record, by the engine's own names (a formula's ``steps``);
        empty when there is nothing more."""
        ...


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a fork or a retry comes from, as the engine of its kind reads it from the run.

    Attributes:
        run_id: the run it was made from.
        relation: ``fork`` (an agent run's, before a round) or ``retry`` (a formula run's, from a step).
        at: the point, in words (``before round 2``, ``from step build``).
    """

    run_id: str
    relation: Literal["fork", "retry"]
    at: str

    def as_json(self) -> dict[str, JsonValue]:
        """The origin as the API and ``--json`` show it."""
        return {"run_id": self.run_id, "relation": self.relation, "at": self.at}


@dataclass(frozen=True, slots=True)
class Replayed:
    """A replay's verdict: a finished run re-executed offline, aligned with its record.

    Attributes:
        run_id: the recorded run.
        replay_id: the replay's run, in the replay's own store (in memory: gone afterwards).
        status: how the replay ended (``waiting``: it asked what the record never answered).
        diff: the record and the replay aligned (by round or by step); ``diff.first`` is the first point
            where the runtime behaved otherwise, or None.
    """

    run_id: str
    replay_id: str
    status: str
    diff: Diff

    @property
    def reproduced(self) -> bool:
        """Whether the runtime behaved as the record says, point by point, to the same outcome."""
        return self.diff.first is None

    def as_json(self) -> dict[str, JsonValue]:
        """The verdict as ``--json`` prints it: the diff, whether it reproduced, how the replay ended."""
        data = self.diff.as_json()
        data.update({"reproduced": self.reproduced, "status": self.status})
        return data


@runtime_checkable
class ForkingEngine(Protocol):
    """An engine whose runs can be forked: a new run whose history is the origin's up to a point."""

    def fork(self, run: RunRecord, request: Mapping[str, JsonValue]) -> str:
        """Store a fork of ``run`` (``queued``: whoever advances it next starts it); returns its id.

        ``request`` holds the point and the changes by the engine's own names (an agent's ``at_round``,
        ``at_event``, ``instruction``, ``model``, ``arguments``, ``always_execute``).

        Raises:
            InteractionError: there is no such point in the run, or nothing to change there.
            ConfigError: a request value is invalid.
        """
        ...

    def origin(self, run: RunRecord) -> Origin | None:
        """Where ``run`` was forked or retried from, and at which point (None: it was not)."""
        ...


@runtime_checkable
class ReplayingEngine(Protocol):
    """An engine whose finished runs can be replayed offline: the runtime of this process re-executes the
    run with what its record holds (the model's outputs, the tools' results, the people's answers), no
    write called, no network, and says where it now behaves otherwise."""

    async def replay(self, run: RunRecord) -> Replayed:
        """Replay the finished ``run`` in a store of its own and compare it with its record.

        Raises:
            InteractionError: the run has not ended.
            ConfigError: this process lacks one of its tools (its schema is needed to replay it).
        """
        ...


@runtime_checkable
class ChangeAwareEngine(Protocol):
    """An engine that can tell when what a run was started from changed since (a formula's file)."""

    def changed(self, run: RunRecord) -> str | None:
        """Why the run's source differs now from what it was started from, in words; None if it does not
        (or cannot be told)."""
        ...


class Engines:
    """The engines of this process, by the kind of run each advances.

    Raises:
        ConfigError: two engines for one kind.
    """

    def __init__(self, engines: Iterable[RunEngine]) -> None:
        self._by_kind: dict[str, RunEngine] = {}
        for engine in engines:
            if engine.kind in self._by_kind:
                raise ConfigError(f"two engines for {engine.kind} runs")
            self._by_kind[engine.kind] = engine

    def of(self, run: RunRecord) -> RunEngine:
        """The engine of ``run``.

        Raises:
            ConfigError: this process has no engine for its kind.
        """
        return self.for_kind(run.kind)

    def for_kind(self, kind: str) -> RunEngine:
        """The engine of runs of ``kind``.

        Raises:
            ConfigError: this process has none.
        """
        try:
            return self._by_kind[kind]
        except KeyError:
            known = ", ".join(self._by_kind) or "none"
            raise ConfigError(f"this process advances no {kind} runs (it has engines for: {known})") from None

    def __contains__(self, kind: object) -> bool:
        return kind in self._by_kind

    def __iter__(self) -> Iterator[RunEngine]:
        return iter(self._by_kind.values())


__all__ = [
    "Answered",
    "ChangeAwareEngine",
    "Engines",
    "ForkingEngine",
    "Origin",
    "Replayed",
    "ReplayingEngine",
    "RunEngine",
    "Transactions",
]
