"""The listener that hears, through PostgreSQL's ``LISTEN/NOTIFY``, the commits other processes make.

For: one thread per store object that has a ``remote`` subscriber, on a connection of its own outside the
pool, handing each notice's payload to the store (which reads the events and tells its subscribers). Not
for: sending notices (the committing transaction does, with ``pg_notify``) or reading events.

When the connection drops (a server restart), the thread reconnects with a growing pause (up to 2 s) and
listens again; notices sent meanwhile are lost, which readers make up for by catching up from the store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg
from psycopg import sql

logger = logging.getLogger("plangate.store")

# How often the thread looks up from waiting to see whether it was asked to stop; a store's close waits
# at most about this long for it.
_POLL = 0.2
_MAX_PAUSE = 2.0


class Listener:
    """Listens on ``channel`` of the database at ``url`` and calls ``on_payload`` for each notice.

    Args:
        url: the store's URL (with its password: the listener opens its own connection).
        channel: the notify channel of the store's schema.
        on_payload: called in the listener's thread with each notice's payload; must not raise.
        where: the URL without its password, for log messages.
    """

    def __init__(self, url: str, channel: str, on_payload: Callable[[str], None], where: str) -> None:
        self._url = url
        self._channel = channel
        self._on_payload = on_payload
        self._where = where
        self._stopping = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name="plangate-store-listener", daemon=True)

    @property
    def listening(self) -> bool:
        """Whether the listener is connected and listening now."""
        return self._listening.is_set()

    def start(self, timeout: float) -> bool:
        """Start the thread; wait up to ``timeout`` seconds until it listens (False if it does not yet)."""
        self._thread.start()
        return self._listening.wait(timeout)

    def wait_listening(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until the listener listens (again, after a reconnect)."""
        return self._listening.wait(timeout)

    def stop(self) -> None:
        """Ask the thread to stop and wait for it (about ``_POLL`` seconds at most)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=_POLL * 10)

    def _run(self) -> None:
        pause = 0.05
        warned = False
        while not self._stopping.is_set():
            try:
                self._listen()
            except psycopg.Error as exc:
                self._listening.clear()
                if not warned:
                    # Once per outage: a server restart would otherwise log a line per attempt.
                    logger.warning(
                        "the store at %s stopped telling this process of other processes' commits (%s); "
                        "reconnecting",
                        self._where,
                        (str(exc).strip().splitlines() or [type(exc).__name__])[0],
                    )
                    warned = True
                self._stopping.wait(pause)
                pause = min(pause * 2, _MAX_PAUSE)
                continue
            pause, warned = 0.05, False

    def _listen(self) -> None:
        with psycopg.connect(self._url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            self._listening.set()
            while not self._stopping.is_set():
                for notice in conn.notifies(timeout=_POLL):
                    self._on_payload(notice.payload)
        self._listening.clear()
