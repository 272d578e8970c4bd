"""Bearer tokens in a store (either backend): created, found by hash, listed and revoked.

For: the rows of the ``tokens`` table and the SQL that reads and writes them, run on a connection the store
hands in (inside its transaction for writes). Not for: making or hashing tokens (``plangate.server.tokens``)
or deciding who may do what (the server). The store never sees a token, only its hash.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable

from plangate.errors import ConfigError, NotFoundError
from plangate.store import _checks as check
from plangate.store._rows import Row, RowMapper
from plangate.store._sql import Db
from plangate.store.base import Token

_TOKENS = RowMapper(Token, lambda row: f"token {row['id']!r}")
TOKEN_COLUMNS = _TOKENS.select

# A hex digest of 32 to 128 characters: sha256 (64) is what the server writes; the range leaves room for
# another digest without a migration, and refuses anything that looks like a raw token.
_HASH = re.compile(r"[0-9a-f]{32,128}")


def new_token_id() -> str:
    """A fresh token id: not secret (it is shown in listings), only unique."""
    return "tok_" + secrets.token_urlsafe(9)


def checked_hash(token_hash: object, where: str) -> str:
    """``token_hash`` if it is a lowercase hex digest."""
    if not isinstance(token_hash, str) or not _HASH.fullmatch(token_hash):
        # The value is not echoed: a caller that passed the raw token by mistake must not see it printed.
        raise ConfigError(f"{where}: token_hash: expected a lowercase hex digest of 32 to 128 characters")
    return token_hash


def create(
    db: Db,
    clock: Callable[[], float],
    owner: str,
    token_hash: str,
    name: str,
) -> Token:
    """Insert a token row; the caller commits.

    Raises:
        ConfigError: a bad argument, or a token with that hash exists already (nothing was written).
    """
    check.text(owner, "create_token: owner", empty=False)
    check.text(name, "create_token: name")
    checked_hash(token_hash, "create_token")
    token = Token(id=new_token_id(), owner=owner, name=name, created_at=clock(), revoked_at=None)
    inserted = db.run(
        "INSERT INTO tokens (id, owner, name, token_hash, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (token_hash) DO NOTHING",
        (token.id, owner, name, token_hash, token.created_at),
    )
    if inserted != 1:
        raise ConfigError("create_token: token_hash: a token with this hash exists already")
    return token


def find(db: Db, token_hash: str) -> Token | None:
    """The live (not revoked) token with that hash, or None."""
    checked_hash(token_hash, "find_token")
    row = db.one(
        f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_hash = ? AND revoked_at IS NULL", (token_hash,)
    )
    return None if row is None else token(row)


def listed(db: Db, owner: str | None) -> list[Token]:
    """Every token (revoked ones included), oldest first, of ``owner`` when given."""
    where, params = ("WHERE owner = ? ", (owner,)) if owner is not None else ("", ())
    found = db.all(f"SELECT {TOKEN_COLUMNS} FROM tokens {where}ORDER BY pos", params)
    return [token(row) for row in found]


def revoke(db: Db, clock: Callable[[], float], token_id: str, where: str) -> Token:
    """Mark a token revoked (keeping the first revocation time); the caller commits.

    Raises:
        NotFoundError: no token has that id.
    """
    check.text(token_id, "revoke_token: token_id", empty=False)
    db.run("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (clock(), token_id))
    row = db.one(f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = ?", (token_id,))
    if row is None:
        raise NotFoundError(f"no token {token_id!r} in the store at {where}")
    return token(row)


def token(row: Row) -> Token:
    """A ``tokens`` row as a record."""
    return _TOKENS.read(row)
