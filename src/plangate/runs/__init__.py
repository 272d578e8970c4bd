"""The run contract every engine implements, and what every kind of run shares.

For: ``RunEngine`` and the registry of engines by kind (``contract.py``), the ``Runs`` facade the server, the
command line and the workers drive every kind of run through (``facade.py``, on ``executor.py``), one
``Outcome`` (``outcome.py``), one write protocol (``writes.py``), one consent rule (``consent.py``) and the
tools' identities a run is advanced with (``tools.py``); and what many owners need (``schedules.py``,
``scheduler.py``, ``quotas/``, ``webhooks/``, ``operations.py``). Not for: what any one engine does
(``plangate.agent``, ``plangate.formulas``, ``plangate.copilot``).
"""

from __future__ import annotations

# Registered as soon as runs are: every store opened later hooks the webhooks' outbox and the owners' daily
# spending into its runs' transactions, whatever code (an engine, the Python API) commits them.
import plangate.runs.webhooks  # noqa: F401
from plangate.runs.contract import Answered, Engines, Origin, Replayed, RunEngine, Transactions
from plangate.runs.facade import Lineage, Recovery, Runs
from plangate.runs.outcome import Outcome, OutcomeStatus
from plangate.runs.tools import ToolsDiffer

__all__ = [
    "Answered",
    "Engines",
    "Lineage",
    "Origin",
    "Outcome",
    "OutcomeStatus",
    "Recovery",
    "Replayed",
    "RunEngine",
    "Runs",
    "ToolsDiffer",
    "Transactions",
]
