"""Bearer tokens (``server/tokens.py``) on every backend: created by hash, found while live, listed, revoked,
reopened."""

from __future__ import annotations

import hashlib

import pytest
from store_backends import Backend, FakeClock

from plangate.errors import ConfigError, NotFoundError
from plangate.server.tokens import Token, Tokens
from plangate.store import Store


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_created_token_is_found_by_its_hash(store: Store, clock: FakeClock) -> None:
    created = Tokens(store).create("alice", _hash("pg_one"), "laptop")
    assert created == Token(
        id=created.id, owner="alice", name="laptop", created_at=clock.now, revoked_at=None
    )
    assert created.id.startswith("tok_")
    assert Tokens(store).find(_hash("pg_one")) == created


def test_an_unknown_hash_finds_nothing(store: Store) -> None:
    Tokens(store).create("alice", _hash("pg_one"))
    assert Tokens(store).find(_hash("pg_two")) is None


def test_a_revoked_token_is_no_longer_found_and_revoking_again_keeps_the_first_time(
    store: Store, clock: FakeClock
) -> None:
    created = Tokens(store).create("alice", _hash("pg_one"), "ci")
    clock.advance(10)
    revoked = Tokens(store).revoke(created.id)
    assert revoked.revoked_at == clock.now
    assert Tokens(store).find(_hash("pg_one")) is None
    clock.advance(10)
    assert Tokens(store).revoke(created.id).revoked_at == revoked.revoked_at


def test_revoking_one_token_leaves_the_owners_other_tokens_working(store: Store) -> None:
    first = Tokens(store).create("alice", _hash("pg_one"))
    second = Tokens(store).create("alice", _hash("pg_two"))
    Tokens(store).revoke(first.id)
    assert Tokens(store).find(_hash("pg_two")) == second


def test_revoking_an_unknown_id_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no token 'tok_nope'"):
        Tokens(store).revoke("tok_nope")


def test_tokens_are_listed_oldest_first_with_revoked_ones_and_by_owner(store: Store) -> None:
    a1 = Tokens(store).create("alice", _hash("a1"), "laptop")
    b1 = Tokens(store).create("bob", _hash("b1"))
    a2 = Tokens(store).create("alice", _hash("a2"), "ci")
    revoked = Tokens(store).revoke(a1.id)
    assert Tokens(store).listed() == [revoked, b1, a2]
    assert Tokens(store).listed(owner="alice") == [revoked, a2]
    assert Tokens(store).listed(owner="carol") == []


def test_two_tokens_cannot_share_a_hash(store: Store) -> None:
    Tokens(store).create("alice", _hash("pg_one"))
    with pytest.raises(ConfigError, match="exists already"):
        Tokens(store).create("bob", _hash("pg_one"))
    assert [t.owner for t in Tokens(store).listed()] == ["alice"]


@pytest.mark.parametrize("bad", ["", "pg_" + "a" * 40, "ABCDEF" * 8, "abc"])
def test_a_value_that_is_not_a_hex_digest_is_refused_without_being_echoed(store: Store, bad: str) -> None:
    with pytest.raises(ConfigError, match="expected a lowercase hex digest") as raised:
        Tokens(store).create("alice", bad)
    if bad:
        assert bad not in str(raised.value)
    with pytest.raises(ConfigError):
        Tokens(store).find(bad)


def test_an_empty_owner_is_refused(store: Store) -> None:
    with pytest.raises(ConfigError, match="create_token: owner"):
        Tokens(store).create("", _hash("pg_one"))


def test_tokens_survive_reopening(shared_backend: Backend) -> None:
    first = shared_backend.open()
    created = Tokens(first).create("alice", _hash("pg_one"), "laptop")
    first.close()
    second = shared_backend.open()
    try:
        assert Tokens(second).find(_hash("pg_one")) == created
    finally:
        second.close()


def test_a_revocation_through_one_handle_is_seen_by_another(shared_backend: Backend) -> None:
    one, two = shared_backend.open(), shared_backend.open()
    try:
        created = Tokens(one).create("alice", _hash("pg_one"))
        assert Tokens(two).find(_hash("pg_one")) == created
        Tokens(two).revoke(created.id)
        assert Tokens(one).find(_hash("pg_one")) is None
    finally:
        one.close()
        two.close()
