"""plangate: a runtime for LLM agents and workflows that plan, act only with consent, and prove each step."""

__version__ = "0.1.0"

__all__ = ["__version__"]
