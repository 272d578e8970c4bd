"""Pydantic models built from values already valid, on the paths every step and every tool call take.

For: ``built``, which makes a model as pydantic's ``model_construct`` does (no validation) without its
per-call generic work; ``restamped``, ``model_copy(update=...)`` the same way; and ``stamped``, which sets
fields on a model nobody else has seen yet, in place (the store gives an event its ``run_id``, ``seq`` and
``at`` so: an event is built once and never copied). Only for values whose types the caller guarantees
(typed code, data pydantic made JSON-able): a value from outside is validated, never built here. Not for:
models with private attributes, extra fields or a ``__new__`` of their own (those need pydantic's own
making; ``built`` refuses them when it first meets the class).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from plangate.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class _Template:
    defaults: dict[str, Any]  # every field in declaration order (the order pydantic serialises in)
    required: frozenset[str]  # the fields without a default
    factories: dict[str, Callable[[], Any]]  # the fields whose default is made anew for each model


_TEMPLATES: dict[type[BaseModel], _Template] = {}
_set = object.__setattr__  # past pydantic's own ``__setattr__``, which refuses a frozen model
# the setters of the slots every model has, called directly: no attribute lookup by name on every model made
_SLOTS = vars(BaseModel)
_set_fields_set = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__


def _template(cls: type[BaseModel]) -> _Template:
    found = _TEMPLATES.get(cls)
    if found is None:
        if cls.__private_attributes__ or cls.model_config.get("extra") == "allow":
            raise ConfigError(f"{cls.__name__} has private attributes or extra fields: validate it instead")
        if cls.__new__ is not object.__new__:
            raise ConfigError(f"{cls.__name__} makes its instances its own way: validate it instead")
        fields = cls.model_fields
        required = frozenset(name for name, field in fields.items() if field.is_required())
        factories = {
            name: cast("Callable[[], Any]", field.default_factory)
            for name, field in fields.items()
            if field.default_factory is not None
        }
        defaults = {
            name: None if name in required or name in factories else field.get_default()
            for name, field in fields.items()
        }
        found = _TEMPLATES[cls] = _Template(defaults, required, factories)
    return found


def built(cls: type[M], values: Mapping[str, Any]) -> M:
    """``cls.model_construct(**values)``: the fields ``values`` names are set, the others take their
    defaults (a default factory makes a new one for each model).

    Raises:
        ConfigError: a field without a default is not given.
    """
    template = _TEMPLATES.get(cls) or _template(cls)
    if not values.keys() >= template.required:
        missing = template.required - values.keys()
        raise ConfigError(f"{cls.__name__}: no value for {', '.join(sorted(missing))}")
    fields = {**template.defaults, **values}  # keys keep their declared order
    for name, factory in template.factories.items():
        if name not in values:
            fields[name] = factory()
    model = object.__new__(cls)  # ``_template`` refused a class with a ``__new__`` of its own
    _set(model, "__dict__", fields)
    _set_fields_set(model, set(values))
    _set_extra(model, None)
    _set_private(model, None)
    return model


def restamped(model: M, values: Mapping[str, Any]) -> M:
    """``model.model_copy(update=values)`` for values of the fields' types (nothing is validated)."""
    cls = type(model)
    _template(cls)  # refuses a class this cannot copy
    copy = object.__new__(cls)
    _set(copy, "__dict__", {**model.__dict__, **values})
    _set_fields_set(copy, model.__pydantic_fields_set__ | values.keys())
    _set_extra(copy, None)
    _set_private(copy, None)
    return copy


def stamped(model: M, values: Mapping[str, Any]) -> M:
    """``model`` itself with ``values`` set (of the fields' types: nothing is validated), frozen or not.

    Only for a model its maker hands over before anybody else holds it (an event appended to a
    transaction): whoever holds it sees the change.
    """
    cls = type(model)
    _TEMPLATES.get(cls) or _template(cls)  # refuses a class whose fields live elsewhere than in __dict__
    model.__dict__.update(values)
    model.__pydantic_fields_set__.update(values.keys())
    return model


__all__ = ["built", "restamped", "stamped"]
