"""A real ``plangate worker`` process for the tests, with the tests' tools, formulas and scripted model.

Run as ``python worker_proc.py STORE_URL BROKER_URL [key=value ...]`` (keys: ttl, reap, grace,
visibility, concurrency, pool, name, metrics_port). The model is the only thing a command line cannot name
(a function script), which is why this starts the worker through ``run_worker``, not ``plangate worker``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fault_model import model  # noqa: E402

from plangate.workers import WorkerSettings, run_worker  # noqa: E402

_TRANSPORT = ("unacked_restore_interval", "unacked_restore_throttle")


def main(argv: list[str]) -> None:
    store, broker, *rest = argv
    options = dict(item.split("=", 1) for item in rest)
    settings = WorkerSettings(
        store=store,
        broker=broker,
        tools=(f"{HERE / 'fault_tools.py'}:registry",),
        paths=(str(HERE / "formulas"),),
        lease_ttl=float(options.get("ttl", "3")),
        reap_every=float(options.get("reap", "0.5")),
        unleased_grace=float(options.get("grace", "20")),
        visibility_timeout=float(options.get("visibility", "3600")),
        concurrency=int(options.get("concurrency", "1")),
        transport=tuple((key, float(options[key])) for key in _TRANSPORT if key in options),
        model_object=model(),
    )
    port = options.get("metrics_port")
    run_worker(
        settings,
        loglevel="INFO",
        pool=options.get("pool", "prefork"),
        name=options.get("name"),
        metrics_port=int(port) if port else None,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
