"""The week planner's data: tasks, fixed events, the record of applied writes, and the stored state.

For: what a week is made of and how it is stored (a JSON document with a schema version; a newer version is
refused). Not for: the rules that move tasks (``planner.py``) or reading and writing the store (``store.py``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, model_validator

from plangate.errors import SchemaVersionError
from plangate.tools.schedule._calendar import DAYS_PER_WEEK, SLOTS_PER_DAY

STATE_VERSION = 1
"""The format version of :class:`ScheduleState` this code writes and reads."""

MAX_TASK_SLOTS = 4

ItemId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,40}$")]
Day = Annotated[int, Field(ge=0, le=DAYS_PER_WEEK - 1)]
Slot = Annotated[int, Field(ge=0, le=SLOTS_PER_DAY - 1)]
Title = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Placement(_Model):
    """Where a task sits: a day (0 = mon) and its first slot (0 = 08:00)."""

    day: Day
    slot: Slot


class Task(_Model):
    """Work to schedule: one to four consecutive one-hour slots on one day.

    Attributes:
        id: unique across the week's tasks and events (``t3``).
        title: what the task is.
        duration: how many consecutive slots it takes, 1-4.
        kind: its class (``deep``, ``meeting``, ``admin``, ``personal``); ``class`` in JSON.
        deadline: the last day (0-6) it may be on, or None.
        placement: where it is, or None while unplaced.
    """

    id: ItemId
    title: Title
    duration: Annotated[int, Field(ge=1, le=MAX_TASK_SLOTS)]
    kind: Annotated[str, StringConstraints(min_length=1, max_length=40)] = Field(alias="class")
    deadline: Day | None = None
    placement: Placement | None = None

    @model_validator(mode="after")
    def _inside_the_day(self) -> Task:
        if self.placement is not None and self.placement.slot + self.duration > SLOTS_PER_DAY:
            raise ValueError(
                f"task {self.id!r} of {self.duration} slots cannot start at slot {self.placement.slot}: "
                f"the day has {SLOTS_PER_DAY} slots"
            )
        return self


class FixedEvent(_Model):
    """Something already in the calendar that the planner never moves (a meeting, an appointment)."""

    id: ItemId
    title: Title
    day: Day
    start: Slot
    duration: Annotated[int, Field(ge=1, le=SLOTS_PER_DAY)]

    @model_validator(mode="after")
    def _inside_the_day(self) -> FixedEvent:
        if self.start + self.duration > SLOTS_PER_DAY:
            raise ValueError(
                f"event {self.id!r} of {self.duration} slots cannot start at slot {self.start}: "
                f"the day has {SLOTS_PER_DAY} slots"
            )
        return self


class AppliedWrite(_Model):
    """A write that changed the week under an idempotency key, with the result it reported.

    Attributes:
        key: the idempotency key the runtime gave the call (the consent's interaction id).
        tool: the write tool's name.
        arguments_digest: the digest of the call's validated arguments.
        result: the tool result, as JSON, returned again when the same key comes back.
    """

    key: str
    tool: str
    arguments_digest: str
    result: dict[str, JsonValue]


class ScheduleState(_Model):
    """A week as stored: tasks, fixed events and the keys of recent writes.

    Attributes:
        schema_version: the format version; a state written by a newer plangate is refused.
        tasks: the tasks, in the order they were added.
        events: the fixed events.
        applied: the most recent writes made under an idempotency key, oldest first.
    """

    schema_version: int = STATE_VERSION
    tasks: tuple[Task, ...] = ()
    events: tuple[FixedEvent, ...] = ()
    applied: tuple[AppliedWrite, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _known_version(cls, value: Any) -> Any:
        if isinstance(value, dict):
            version = value.get("schema_version", STATE_VERSION)
            if isinstance(version, int) and version > STATE_VERSION:
                raise SchemaVersionError(
                    f"the week planner state has format version {version}; this plangate reads up to "
                    f"version {STATE_VERSION}: upgrade plangate"
                )
        return value

    def to_json(self) -> dict[str, JsonValue]:
        """The state as the JSON object stored in the document (``class`` spelled as such)."""
        return self.model_dump(mode="json", by_alias=True)


__all__ = [
    "MAX_TASK_SLOTS",
    "STATE_VERSION",
    "AppliedWrite",
    "FixedEvent",
    "Placement",
    "ScheduleState",
    "Task",
]
