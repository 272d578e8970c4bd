"""The prompt style: chosen once per run from the model (compact for a model that asks for compact prompts,
full for any other), and the only thing the phases ask about the model: a run driven by a style of the
test's own does exactly what that style says, on any model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from agent_helpers import agent, call, decision

from plangate.agent._context import FULL, Context, Entry, View, history
from plangate.agent._style import PromptStyle, prompt_style
from plangate.agent._tokens import Meter, MeteredModel
from plangate.agent._transcript import Act
from plangate.agent.result import Outcome
from plangate.agent.small import COMPACT
from plangate.conditions import Condition
from plangate.models import ModelRequest, ScriptedModel
from plangate.models.anthropic import AnthropicModel
from plangate.models.local import LocalModel
from plangate.models.openai import OpenAIModel
from plangate.tools import Tool


class Compact(ScriptedModel):
    """A scripted model that asks for compact prompts, counting how often it is asked."""

    def __init__(self, responses: list[str]) -> None:
        super().__init__(responses)
        self.asked = 0

    @property
    def compact_prompts(self) -> bool:
        self.asked += 1
        return True


class Full(Compact):
    @property
    def compact_prompts(self) -> bool:
        self.asked += 1
        return False


class Truthy(ScriptedModel):
    compact_prompts = "yes"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: Compact([]), COMPACT),
        (LocalModel, COMPACT),
        (lambda: MeteredModel(Compact([]), Meter()), COMPACT),
        (lambda: ScriptedModel([]), FULL),
        (lambda: LocalModel(compact_prompts=False), FULL),
        (lambda: Truthy([]), FULL),
        (lambda: OpenAIModel("gpt-4o-mini", api_key="sk-test-key-123456"), FULL),
        (lambda: AnthropicModel("claude-test", api_key="sk-ant-test-123456"), FULL),
    ],
    ids=[
        "compact",
        "local",
        "metered-compact",
        "scripted",
        "local-full",
        "truthy-not-true",
        "openai",
        "anthropic",
    ],
)
def test_a_model_that_asks_for_compact_prompts_gets_the_compact_style_any_other_the_full_one(
    make: Callable[[], object], expected: PromptStyle
) -> None:
    assert prompt_style(make()) is expected


@pytest.mark.parametrize("kind", [Compact, Full])
def test_a_run_asks_its_model_for_its_style_once(kind: type[Compact]) -> None:
    script = [
        call("lookup", query="week"),
        call("echo", text="a"),
        decision("done", speak="Mon is free."),
        "ok",
    ]
    model = kind(script)
    runner, _ = agent(model, mode="react", max_rounds=5, infer_goal=False)  # the model says done
    result = runner.run("What is free?")
    assert result.status == "completed"
    assert len([r for r in model.requests if r.purpose == "execute"]) == 3
    assert model.asked == 1


# -- the phases do what the run's style says, on any model ------------------------------------------------


class Own:
    """A style of the test's own, unlike either real one: if a phase asked the model (or the style's type)
    anything, the run's prompts, offered tools and closing message would not be these."""

    name = "own"

    def catalogue(self, entries: Sequence[Entry], goal: Condition | None, hint: Sequence[str] = ()) -> str:
        return "TOOLS: " + " ".join(str(entry["name"]) for entry in entries)

    def execute_context(self, view: View) -> Context:
        return Context(f"OWN RULES\n{view.catalogue}", history(view), ())

    def offered_tools(self, active: Sequence[Tool], view: View) -> list[Tool]:
        return [item for item in active if item.name == ("echo" if view.transcript.acts else "lookup")]

    def argument_sources(self, view: View) -> list[str]:
        return ["OWN SOURCES"]

    def closing_text(self, outcome: Outcome, acts: Sequence[Act]) -> str | None:
        return f"Closed by the style after {len(acts)} calls."


def _executes(model: ScriptedModel) -> list[ModelRequest]:
    return [request for request in model.requests if request.purpose == "execute"]


@pytest.mark.parametrize("kind", [ScriptedModel, Compact])
def test_a_run_does_exactly_what_its_style_says_on_any_model(
    kind: type[ScriptedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    own = Own()
    monkeypatch.setattr("plangate.agent.loop.prompt_style", lambda model: own)
    model = kind([call("lookup", query="week"), call("echo", text="a"), decision("done", speak="Done.")])
    runner, _ = agent(model, mode="react", max_rounds=5)
    result = runner.run("What is free?")

    assert result.status == "completed" and result.answer == "Closed by the style after 2 calls."
    executes = _executes(model)
    assert [r.messages[0].content for r in executes] == ["OWN RULES\nTOOLS: lookup echo place"] * 3
    assert [list(r.tool_names or ()) for r in executes] == [["lookup"], ["echo"], ["echo"]]
    assert [r.purpose for r in model.requests] == ["execute"] * 3  # no deliver call: the style closed it
