"""Which model the server's runs use when they name none, and whether it can run here.

For: ``GET /v1/info`` and the console's line about the model. A server starts without any model installed
or configured (it serves formulas, tools, approvals and the console all the same); this says which model
agent runs, agent steps, llm steps and copilot turns would use, and, when it cannot run here (its extra or
its API key is missing), why, with the hint the run itself fails with. Not for: choosing the model (the
engines resolve it when a run needs one).
"""

from __future__ import annotations

from pydantic import JsonValue

from plangate.errors import ConfigError
from plangate.models import Model, resolve_model
from plangate.models.registry import default_model_spec, describe_model
from plangate.server._problems import Problem
from plangate.server._public import public_text


class ModelInfo:
    """The server's default model, as clients are told about it (worked out once, on first use).

    Args:
        model: what the server was given (``create_app(model=…)``): a model, a spec, or None for the
            default rule.
        origin: where the choice came from (``--model``, ``PLANGATE_MODEL``, ``model in plangate.toml``,
            ``no API key``); empty when the caller did not say.
    """

    def __init__(self, model: Model | str | None, origin: str = "") -> None:
        self.model = model
        self.origin = origin
        self._view: dict[str, JsonValue] | None = None

    def view(self) -> dict[str, JsonValue]:
        """``{"spec", "description", "origin", "available", "problem"}``; ``problem`` (the install hint or
        the missing key) is None when the model can run here. Paths are shortened as in every response."""
        if self._view is None:
            self._view = self._describe()
        return self._view

    def _describe(self) -> dict[str, JsonValue]:
        if isinstance(self.model, Model):
            return self._shown(self.model.name, describe_model(self.model), self.origin, None)
        if self.model is None:
            spec, origin = default_model_spec()
        else:
            spec, origin = self.model, self.origin
        try:
            model = resolve_model(spec)
        except ConfigError as exc:
            return self._shown(spec, spec, self.origin or origin, str(exc))
        return self._shown(spec, describe_model(model), self.origin or origin, None)

    def require(self, named: str | None) -> None:
        """Refuse a request that needs the server's model when it cannot run here (nothing is stored).

        Args:
            named: the model the request names itself (then it is the request's to get right: its spec
                is checked where it is used, and a bad one is a 422).

        Raises:
            Problem: 503 ``model-unavailable``, with what to install or set.
        """
        if named is not None:
            return
        problem = self.view()["problem"]
        if isinstance(problem, str):
            raise Problem(503, "model-unavailable", f"this server's model cannot run here: {problem}")

    @staticmethod
    def _shown(spec: str, description: str, origin: str, problem: str | None) -> dict[str, JsonValue]:
        # a spec's path (scripted:/…/file.json, local:/…/model.gguf) follows its provider's colon, where
        # public_text leaves text alone (a URL's); it is shortened here, and wherever the texts quote it
        provider, colon, rest = spec.partition(":")
        shown = f"{provider}{colon}{public_text(rest)}" if colon else public_text(spec)

        def public(text: str) -> str:
            return public_text(text).replace(spec, shown)

        return {
            "spec": shown,
            "description": public(description),
            "origin": origin,
            "available": problem is None,
            "problem": public(problem) if problem is not None else None,
        }


__all__ = ["ModelInfo"]
