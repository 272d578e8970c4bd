"""The server's retention pass: every ``[retention] every``, ended runs past ``older_than`` are pruned.

For: ``Retention`` (the two settings, in seconds) and ``prune_every``, the background task the app's lifespan
starts when ``plangate.toml`` (or ``plangate serve --prune-older-than``) sets a horizon. Every server on a
store may run it: each tree is removed in a transaction of its own that checks again what it removes, so two
servers pruning at once remove each tree once and nothing else. Not for: what a prune removes
(``store/retention.py``). The server never compacts: SQLite reuses the pages freed, PostgreSQL's autovacuum
the rows (``plangate prune`` compacts when an operator asks).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import plangate.copilot._conversations  # registers the turns' part of a prune
import plangate.runs.webhooks  # noqa: F401  (registers the deliveries' part of a prune)
from plangate._offloop import off_loop
from plangate.store import Store, retention

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Retention:
    """How long ended runs are kept, and how often a server looks.

    Attributes:
        older_than: seconds since an ended run tree last moved after which it is removed.
        every: seconds between two passes (the first pass runs at start-up).
    """

    older_than: float
    every: float = 3600.0


async def prune_every(store: Store, settings: Retention) -> None:
    """Prune ``store`` now and then every ``settings.every`` seconds, for as long as the task runs; a pass
    that fails is logged and the next one tries again."""
    while True:
        try:
            report = await off_loop(retention.prune, store, settings.older_than)
        except Exception as exc:  # a store that is down: the next pass tries again
            logger.warning("retention pass failed: %s: %s", type(exc).__name__, exc)
        else:
            if report.trees or report.kept:
                logger.info(
                    "retention: removed %d run(s) in %d tree(s); kept %d tree(s) past the horizon that "
                    "still wait or run",
                    report.runs,
                    report.trees,
                    report.kept,
                )
        await asyncio.sleep(settings.every)


__all__ = ["Retention", "prune_every"]
