"""Sending webhooks: the deliveries due claimed, signed (Standard Webhooks) and posted, retried with backoff.

For: ``DeliverySettings`` (``[webhooks]``: the timeout of an attempt, the backoff, how long to keep trying,
whether private addresses are allowed) and ``Deliverer``, whose ``run_pass`` claims the deliveries due and
makes one attempt of each, a few at once. Every server and every worker runs one (``forever``, on a thread):
none is special, a claim gives each attempt to one of them, and one that dies mid-attempt leaves the
delivery to be claimed again once its claim lapsed, under the same ``webhook-id``. Not for: what is owed
(``_outbox.py``) or where a URL may point (``_address.py``).

An attempt posts the stored payload as it is, with ``webhook-id`` (the delivery's id, the same on every
attempt), ``webhook-timestamp`` (the attempt's time) and ``webhook-signature`` (``v1,`` and the base64
HMAC-SHA256 of ``id.timestamp.body`` under the endpoint's secret, by the ``standardwebhooks`` library). A
2xx answer delivers it; anything else (another status, a redirect, a timeout, a refused address) is
retried after ``backoff`` doubled at each attempt, up to ``max_backoff``, with jitter (half of the delay
drawn at random, so retries of many deliveries spread out), until ``give_up_after`` seconds since the
event: then it is ``failed``.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import secrets
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
from standardwebhooks import Webhook

from plangate import __version__
from plangate.config import WebhooksConfig
from plangate.errors import ConfigError
from plangate.runs.webhooks._address import target
from plangate.runs.webhooks.repository import Claimed, Webhooks
from plangate.store import Store
from plangate.store.retention import parse_age

logger = logging.getLogger("plangate.webhooks")

_MARGIN = 30.0
"""Seconds a claim outlives the attempt's timeout (a deliverer's pass that lags)."""


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    """How deliveries are made (``[webhooks]`` in plangate.toml).

    Attributes:
        timeout: seconds an attempt may take (connect, send, answer).
        backoff: seconds before the first retry; each later one waits twice the one before.
        max_backoff: the longest wait between two attempts.
        give_up_after: seconds after the event past which no attempt is made (the delivery is failed).
        allow_private: send to private, loopback and link-local addresses too.
        batch: deliveries claimed in one pass.
        concurrency: attempts made at once by one deliverer.
        every: seconds between two passes.
    """

    timeout: float = 10.0
    backoff: float = 5.0
    max_backoff: float = 3600.0
    give_up_after: float = 86400.0
    allow_private: bool = False
    batch: int = 32
    concurrency: int = 8
    every: float = 0.5

    @classmethod
    def of_config(cls, config: WebhooksConfig) -> DeliverySettings:
        """plangate.toml's ``[webhooks]``.

        Raises:
            ConfigError: an age that is not one (the message names the key).
        """
        return cls(
            timeout=parse_age(config.timeout, "webhooks.timeout"),
            backoff=parse_age(config.backoff, "webhooks.backoff"),
            max_backoff=parse_age(config.max_backoff, "webhooks.max_backoff"),
            give_up_after=parse_age(config.give_up_after, "webhooks.give_up_after"),
            allow_private=config.allow_private,
        )

    def delay(self, attempts: int) -> float:
        """Seconds to wait after the ``attempts``-th attempt failed: exponential, the upper half random."""
        ceiling = min(self.max_backoff, self.backoff * 2.0 ** max(attempts - 1, 0))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


class Deliverer:
    """Makes the attempts due of a store's webhook deliveries.

    Args:
        store: the store the deliveries are in.
        settings: how attempts are made.
        transport: an httpx transport (tests); None: the network.
    """

    def __init__(
        self,
        store: Store,
        settings: DeliverySettings | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings or DeliverySettings()
        self.webhooks = Webhooks(store)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.settings.timeout),
            follow_redirects=False,
            transport=transport,
            headers={"user-agent": f"plangate/{__version__}"},
        )
        self._pool = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="plangate-webhook")

    def close(self) -> None:
        """Let the attempts in flight finish, then release the connections."""
        self._pool.shutdown(wait=True)
        self._client.close()

    def run_pass(self) -> int:
        """Claim the deliveries due and make one attempt of each; how many were made."""
        settings = self.settings
        claimed = self.webhooks.claim(self.holder, settings.timeout + _MARGIN, settings.batch)
        for done in self._pool.map(self._attempt, claimed):
            del done
        return len(claimed)

    def forever(self, stop: threading.Event) -> None:
        """Pass after pass until ``stop`` is set (passes follow each other at once while work is due); a
        failed pass is logged and the next one tries again."""
        while not stop.is_set():
            try:
                made = self.run_pass()
            except Exception as exc:  # a store that is down: the next pass tries again
                logger.warning("webhook pass failed: %s: %s", type(exc).__name__, exc)
                made = 0
            if not made:
                stop.wait(self.settings.every)

    def _attempt(self, claimed: Claimed) -> None:
        delivery = claimed.delivery
        status, error = self._post(claimed)
        if status is not None and 200 <= status < 300:
            self.webhooks.settle(delivery, self.holder, state="delivered", status=status, error="")
            logger.info(
                "webhook %s delivered to %s (attempt %d)",
                delivery.id,
                delivery.endpoint_id,
                delivery.attempts,
            )
            return
        now = self.webhooks.now()
        retry_at = now + self.settings.delay(delivery.attempts)
        if retry_at - delivery.created_at > self.settings.give_up_after:
            why = f"gave up after {delivery.attempts} attempt(s): {error}"
            self.webhooks.settle(delivery, self.holder, state="failed", status=status, error=why)
            logger.warning("webhook %s to %s failed: %s", delivery.id, delivery.endpoint_id, why)
            return
        self.webhooks.settle(
            delivery, self.holder, state="pending", status=status, error=error, next_at=retry_at
        )
        logger.info(
            "webhook %s to %s: attempt %d failed (%s); next in %.1f s",
            delivery.id,
            delivery.endpoint_id,
            delivery.attempts,
            error,
            retry_at - now,
        )

    def _post(self, claimed: Claimed) -> tuple[int | None, str]:
        """One attempt: the HTTP status (None when none came back) and why it failed (empty on a 2xx)."""
        try:
            where = target(claimed.url, allow_private=self.settings.allow_private)
        except ConfigError as exc:
            return None, str(exc)
        body = claimed.body.encode("utf-8")
        moment = dt.datetime.now(dt.UTC)
        headers = {
            "content-type": "application/json",
            "host": where.host,
            "webhook-id": claimed.delivery.id,
            "webhook-timestamp": str(int(moment.timestamp())),
            "webhook-signature": Webhook(claimed.secret).sign(claimed.delivery.id, moment, body),
        }
        extensions = {} if where.server_name is None else {"sni_hostname": where.server_name}
        try:
            with self._client.stream(
                "POST", where.url, content=body, headers=headers, extensions=extensions
            ) as response:
                status = response.status_code
        except httpx.TimeoutException:
            return None, f"no answer within {self.settings.timeout:g} s"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        if 200 <= status < 300:
            return status, ""
        return status, f"HTTP {status}"


__all__ = ["Deliverer", "DeliverySettings"]
