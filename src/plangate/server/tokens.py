"""Bearer tokens: making one, the hash the store keeps instead of it, and the repository of those hashes.

For: ``plangate token create | list | revoke`` and the server's check of an ``Authorization: Bearer …``
header, which must hash the same way; ``Tokens`` keeps the hashes (``tokens`` table, either backend, with
migrations of its own: ``COMPONENT``). Not for: routing requests or deciding who may do what (the server).
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
import re
import secrets

from plangate.errors import ConfigError, NotFoundError
from plangate.store import Record, Store
from plangate.store.ddl import FromCore
from plangate.store.repository import Component, RowMapper, checks, database_of, register

TOKEN_PREFIX = "pg_"
"""How every plangate token starts (so a leaked one is easy to recognise and search for)."""

PEPPER_ENV = "PLANGATE_TOKEN_PEPPER"
"""The environment variable holding the optional server-side pepper."""

_MAX_TOKEN_LENGTH = 256

COMPONENT = register(
    Component(
        "tokens",
        (
            # 1: the table core migration 3 made (store/_schema.py: TOKENS)
            (FromCore(3, ("tokens",)),),
        ),
    )
)

# A hex digest of 32 to 128 characters: sha256 (64) is what the server writes; the range leaves room for
# another digest without a migration, and refuses anything that looks like a raw token.
_HASH = re.compile(r"[0-9a-f]{32,128}")


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


class Token(Record):
    """A bearer token as stored: who it speaks for and whether it still works, never the token itself.

    The store keeps only a hash of the token (``Tokens.create``); whoever made the token showed it once.

    Attributes:
        id: not secret (listings show it); ``Tokens.revoke`` takes it.
        owner: the owner every request made with the token acts as.
        name: a label to tell a person's tokens apart (``laptop``, ``ci``); may be empty.
        revoked_at: when it was revoked, or None while it works.
    """

    id: str
    owner: str
    name: str
    created_at: float
    revoked_at: float | None


_TOKENS = RowMapper(Token, lambda row: f"token {row['id']!r}")


class Tokens:
    """The bearer tokens of a store, by hash.

    Args:
        store: a store opened by plangate; its tokens table is brought up to date the first time.

    Raises:
        ConfigError: ``store`` offers no database.
        SchemaVersionError: a newer plangate wrote the tokens table.
    """

    def __init__(self, store: Store) -> None:
        self._database = database_of(store, COMPONENT)

    def create(self, owner: str, token_hash: str, name: str = "") -> Token:
        """Record a bearer token by its hash (a lowercase hex digest), for ``owner``.

        Raises:
            ConfigError: a bad argument, or a token with that hash exists already.
        """
        checks.text(owner, "create_token: owner", empty=False)
        checks.text(name, "create_token: name")
        _checked_hash(token_hash, "create_token")
        token = Token(
            id=_new_token_id(), owner=owner, name=name, created_at=self._database.now(), revoked_at=None
        )
        with self._database.writing("create_token") as db:
            inserted = db.run(
                "INSERT INTO tokens (id, owner, name, token_hash, created_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (token_hash) DO NOTHING",
                (token.id, owner, name, token_hash, token.created_at),
            )
        if inserted != 1:
            raise ConfigError("create_token: token_hash: a token with this hash exists already")
        return token

    def find(self, token_hash: str) -> Token | None:
        """The token with that hash if it exists and is not revoked, else None."""
        _checked_hash(token_hash, "find_token")
        with self._database.reading("find_token") as db:
            row = db.one(
                f"SELECT {_TOKENS.select} FROM tokens WHERE token_hash = ? AND revoked_at IS NULL",
                (token_hash,),
            )
        return None if row is None else _TOKENS.read(row)

    def listed(self, *, owner: str | None = None) -> list[Token]:
        """Every token (revoked ones included), oldest first, only ``owner``'s when given."""
        where, params = ("WHERE owner = ? ", (owner,)) if owner is not None else ("", ())
        with self._database.reading("list_tokens") as db:
            found = db.all(f"SELECT {_TOKENS.select} FROM tokens {where}ORDER BY pos", params)
        return [_TOKENS.read(row) for row in found]

    def revoke(self, token_id: str) -> Token:
        """Revoke a token: ``find`` no longer returns it. Revoking twice keeps the first time.

        Raises:
            NotFoundError: no token has that id.
        """
        checks.text(token_id, "revoke_token: token_id", empty=False)
        with self._database.writing("revoke_token") as db:
            db.run(
                "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (self._database.now(), token_id),
            )
            row = db.one(f"SELECT {_TOKENS.select} FROM tokens WHERE id = ?", (token_id,))
        if row is None:
            raise NotFoundError(f"no token {token_id!r} in the store at {self._database.where}")
        return _TOKENS.read(row)


def _new_token_id() -> str:
    # not secret (it is shown in listings), only unique
    return "tok_" + secrets.token_urlsafe(9)


def _checked_hash(token_hash: object, where: str) -> str:
    if not isinstance(token_hash, str) or not _HASH.fullmatch(token_hash):
        # The value is not echoed: a caller that passed the raw token by mistake must not see it printed.
        raise ConfigError(f"{where}: token_hash: expected a lowercase hex digest of 32 to 128 characters")
    return token_hash


__all__ = [
    "COMPONENT",
    "PEPPER_ENV",
    "TOKEN_PREFIX",
    "Token",
    "Tokens",
    "hash_token",
    "looks_like_token",
    "new_token",
    "pepper_from_env",
]
