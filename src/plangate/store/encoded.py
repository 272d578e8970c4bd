"""JSON objects encoded once, for what a run writes again and again: a formula run's plan, inside each of
its snapshots.

For: ``EncodedObject``, which ``Transaction.set_snapshot`` takes as it is, and which joins objects already
encoded into a larger one without encoding them again. Valid by construction: it is made only from data
the store's encoder accepted (``of``) or from other encoded objects (``joined``). Not for: reading JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

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

__all__ = ["EncodedObject"]
