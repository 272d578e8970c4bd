"""Bearer tokens on every backend: created by hash, found while live, listed, revoked, reopened."""

from __future__ import annotations

import hashlib

import pytest
from store_backends import Backend, FakeClock

from plangate.errors import ConfigError, NotFoundError
from plangate.store import Store, Token


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_created_token_is_found_by_its_hash(store: Store, clock: FakeClock) -> None:
    created = store.create_token("alice", _hash("pg_one"), "laptop")
    assert created == Token(
        id=created.id, owner="alice", name="laptop", created_at=clock.now, revoked_at=None
    )
    assert created.id.startswith("tok_")
    assert store.find_token(_hash("pg_one")) == created


def test_an_unknown_hash_finds_nothing(store: Store) -> None:
    store.create_token("alice", _hash("pg_one"))
    assert store.find_token(_hash("pg_two")) is None


def test_a_revoked_token_is_no_longer_found_and_revoking_again_keeps_the_first_time(
    store: Store, clock: FakeClock
) -> None:
    created = store.create_token("alice", _hash("pg_one"), "ci")
    clock.advance(10)
    revoked = store.revoke_token(created.id)
    assert revoked.revoked_at == clock.now
    assert store.find_token(_hash("pg_one")) is None
    clock.advance(10)
    assert store.revoke_token(created.id).revoked_at == revoked.revoked_at


def test_revoking_one_token_leaves_the_owners_other_tokens_working(store: Store) -> None:
    first = store.create_token("alice", _hash("pg_one"))
    second = store.create_token("alice", _hash("pg_two"))
    store.revoke_token(first.id)
    assert store.find_token(_hash("pg_two")) == second


def test_revoking_an_unknown_id_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no token 'tok_nope'"):
        store.revoke_token("tok_nope")


def test_tokens_are_listed_oldest_first_with_revoked_ones_and_by_owner(store: Store) -> None:
    a1 = store.create_token("alice", _hash("a1"), "laptop")
    b1 = store.create_token("bob", _hash("b1"))
    a2 = store.create_token("alice", _hash("a2"), "ci")
    revoked = store.revoke_token(a1.id)
    assert store.list_tokens() == [revoked, b1, a2]
    assert store.list_tokens(owner="alice") == [revoked, a2]
    assert store.list_tokens(owner="carol") == []


def test_two_tokens_cannot_share_a_hash(store: Store) -> None:
    store.create_token("alice", _hash("pg_one"))
    with pytest.raises(ConfigError, match="exists already"):
        store.create_token("bob", _hash("pg_one"))
    assert [t.owner for t in store.list_tokens()] == ["alice"]


@pytest.mark.parametrize("bad", ["", "pg_" + "a" * 40, "ABCDEF" * 8, "abc"])
def test_a_value_that_is_not_a_hex_digest_is_refused_without_being_echoed(store: Store, bad: str) -> None:
    with pytest.raises(ConfigError, match="expected a lowercase hex digest") as raised:
        store.create_token("alice", bad)
    if bad:
        assert bad not in str(raised.value)
    with pytest.raises(ConfigError):
        store.find_token(bad)


def test_an_empty_owner_is_refused(store: Store) -> None:
    with pytest.raises(ConfigError, match="create_token: owner"):
        store.create_token("", _hash("pg_one"))


def test_tokens_survive_reopening(shared_backend: Backend) -> None:
    first = shared_backend.open()
    created = first.create_token("alice", _hash("pg_one"), "laptop")
    first.close()
    second = shared_backend.open()
    try:
        assert second.find_token(_hash("pg_one")) == created
    finally:
        second.close()


def test_a_revocation_through_one_handle_is_seen_by_another(shared_backend: Backend) -> None:
    one, two = shared_backend.open(), shared_backend.open()
    try:
        created = one.create_token("alice", _hash("pg_one"))
        assert two.find_token(_hash("pg_one")) == created
        two.revoke_token(created.id)
        assert one.find_token(_hash("pg_one")) is None
    finally:
        one.close()
        two.close()
