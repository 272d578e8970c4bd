"""One consent rule for every engine: what a person is asked before a write, and what consent is bound to.

For: the prompt of a consent request (``Allow place (what it does) with {…}?``), the question asked when a
write was cut off and nobody can tell whether it happened, and the digest that binds a consent to the
exact call (:func:`arguments_digest`: the SHA-256 of the arguments' canonical JSON, ``sha256:<hex>``).
An agent round and a formula step ask the same way; only where the call comes from differs (a formula
names its step). Not for: deciding that a call needs consent (the tool registry: every ``write`` tool) or
opening the interaction (each engine commits it with its own state).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import JsonValue

from plangate.decisions import digest_arguments
from plangate.tools import Tool

arguments_digest = digest_arguments
"""The digest a consent is bound to: equal arguments, whatever their key order, give equal digests."""


def consent_prompt(tool: Tool, arguments: Mapping[str, JsonValue], *, where: str | None = None) -> str:
    """What a person reads when asked to allow ``tool`` to run with ``arguments``.

    Args:
        tool: the write tool.
        arguments: the validated arguments, exactly as they will run.
        where: what asks, when the call alone does not say (``step 'publish'``).
    """
    lines = tool.description.strip().splitlines()
    about = f" ({lines[0]})" if lines else ""
    asked = f"Allow {tool.name}{about} with {_shown(arguments)}?"
    return f"{asked} ({where})" if where else asked


def unknown_prompt(tool: str, arguments: Mapping[str, JsonValue], why: str, answer: str) -> str:
    """The question asked when a write started and nobody can tell whether it happened.

    Args:
        tool: the write tool's name.
        arguments: the call's arguments.
        why: what cut it off (``the run stopped before its result was recorded``).
        answer: how to answer, in the engine's terms (an approval, or a reply in words).
    """
    return (
        f"The approved call {tool} with {_shown(arguments)} started, but {why}, so it may or may not have "
        f"happened. Please check, and {answer}"
    )


def _shown(arguments: Mapping[str, JsonValue]) -> str:
    return json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True)


__all__ = ["arguments_digest", "consent_prompt", "unknown_prompt"]
