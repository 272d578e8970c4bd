"""The agent runtime on a small model: the compact prompt style, apart from the core path.

A model with a few hundred million parameters (the local default, SmolLM2-135M) follows short rules, tool
signatures and a worked example better than the full rules and JSON schemas a large model reads, repeats a
read it just made, and summarises an observation worse than the observation reads. What serves it lives
here, behind one ``CompactStyle`` (``plangate.agent._style.prompt_style`` picks it, once per run, for a model
that asks for compact prompts): the rules, signatures and worked example (``_prompt``), and the style's
execute prompt, offered tools and closing message (``_style``). The phases never ask which model they run
on. Not for: the history and state sections every prompt shares (``plangate.agent._context``).
"""

from __future__ import annotations

from plangate.agent.small._style import COMPACT, EVIDENCE_CHARS, CompactStyle, evidence_text

__all__ = ["COMPACT", "EVIDENCE_CHARS", "CompactStyle", "evidence_text"]
