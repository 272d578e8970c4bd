"""What the agent tests share: decision builders for both wires, tools that count their calls, a store."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from plangate.agent import Agent
from plangate.events import Event
from plangate.models import ScriptedModel, Wire
from plangate.store import SQLiteStore, Store
from plangate.tools import ToolRegistry, ToolResult, tool


def decision(action: str, *, wire: Wire = "json", reply: str = "", **fields: Any) -> str:
    """A model's execute answer on ``wire`` (tagged: the decision in its tag, then ``reply``)."""
    text = json.dumps({"action": action, **fields})
    if wire == "tagged":
        return f"<decision>{text}</decision>{reply}"
    return text


def call(name: str, wire: Wire = "json", action: str = "continue", **arguments: Any) -> str:
    """An answer that calls tool ``name`` with ``arguments``."""
    return decision(action, wire=wire, tool_call={"name": name, "arguments": arguments})


def plan(*steps: tuple[str, str], wire: Wire = "json", **fields: Any) -> str:
    """A planner's ``plan_done`` answer with ``(content, done_when)`` steps."""
    data = {"action": "plan_done", "plan_steps": [{"content": c, "done_when": d} for c, d in steps], **fields}
    text = json.dumps(data)
    return f"<decision>{text}</decision>" if wire == "tagged" else text


def route(name: str, reply: str | None = None) -> str:
    """A route answer."""
    return json.dumps({"route": name, "reply": reply})


@dataclass
class Desk:
    """The test tools and what they were asked to do."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    registry: ToolRegistry = field(default_factory=ToolRegistry)
    reconciled: list[str] = field(default_factory=list)
    done_keys: dict[str, ToolResult] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def make_desk(*, reconcile: bool = False, crash_on_write: bool = False) -> Desk:
    """A ``lookup`` read tool, a ``place`` write tool, and an ``echo`` read tool returning a constant.

    ``crash_on_write`` makes ``place`` die like a killed process (a ``BaseException``) before it returns;
    ``reconcile`` gives ``place`` a hook that reports the writes it recorded by idempotency key.
    """
    desk = Desk()

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        desk.calls.append(("lookup", {"query": query}))
        return f"found {query}"

    @tool
    def echo(text: str) -> str:
        """Always says the same."""
        desk.calls.append(("echo", {"text": text}))
        return "same answer"

    def remembered(key: str) -> ToolResult | None:
        desk.reconciled.append(key)
        return desk.done_keys.get(key)

    @tool(effect="write", reconcile=remembered if reconcile else None)
    def place(task: str, slot: int) -> str:
        """Place a task in a slot."""
        from plangate.tools import current_call

        desk.calls.append(("place", {"task": task, "slot": slot}))
        context = current_call()
        result = ToolResult.done(f"placed {task} at {slot}")
        if context is not None and context.idempotency_key is not None:
            desk.done_keys[context.idempotency_key] = result
        if crash_on_write:
            raise SimulatedCrash("the process died while the write ran")
        return result.observation

    for item in (lookup, echo, place):
        desk.registry.register(item)
    return desk


class SimulatedCrash(BaseException):
    """Stands for a process killed mid-call: not an ``Exception``, so nothing in the runtime catches it."""


def memory_store() -> SQLiteStore:
    return SQLiteStore(":memory:")


def agent(
    responses: list[str] | ScriptedModel,
    desk: Desk | None = None,
    store: Store | None = None,
    *,
    wire: Wire = "json",
    **options: Any,
) -> tuple[Agent, ScriptedModel]:
    """An agent on a scripted model (a list of answers, or a model) and the desk's tools."""
    model = responses if isinstance(responses, ScriptedModel) else ScriptedModel(responses, wire=wire)
    tools = (desk or make_desk()).registry
    return Agent(model=model, tools=tools, store=store or memory_store(), **options), model


def of_type(events: list[Event], kind: str) -> list[Any]:
    return [event for event in events if event.type == kind]
