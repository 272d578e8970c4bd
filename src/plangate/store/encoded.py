"""JSON objects encoded once, for what a run writes again and again: a formula run's plan, inside each of
its snapshots.

For: ``EncodedObject``, which ``Transaction.set_snapshot`` takes as it is, and which joins objects already
encoded into a larger one without encoding them again. Valid by construction: it is made only from data
the store's encoder accepted (``of``, ``of_pairs``), from a pydantic model's JSON form with no NaN nor
infinity in it (``of_model``), or from other encoded objects (``joined``). Not for: reading JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import final

from pydantic import BaseModel

from plangate.errors import ConfigError
from plangate.store import _checks as check


@final
class EncodedObject:
    """A JSON object as compact text, encoded by the store's rules (no NaN, no infinity).

    Example::

        plan = EncodedObject.of(plan_data)            # once
        tx.set_snapshot(EncodedObject.joined({"plan": plan, "steps": EncodedObject.of(steps)}))
    """

    __slots__ = ("text",)

    def __init__(self, text: str, _made: object = None) -> None:
        if _made is not _MADE:
            raise ConfigError("EncodedObject: make one with EncodedObject.of or EncodedObject.joined")
        self.text = text

    @classmethod
    def of(cls, value: Mapping[str, object], where: str = "EncodedObject.of") -> EncodedObject:
        """``value`` encoded.

        Raises:
            ConfigError: ``value`` is not a JSON object (``where`` names it in the message).
        """
        return cls(check.json_object(value, where), _MADE)

    @classmethod
    def of_model(cls, model: BaseModel, where: str = "EncodedObject.of_model") -> EncodedObject:
        """``model``'s JSON form, by alias, as pydantic writes it (``model_dump_json``): no Python object is
        made on the way, so a large model costs no garbage collection. The same JSON as ``of`` of its dump,
        though a float may be spelt another way (``1e-7`` for ``1e-07``).

        Raises:
            ConfigError: it holds NaN or an infinity, which JSON has no number for (refused when the model
                writes them as such, ``ser_json_inf_nan="constants"``; pydantic's default writes null), or
                its JSON form is not an object.
        """
        # the serializer called directly: ``model_dump_json``'s wrapper costs more than a small model's JSON
        text = model.__pydantic_serializer__.to_json(model, by_alias=True).decode()
        if "NaN" in text or "Infinity" in text:  # perhaps only inside a string: the exact encoder tells
            return cls.of(model.model_dump(mode="json", by_alias=True), where)
        if not text.startswith("{"):
            raise ConfigError(f"{where}: expected a model whose JSON form is an object; found {text[:40]}")
        return cls(text, _MADE)

    @classmethod
    def of_pairs(
        cls, pairs: Iterable[tuple[str, object]], where: str = "EncodedObject.of_pairs"
    ) -> EncodedObject:
        """The object of ``pairs`` (key, JSON value; each key once), encoded as they come, a few hundred at a
        time: for a large object made on the fly, whose values need not all be alive at once (nor found by
        the garbage collector), in a few calls to the encoder rather than one per value.

        Raises:
            ConfigError: a key is not a string, or a value is not JSON data (the message names its key).
        """
        parts: list[str] = []
        chunk: dict[str, object] = {}
        for key, value in pairs:
            if not isinstance(key, str):
                raise ConfigError(f"{where}: expected string keys; found {type(key).__name__} key {key!r}")
            chunk[key] = value
            if len(chunk) == _CHUNK:
                parts.append(_members(chunk, where))
                chunk = {}
        if chunk:
            parts.append(_members(chunk, where))
        return cls("{" + ",".join(parts) + "}", _MADE)

    @classmethod
    def joined(cls, members: Mapping[str, EncodedObject]) -> EncodedObject:
        """The object whose members are ``members``, each as it was encoded.

        Raises:
            ConfigError: a key is not a string, or a member is not an ``EncodedObject``.
        """
        parts = []
        for key, member in members.items():
            if not isinstance(key, str) or not isinstance(member, EncodedObject):
                raise ConfigError(
                    "EncodedObject.joined: expected string keys and EncodedObject members; found "
                    f"{type(key).__name__} key {key!r} with a {type(member).__name__}"
                )
            parts.append(f"{check.json_value(key, 'EncodedObject.joined: key')}:{member.text}")
        return cls("{" + ",".join(parts) + "}", _MADE)

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"EncodedObject({shown})"


_MADE = object()
_CHUNK = 256  # values encoded per call to the encoder by ``of_pairs``


def _members(chunk: dict[str, object], where: str) -> str:
    """The members of ``chunk`` as JSON text (an object's, without its braces); a value that is not JSON data
    is named by its key."""
    try:
        return check.json_object(chunk, where)[1:-1]
    except ConfigError:
        for key, value in chunk.items():
            check.json_value(value, f"{where}: {key}")
        raise


__all__ = ["EncodedObject"]
