"""Agent runs as the server drives them: start, resume, cancel, with the server's model and tools.

For: turning a request's settings into an ``Agent`` of the runtime (``plangate.agent``) and rebuilding the
right one for a stored run (its own tool names and model spec). Not for: scheduling the coroutines these
return (``supervisor.py``) or HTTP (``routes/``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from plangate.agent import Agent, AgentConfig, AgentResult, AgentStream
from plangate.errors import ConfigError
from plangate.interactions import Resolution
from plangate.models import Model
from plangate.server.schemas import AgentRunRequest
from plangate.store import LeaseBook, Store
from plangate.tools import ToolRegistry


class AgentRuns:
    """Builds the ``Agent`` for each agent run the server starts or continues.

    Args:
        store: the server's store.
        tools: every tool the server offers; a run gets the ones its request names (all by default).
        model: the model of runs whose request names none: a ``Model``, a spec string, or None for
            ``$PLANGATE_MODEL`` and the runtime's default.
        leases: the server's lease book: each run holds its lease while it is advanced here, and every
            commit is fenced by it.
    """

    def __init__(
        self,
        store: Store,
        tools: ToolRegistry,
        model: Model | str | None = None,
        leases: LeaseBook | None = None,
    ) -> None:
        self.store = store
        self.tools = tools
        self.model = model
        self.leases = leases

    def start(self, request: AgentRunRequest, owner: str) -> AgentStream:
        """Create the run (stored as ``queued``) and return its stream; iterating it advances the run.

        Raises:
            ConfigError: an unknown tool name, or a model that cannot be resolved.
        """
        return self._new(request, owner).stream(request.prompt)

    def submit(self, request: AgentRunRequest, owner: str) -> str:
        """Store the run with its first commit (``queued``) for a worker to advance; returns its id.

        Raises:
            ConfigError: an unknown tool name, or a model that cannot be resolved.
        """
        return self._new(request, owner).submit(request.prompt)

    async def record(self, run_id: str, interaction_id: str, resolution: Resolution, *, by: str) -> None:
        """Commit a resolution of the run's interaction and nothing more (a worker continues the run)."""
        await self._for(run_id).resolve_async(run_id, interaction_id, resolution, by=by)

    def _new(self, request: AgentRunRequest, owner: str) -> Agent:
        return Agent(
            model=request.model if request.model is not None else self.model,
            tools=self._subset(request.tools),
            store=self.store,
            max_rounds=request.max_rounds if request.max_rounds is not None else 60,
            mode=request.mode or "auto",
            always_execute=request.always_execute,
            plan_consent=request.plan_consent,
            done_when=request.done_when,
            owner=owner,
            leases=self.leases,
        )

    def resume(
        self,
        run_id: str,
        interaction_id: str | None = None,
        resolution: Resolution | None = None,
        *,
        by: str | None = None,
        resolved: Callable[[], object] | None = None,
    ) -> Coroutine[Any, Any, AgentResult]:
        """Resolve the run's interaction (when given) and continue it until it waits or ends; ``resolved``
        is called once the resolution is committed."""
        return self._for(run_id).resume_async(run_id, interaction_id, resolution, by=by, resolved=resolved)

    def cancel(self, run_id: str, reason: str) -> None:
        """End the run ``cancelled``; its open interaction expires."""
        Agent(model=None, tools=self.tools, store=self.store).cancel(run_id, reason)

    def _for(self, run_id: str) -> Agent:
        """The agent that continues a stored run: its own tools, and its own model when that can be told."""
        run = self.store.get_run(run_id)
        try:
            config = AgentConfig.model_validate(run.input.get("agent"))
        except ValueError:
            # Not readable as settings: let the runtime report the run's input in its own words.
            return Agent(model=self.model, tools=self.tools, store=self.store, leases=self.leases)
        known = [name for name in config.tools if name in self.tools]
        return Agent(
            model=self._model_of(config.model),
            tools=self._subset(known),
            store=self.store,
            owner=run.owner,
            leases=self.leases,
        )

    def _model_of(self, spec: str) -> Model | str | None:
        # A model object is reused only for the runs it started (same name); other runs rebuild theirs from
        # the spec they recorded, so a request's choice of model holds after a restart too.
        if isinstance(self.model, str):
            return self.model if self.model == spec else None
        if self.model is not None and self.model.name == spec:
            return self.model
        return None

    def _subset(self, names: list[str] | None) -> ToolRegistry:
        if names is None:
            return self.tools
        missing = [name for name in names if name not in self.tools]
        if missing:
            offered = ", ".join(self.tools.names()) or "none"
            raise ConfigError(
                f"tools: unknown tool {', '.join(map(repr, missing))}; this server offers {offered}"
            )
        return ToolRegistry([self.tools.get(name) for name in dict.fromkeys(names)])


__all__ = ["AgentRuns"]
