"""The run contract every engine implements, and what every kind of run shares.

For: one ``Outcome`` (``outcome.py``), one write protocol (``writes.py``) and one consent rule
(``consent.py``) for agent, formula and copilot runs. Not for: what any one engine does (``plangate.agent``,
``plangate.formulas``, ``plangate.copilot``).
"""

from __future__ import annotations

from plangate.runs.outcome import Outcome, OutcomeStatus

__all__ = ["Outcome", "OutcomeStatus"]
