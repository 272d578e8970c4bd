"""What the HTTP API shows of the text the server and its engines wrote: no server paths, no internal reasons.

For: the one filter every response and every streamed event goes through on its way out. An absolute path
(the formula directory, a formula file, a model server's files named in its error) becomes ``…/`` and its
last part, which still tells a person which file is meant; an outcome's ``internal_reason`` is left out
(SPEC §7: it stays in the store and the log). Not for: tool observations and model replies, which are the
run's data and are shown as they are, nor the log, which keeps everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import JsonValue

from plangate.events import Event, GateEvent, OutcomeEvent, StatusEvent, StepStateEvent

# An absolute POSIX path: a '/' that does not follow a word, a path, a scheme, a port or a path shortened
# already ('…/x': the filter is applied twice unchanged), so URLs, 'a/b' and 'approve / reject' are left
# alone; then one or more parts, unless it is a route of this API ('/v1/sources', which messages name).
_ABSOLUTE_PATH = re.compile(r"(?<![\w/.~:…-])(?!/v1/)(?:/[\w.@+~-]+)+/?")
# A model named by its file on the server (``scripted:/…/responses.json``, ``local:/…/model.gguf``): the path
# follows the provider's colon, where the pattern above leaves text alone (a URL's).
_MODEL_FILE = re.compile(r"(?<![\w-])((?:scripted|local):)((?:/[\w.@+~-]+)+)")

# The fields of server-written events whose text may quote a path.
_TEXT_FIELDS: dict[type[Event], tuple[str, ...]] = {
    StatusEvent: ("text",),
    StepStateEvent: ("reason",),
    GateEvent: ("reason",),
    OutcomeEvent: ("user_message",),
}


def public_text(text: str) -> str:
    """``text`` with every absolute path shortened to ``…/<last part>``, a model file's too."""
    if "/" not in text:
        return text
    text = _MODEL_FILE.sub(lambda found: found.group(1) + _last_part(found.group(2)), text)
    return _ABSOLUTE_PATH.sub(_shorten, text)


def _last_part(path: str) -> str:
    parts = [part for part in path.split("/") if part]
    return f"…/{parts[-1]}" if parts else path


def public_usage(usage: JsonValue) -> JsonValue:
    """A run's usage as clients see it: its models named without a file's path (``scripted:…/x.json``)."""
    models = usage.get("models") if isinstance(usage, dict) else None
    if not isinstance(usage, dict) or not isinstance(models, dict):
        return usage
    return {**usage, "models": {public_text(name): value for name, value in models.items()}}


def _shorten(match: re.Match[str]) -> str:
    return _last_part(match.group(0))


def public_outcome(outcome: Mapping[str, JsonValue] | None) -> dict[str, JsonValue] | None:
    """A stored outcome as clients see it: without ``internal_reason``, its message filtered."""
    if outcome is None:
        return None
    shown = {key: value for key, value in outcome.items() if key != "internal_reason"}
    message = shown.get("user_message")
    if isinstance(message, str):
        shown["user_message"] = public_text(message)
    if "usage" in shown:
        shown["usage"] = public_usage(shown["usage"])
    return shown


def public_event(event: Event) -> Event:
    """The event as clients see it (a copy when anything had to change)."""
    fields = _TEXT_FIELDS.get(type(event))
    if fields is None:
        return event
    update: dict[str, object] = {}
    for name in fields:
        value = getattr(event, name)
        if isinstance(value, str) and public_text(value) != value:
            update[name] = public_text(value)
    if isinstance(event, OutcomeEvent) and event.internal_reason:
        update["internal_reason"] = ""
    if isinstance(event, OutcomeEvent) and event.usage is not None:
        usage = public_usage(event.usage)
        if usage != event.usage:
            update["usage"] = usage
    return event.model_copy(update=update) if update else event


def public_event_json(event: Event) -> str:
    """The flat JSON form of an event as clients see it (no ``internal_reason`` key at all)."""
    shown = public_event(event)
    if isinstance(shown, OutcomeEvent):
        return shown.model_dump_json(exclude={"internal_reason"})
    return shown.model_dump_json()


def public_event_dict(event: Event) -> dict[str, JsonValue]:
    """The flat JSON form of an event as a dict, as clients see it."""
    shown = public_event(event)
    exclude = {"internal_reason"} if isinstance(shown, OutcomeEvent) else None
    data: dict[str, JsonValue] = shown.model_dump(mode="json", exclude=exclude)
    return data


__all__ = [
    "public_event",
    "public_event_dict",
    "public_event_json",
    "public_outcome",
    "public_text",
    "public_usage",
]
