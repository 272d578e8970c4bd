"""Keeping a week planner in the run store: one document per planner, written by compare-and-set.

For: loading a :class:`~plangate.tools.schedule.planner.Planner` from namespace ``schedule`` (key = the
planner id) and saving it so that two writers never lose each other's changes: a write that finds the week
changed since it was read is retried on the new week, or refused. Not for: the rules (``planner.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from plangate.errors import ConfigError, StoreError
from plangate.store import DocumentConflict, Documents, Store
from plangate.tools.schedule.models import ScheduleState
from plangate.tools.schedule.planner import Planner

NAMESPACE = "schedule"
MAX_ATTEMPTS = 5
"""How many times :meth:`ScheduleStore.update` rereads and reapplies a change that met another writer."""

T = TypeVar("T")


class ScheduleStore:
    """One week planner in a :class:`~plangate.store.Store`.

    Args:
        store: where the week lives.
        planner_id: the document key; one store can hold many weeks.

    Raises:
        ConfigError: ``planner_id`` is empty.
    """

    def __init__(self, store: Store, planner_id: str = "default") -> None:
        if not isinstance(planner_id, str) or not planner_id:
            raise ConfigError(f"planner_id: expected a non-empty string, got {planner_id!r}")
        self.store = store
        self.planner_id = planner_id

    def load(self) -> tuple[Planner, int | None]:
        """The week as stored and the document version it came from (None: nothing stored, an empty week).

        Raises:
            StoreError: the stored document is not a week this plangate can read.
            SchemaVersionError: it was written by a newer plangate.
        """
        document = Documents(self.store).get(NAMESPACE, self.planner_id)
        if document is None:
            return Planner(), None
        try:
            planner = Planner(ScheduleState.model_validate(document.value))
        except (ValidationError, ConfigError) as exc:
            raise StoreError(
                f"the week planner {self.planner_id!r} (document version {document.version}) cannot be "
                f"read: {exc}"
            ) from None
        return planner, document.version

    def save(self, planner: Planner, *, expected_version: int | None) -> int:
        """Store ``planner`` if the document is still at ``expected_version``; returns the new version.

        Raises:
            DocumentConflict: another writer saved first; nothing changed.
        """
        document = Documents(self.store).put(
            NAMESPACE, self.planner_id, planner.state.to_json(), expected_version=expected_version
        )
        return document.version

    def update(self, change: Callable[[Planner], T], *, attempts: int = MAX_ATTEMPTS) -> T:
        """Load the week, apply ``change``, and save it if it changed; on a conflict, start over.

        ``change`` may run more than once, each time on the week as stored at that moment, so it must depend
        on nothing but the planner it is given. An exception it raises (a refusal) saves nothing.

        Returns:
            What the last run of ``change`` returned.

        Raises:
            DocumentConflict: other writers won every one of ``attempts`` tries.
        """
        for attempt in range(1, attempts + 1):
            planner, version = self.load()
            before = planner.state
            outcome = change(planner)
            if planner.state == before:
                return outcome
            try:
                self.save(planner, expected_version=version)
            except DocumentConflict:
                if attempt == attempts:
                    raise
                continue
            return outcome
        raise ConfigError(f"attempts: expected at least 1, got {attempts!r}")

    def replace(self, state: ScheduleState) -> int:
        """Store ``state`` as the whole week, whatever was there; returns the new document version."""
        while True:
            current = Documents(self.store).get(NAMESPACE, self.planner_id)
            expected = None if current is None else current.version
            try:
                return self.save(Planner(state), expected_version=expected)
            except DocumentConflict:
                # Someone wrote in between; replacing means their week goes too, so just read again.
                continue


__all__ = ["MAX_ATTEMPTS", "NAMESPACE", "ScheduleStore"]
