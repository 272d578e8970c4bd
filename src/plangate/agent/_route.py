"""The route phase: one model call decides whether to reply directly, plan, or act without a plan.

For: ``run_route``. An answer that cannot be read routes to ``plan`` (SPEC §4), and so does a model that
fails: planning is the careful path, and the plan phase reports a model that keeps failing. Two failures
end the run here instead, with the plan phase's outcome (``model_error``): a timeout (the next call would
wait as long again, which is why the providers do not retry it) and refused credentials (the next call
would be refused too). A run whose goal
is a ``done_when`` condition does not take ``reply``: it acts, since only receipts can prove its goal. The
call does not consume a round of the budget. Not for: ``mode="plan"`` / ``"react"`` runs, which skip this
phase.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from plangate.agent._batch import Batch
from plangate.agent._calls import call, read_route, route_schema
from plangate.agent._context import route_context
from plangate.agent._outcomes import model_failed
from plangate.agent.result import Outcome
from plangate.events import StatusEvent
from plangate.models import ModelAuthenticationError, ModelTimeoutError

if TYPE_CHECKING:
    from plangate.agent._runcontext import RunContext

logger = logging.getLogger(__name__)


async def run_route(loop: RunContext) -> None:
    """Pick the run's path and commit it."""
    answer = await call(loop.model, "route", route_context(loop.view()).messages(), schema=route_schema())
    route = None if answer.failure is not None else read_route(answer.text)
    state = loop.state
    if isinstance(answer.failure, ModelTimeoutError | ModelAuthenticationError):
        logger.warning("run %s: the route call failed: %s", loop.run_id, answer.failure)
        loop.end(model_failed("route", answer.failure))
        await loop.commit(Batch())
        return
    if route is None:
        why = "the route could not be read"
        if answer.failure is not None:
            # The provider's own words go to the log only: they can name the model server's files.
            logger.warning("run %s: the route call failed: %s", loop.run_id, answer.failure)
            why = f"the model failed ({type(answer.failure).__name__})"
        event = StatusEvent(stage="route", code="plan", text=f"planning, since {why}")
        state.phase = "plan"
    elif route.route == "reply" and loop.goal is not None:
        # A direct reply proves nothing: a run whose goal is a condition on its evidence must act for it.
        text = f"acting, since the goal {loop.goal.expression} needs evidence a direct reply cannot give"
        event = StatusEvent(stage="route", code="execute", text=text)
        state.phase = "execute"
    elif route.route == "reply" and loop.output is not None:
        # A typed answer is validated where the model declares done: a direct reply skips that check.
        text = "acting, since the answer must fit the output type and a direct reply is not checked"
        event = StatusEvent(stage="route", code="execute", text=text)
        state.phase = "execute"
    elif route.route == "reply":
        event = StatusEvent(stage="route", code="reply", text="answering directly")
        state.answer = route.reply
        loop.end(Outcome(status="completed", stage="route", code="replied", user_message=route.reply or ""))
    else:
        text = "planning first" if route.route == "plan" else "acting step by step, without a plan"
        event = StatusEvent(stage="route", code=route.route, text=text)
        state.phase = route.route
    await loop.commit(Batch([event]))


__all__ = ["run_route"]
