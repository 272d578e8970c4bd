"""``RunQueue``: hand "advance run R" to the workers through the broker.

For: the server, ``plangate run | agent --broker`` and the answers given with ``--broker``: the run is in the
store first (committed), then announced. A publish that fails (the broker is down) is logged and reported,
never raised into the caller's request: the run is safe in the store, and the workers' reaper enqueues it
again once the broker is back. Not for: advancing runs (``advance.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from plangate.errors import RunError
from plangate.workers._app import ADVANCE_TASK, DEFAULT_VISIBILITY_TIMEOUT, QUEUE, celery_app

logger = logging.getLogger("plangate.workers")


class BrokerError(RunError):
    """The workers' broker cannot be reached."""


class RunQueue:
    """The producer side of the workers' queue.

    Args:
        broker: the Redis URL (``redis://host:port/0``).
        visibility_timeout: what the broker waits before re-delivering an unacknowledged message; the same
            as the workers' (a producer's setting is what Redis uses for the messages it publishes).
    """

    def __init__(self, broker: str, *, visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT) -> None:
        self.app: Any = celery_app(broker, visibility_timeout=visibility_timeout)

    def enqueue(self, run_id: str) -> bool:
        """Ask the workers to advance ``run_id`` (its root, to its next wait or its end); False when the
        broker could not be reached (logged; the reaper enqueues the run later)."""
        try:
            self.app.send_task(ADVANCE_TASK, args=[run_id], queue=QUEUE)
        except Exception as exc:  # kombu's errors for a broker that is down have no common root
            why = f"{type(exc).__name__}: {exc}"
            logger.warning("could not enqueue run %s (the reaper will): %s", run_id, why)
            return False
        return True

    def reachable(self, timeout: float = 3.0) -> None:
        """Check, once and within ``timeout`` seconds, that the broker answers (a worker that starts
        against a broker that is down would otherwise retry for ever).

        Raises:
            BrokerError: the broker cannot be reached (the URL's password is not repeated).
        """
        try:
            with self.app.connection_for_read() as connection:
                connection.ensure_connection(max_retries=0, timeout=timeout)
        except Exception as exc:  # kombu's errors for a broker that is down have no common root
            where = self.app.conf.broker_url.split("@")[-1] if self.app.conf.broker_url else "?"
            raise BrokerError(
                f"cannot reach the workers' broker at {where}: {type(exc).__name__}: {exc}; check that Redis "
                "runs and the --broker URL's host, port and password"
            ) from None

    def pending(self) -> int | None:
        """Messages in the queue or delivered and not yet acknowledged; None when the broker cannot say.

        Read from Redis's lists as Celery's Redis transport keeps them (the queue, and ``unacked``).
        """
        return self._count(lambda client: int(client.llen(QUEUE)) + int(client.hlen("unacked")))

    def waiting(self) -> int | None:
        """Messages in the queue that no worker took yet (the queue depth); None when the broker cannot
        say."""
        return self._count(lambda client: int(client.llen(QUEUE)))

    def _count(self, read: Callable[[Any], int]) -> int | None:
        try:
            with self.app.connection_for_read() as connection:
                return read(connection.default_channel.client)
        except Exception as exc:  # a broker that is down, or a transport that keeps them elsewhere
            logger.debug("could not count the queue's messages: %s", exc)
            return None

    def close(self) -> None:
        """Close the broker connections."""
        self.app.close()


__all__ = ["BrokerError", "RunQueue"]
