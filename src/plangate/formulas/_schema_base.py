"""The building blocks of the formula schema: a strict base model and the small reusable field types.

For: rejecting unknown keys with a did-you-mean, durations, ``one-or-many`` tables, and the custom error that
lets a validator point below its own model (``gate.timeout``). Not for: the fields of a formula (schema.py) or
turning validation errors into messages (_schema_errors.py).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from plangate.errors import FormulaError
from plangate.formulas.durations import parse_duration

#: What a step id may contain once rendered; placeholders are allowed before rendering.
STEP_ID = re.compile(r"[A-Za-z0-9_.-]+")
_PLACEHOLDER = re.compile(r"\{\{.*?\}\}")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FORMULA_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def problem(message: str, *, where: str = "") -> PydanticCustomError:
    """A validation error with a ready message; ``where`` is appended to the error's location."""
    return PydanticCustomError("formula", "{message}", {"message": message, "where": where})


def suggest(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or ``""`` when nothing is close."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


class StrictModel(BaseModel):
    """A frozen model that rejects unknown keys, naming the key and the closest known one."""

    # NaN and infinities written as such, as in a plan (``plan._PlanModel``): a loop's body is in its plan
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, ser_json_inf_nan="constants")
    _accepted: ClassVar[dict[type[BaseModel], frozenset[str]]] = {}

    @classmethod
    def accepted_keys(cls) -> frozenset[str]:
        """The keys a file may use for this model (aliases where a field has them)."""
        keys = StrictModel._accepted.get(cls)
        if keys is None:
            names: set[str] = set()
            for name, info in cls.model_fields.items():
                alias = info.validation_alias
                if isinstance(alias, AliasChoices):
                    names.update(str(choice) for choice in alias.choices)
                elif isinstance(alias, str):
                    names.add(alias)
                else:
                    names.add(info.alias or name)
            keys = frozenset(names)
            StrictModel._accepted[cls] = keys
        return keys

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            accepted = cls.accepted_keys()
            for key in data:
                if key not in accepted:
                    hint = suggest(str(key), accepted)
                    raise problem(f"unknown field{hint}", where=str(key))
        return data


def _to_seconds(value: object) -> object:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except FormulaError as exc:
        raise problem(exc.detail) from None


def _one_or_many(value: object) -> object:
    return [value] if isinstance(value, dict) else value


def _str_to_list(value: object) -> object:
    return [value] if isinstance(value, str) else value


def _check_step_id(value: object) -> object:
    if isinstance(value, str):
        bare = _PLACEHOLDER.sub("", value)
        if not value or not (bare == "" or STEP_ID.fullmatch(bare)):
            raise problem(f"step ids may contain only letters, digits, '_', '.' and '-', got {value!r}")
    return value


#: A duration written as ``"1h30m"`` or a number of seconds, stored as whole seconds.
Duration = Annotated[int, BeforeValidator(_to_seconds)]
#: A list that may also be written as a single table.
OneOrMany = BeforeValidator(_one_or_many)
#: A list of names that may also be written as one name.
StrOrList = BeforeValidator(_str_to_list)
#: A step id, possibly with ``{{placeholders}}`` that are rendered when the formula is cooked.
StepIdText = Annotated[str, BeforeValidator(_check_step_id)]

__all__ = [
    "FORMULA_NAME",
    "IDENTIFIER",
    "STEP_ID",
    "Duration",
    "OneOrMany",
    "StepIdText",
    "StrOrList",
    "StrictModel",
    "problem",
    "suggest",
]
