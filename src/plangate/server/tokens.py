"""Bearer tokens: making one, and the hash the store keeps instead of it.

For: ``plangate token create`` and the server's check of an ``Authorization: Bearer …`` header, which must
hash the same way. Not for: storing tokens (``Store.create_token`` / ``find_token``) or routing requests.
No third-party imports, so the CLI can make tokens without the ``server`` extra.

A token is ``pg_`` followed by 32 random bytes in URL-safe base64; only its SHA-256 is stored. With
``PLANGATE_TOKEN_PEPPER`` set, the hash is an HMAC-SHA256 keyed with the pepper, so a copy of the database
alone cannot be used to check guessed tokens; the same pepper must then be set wherever tokens are made
and checked.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

TOKEN_PREFIX = "pg_"
"""How every plangate token starts (so a leaked one is easy to recognise and search for)."""

PEPPER_ENV = "PLANGATE_TOKEN_PEPPER"
"""The environment variable holding the optional server-side pepper."""

_MAX_TOKEN_LENGTH = 256


def new_token() -> str:
    """A fresh bearer token: 256 random bits."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def pepper_from_env() -> bytes | None:
    """The pepper in ``PLANGATE_TOKEN_PEPPER``, or None when it is unset or empty."""
    value = os.environ.get(PEPPER_ENV, "")
    return value.encode("utf-8") if value else None


def hash_token(token: str, pepper: bytes | None = None) -> str:
    """The hex digest the store keeps for ``token``: SHA-256, or HMAC-SHA256 keyed with ``pepper``."""
    data = token.encode("utf-8", "surrogatepass")
    if pepper:
        return hmac.new(pepper, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


def looks_like_token(value: str) -> bool:
    """Whether ``value`` has the shape of a plangate token (worth a store lookup)."""
    return value.startswith(TOKEN_PREFIX) and len(value) <= _MAX_TOKEN_LENGTH and value.isascii()


__all__ = ["PEPPER_ENV", "TOKEN_PREFIX", "hash_token", "looks_like_token", "new_token", "pepper_from_env"]
