"""Scale-out: runs advanced by Celery workers on a Redis broker, over a shared (PostgreSQL) store.

For: ``RunQueue`` (hand "advance run R" to the workers: the server, ``plangate run --broker``, answers),
``WorkerSettings`` and ``run_worker`` (what ``plangate worker`` runs), and the ``Advancer`` and ``Reaper`` it
is made of. The broker only carries "advance run R"; the run's lease in the store decides who advances it,
and every commit is fenced by the lease's generation, so a duplicate, late or re-delivered message never
makes a second advancer. Not for: what a run does (the engines) or HTTP (``plangate.server``).

Needs the workers extra (Celery and the Redis client): ``pip install "plangate[workers]"``.
"""

from __future__ import annotations

from plangate.workers._app import ADVANCE_TASK, DEFAULT_VISIBILITY_TIMEOUT, QUEUE, broker_url
from plangate.workers.advance import Advancer, WorkerSettings
from plangate.workers.queue import RunQueue
from plangate.workers.reaper import Reaper
from plangate.workers.worker import run_worker

__all__ = [
    "ADVANCE_TASK",
    "DEFAULT_VISIBILITY_TIMEOUT",
    "QUEUE",
    "Advancer",
    "Reaper",
    "RunQueue",
    "WorkerSettings",
    "broker_url",
    "run_worker",
]
