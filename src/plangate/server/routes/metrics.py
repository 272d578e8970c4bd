"""``GET /metrics``: the process's Prometheus metrics (``plangate.runs.telemetry.metrics``).

For: a Prometheus scrape. It takes the same bearer token as the API (Prometheus sends one with
``authorization: {credentials: …}``): the counts name tools and models, which an operator may not want shown
to anyone who can reach the port, and one port with one token is simpler to run than a second listener. Not
for: the metrics themselves.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from plangate.errors import ConfigError
from plangate.runs.telemetry import metrics
from plangate.server._deps import OwnerDep, ServicesDep
from plangate.server._problems import Problem

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_model=None, summary="Prometheus metrics of the runs this process advanced")
def get_metrics(services: ServicesDep, owner: OwnerDep) -> Response:
    """The metrics in Prometheus's text format, or a 404 problem without the ``metrics`` extra."""
    try:
        counted = metrics.enable()
    except ConfigError as exc:
        raise Problem(404, "metrics-unavailable", str(exc)) from None
    counted.sse_subscribers.set(services.broadcaster.subscribers())
    return Response(counted.text(), media_type=metrics.CONTENT_TYPE)


__all__ = ["router"]
