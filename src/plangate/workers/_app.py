"""The Celery application both sides share: the producer (``RunQueue``) and the worker (``run_worker``).

For: one place that says how plangate uses Celery, so that what a server sends and what a worker takes
agree: the queue, the task's name, JSON only, and the delivery settings that keep a run from being lost
when a worker dies. Not for: what the task does (``advance.py``).

Why each setting: a message is acknowledged only after the run was advanced (``acks_late``), and a worker
child killed mid-task puts its message back instead of acknowledging it (``task_reject_on_worker_lost``,
celery#1628); each worker child reserves one message at a time (``worker_prefetch_multiplier = 1``), so a
killed worker strands nothing else. Redis re-delivers a message whose worker has not acknowledged it within
the visibility timeout, even when that worker is alive and busy (celery#5306, #5935): the timeout is long
(``DEFAULT_VISIBILITY_TIMEOUT``), above any advance we expect, and a re-delivered message finds the run's
lease held and is dropped, so even a longer advance never gets a second advancer. Takeover after a crash does
not wait for the timeout: the reaper re-enqueues a run whose lease expired.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plangate.errors import ConfigError

try:
    from celery import Celery
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ConfigError(
        'plangate workers need the workers extra: pip install "plangate[workers]" '
        f"({exc.name or 'celery'} is not installed)"
    ) from None

QUEUE = "plangate"
"""The queue "advance run R" messages go through."""

ADVANCE_TASK = "plangate.advance"
"""The name of the task that advances one run."""

DEFAULT_VISIBILITY_TIMEOUT = 6 * 3600.0
"""Seconds Redis waits for an acknowledgement before re-delivering a message (Celery's default: one hour)."""

BROKER_ENV = "PLANGATE_BROKER"
"""The environment variable ``plangate worker`` reads its broker URL from when ``--broker`` is not given."""

_SCHEMES = ("redis://", "rediss://", "redis+socket://")


def broker_url(url: str | None, where: str = "--broker") -> str:
    """``url`` if it names a Redis broker.

    Raises:
        ConfigError: no URL, or not a Redis one (the URL itself is not repeated: it may carry a password).
    """
    if url is None or not url.strip():
        raise ConfigError(f"{where}: expected a Redis URL (redis://host:port/0); found none")
    url = url.strip()
    if not url.lower().startswith(_SCHEMES):
        scheme = url.partition("://")[0] if "://" in url else "no scheme"
        raise ConfigError(f"{where}: expected a Redis URL (redis://host:port/0); found {scheme!r}")
    return url


def celery_app(
    url: str,
    *,
    visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    transport: Mapping[str, object] | None = None,
) -> Any:
    """A Celery application on the Redis broker at ``url`` with plangate's delivery settings.

    Args:
        transport: more options of kombu's Redis transport (``unacked_restore_interval``, ...).
    """
    app = Celery("plangate", broker=broker_url(url), set_as_current=False)
    app.conf.update(
        task_default_queue=QUEUE,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,
        result_backend=None,
        broker_transport_options={**(transport or {}), "visibility_timeout": visibility_timeout},
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a restarted Redis is waited for, however long it takes
        # A publish to a Redis that is down fails after about a second: the run is in the store already,
        # and the reaper enqueues it again once the broker is back.
        task_publish_retry_policy={"max_retries": 3, "interval_start": 0.1, "interval_step": 0.2},
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    return app


__all__ = [
    "ADVANCE_TASK",
    "BROKER_ENV",
    "DEFAULT_VISIBILITY_TIMEOUT",
    "QUEUE",
    "broker_url",
    "celery_app",
]
