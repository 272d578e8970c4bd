"""The scripted model of the worker tests' agent runs: a function of the request, so that any worker that
takes a run over answers the same way from where the run stands (a replayed list would start over).

In react mode the agent asks to ``record`` the label its prompt names (a write: a person's consent comes
first), then declares ``done`` once the conversation shows the write's result.
"""

from __future__ import annotations

import json
import re

from plangate.models import ModelRequest, ScriptedModel

NAME = "scripted-workers"


def respond(request: ModelRequest) -> str:
    if request.purpose != "execute":
        return "Done."
    text = "\n".join(message.content for message in request.messages)
    label = re.search(r"record the label (\S+)", text)
    wanted = label.group(1) if label else "unnamed"
    if f"recorded {wanted}" in text:
        return json.dumps({"action": "done", "speak": f"{wanted} is recorded"})
    return json.dumps({"action": "confirm", "tool_call": {"name": "record", "arguments": {"label": wanted}}})


def model() -> ScriptedModel:
    return ScriptedModel(respond, name=NAME)
