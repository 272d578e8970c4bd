"""The HTTP routes, one module per resource: runs, events, interactions, formulas and tools,
health, copilot turns (ask, turns, conversations), data sources, schedules, webhooks, limits and metrics.

For: declaring endpoints and turning requests into calls on the server's services. Not for: executing runs
(``supervisor.py``) or fanning out events (``broadcast.py``).
"""

from __future__ import annotations

from plangate.server.routes import (
    ask,
    events,
    formulas,
    health,
    interactions,
    limits,
    metrics,
    runs,
    schedules,
    sources,
    webhooks,
)

ROUTERS = (
    health.router,
    runs.router,
    events.router,
    interactions.router,
    formulas.router,
    ask.router,
    sources.router,
    metrics.router,
    schedules.router,
    webhooks.router,
    limits.router,
)
"""Every router, in the order the OpenAPI document lists them."""

__all__ = ["ROUTERS"]
