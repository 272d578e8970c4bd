"""The copilot on a small local model: what a 135M model that samples under grammars needs, apart from the
core path.

Such a model cannot be trusted with the op protocol, so it writes one structured query under a grammar
that holds what the question states plainly, and the copilot adds the rest. Everything that serves it
lives here, behind one ``GrammarStrategy`` (``plangate.copilot._strategy`` picks it, once per turn, for a
model that samples under grammars): the short prompt (``_prompt``), the lines schema and the question's
hints (``_constrained``), what the question asks to compute (``_asked``), and what replaces its unusable
sentence (``_answer``). The attempt code never asks which model it runs on. Not for: what every model's
turn uses, the number guard, the review's rules and the period a question names among them.
"""

from __future__ import annotations

from plangate.copilot.small._strategy import GrammarStrategy

__all__ = ["GrammarStrategy"]
