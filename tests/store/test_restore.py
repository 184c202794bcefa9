"""Soft deletes can be undone (issue 17 item 10): ``restore_observation(s)`` brings a memory back
here and, as a newer upsert that beats the delete, on every replica; a hard delete cannot be
undone; a soft-deleted memory asked for by id says it was deleted (and how to bring it back),
and ``include_deleted`` shows deleted memories in search and lists."""

from __future__ import annotations

import pytest

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.store import Store

from .replicas import exchange


def test_restore_undoes_a_soft_delete_here_and_on_a_replica(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    oid = a.add_observation(
        title="Pool size", content="30 connections", project="acme"
    ).observation.id
    exchange(a, b)
    a.delete_observation(oid)
    exchange(a, b)
    assert b.stats("acme").total_observations == 0
    back = a.restore_observation(oid)
    assert back.deleted_at is None and back.title == "Pool size"
    assert a.search("pool")[0].id == oid
    exchange(a, b)
    assert [o.title for o in b.search("pool")] == ["Pool size"]
    assert a.canonical_export() == b.canonical_export()


def test_a_deleted_memory_says_so_and_shows_on_request(store: Store) -> None:
    oid = store.add_observation(title="Old note", content="obsolete", project="acme").observation.id
    store.delete_observation(oid)
    with pytest.raises(NotFoundError, match=rf"#{oid} was deleted at .*engram restore {oid}"):
        store.get_observation(oid)
    assert store.get_observation(oid, include_deleted=True).deleted_at is not None
    assert store.search("obsolete") == []
    assert [o.id for o in store.search("obsolete", include_deleted=True)] == [oid]
    assert store.recent_observations("acme") == []
    assert [o.id for o in store.recent_observations("acme", include_deleted=True)] == [oid]
    assert store.count_observations("acme", include_deleted=True) == 1


def test_what_cannot_be_restored_is_refused(store: Store) -> None:
    live = store.add_observation(title="Live", content="here", project="acme").observation.id
    gone = store.add_observation(title="Gone", content="for good", project="acme").observation.id
    store.delete_observation(gone, hard=True)
    with pytest.raises(ConflictError, match="is not deleted"):
        store.restore_observation(live)
    with pytest.raises(NotFoundError, match="hard delete cannot be undone"):
        store.restore_observation(gone)
    with pytest.raises(ValidationError, match=r"id must be an integer \(got 'abc'\)"):
        store.restore_observation("abc")


def test_restoring_several_is_all_or_nothing(store: Store) -> None:
    ids = [
        store.add_observation(title=f"n{i}", content=f"c{i}", project="acme").observation.id
        for i in range(3)
    ]
    store.delete_observations(ids[:2])
    pending = store.journal.count_pending("t")
    with pytest.raises(ConflictError):
        store.restore_observations([ids[0], ids[2]])  # the second is live: nothing happens
    assert store.get_observation(ids[0], include_deleted=True).deleted_at is not None
    assert store.journal.count_pending("t") == pending
    assert [o.id for o in store.restore_observations(ids[:2])] == ids[:2]


def test_deleting_several_is_all_or_nothing(store: Store) -> None:
    ids = [
        store.add_observation(title=f"n{i}", content=f"c{i}", project="acme").observation.id
        for i in range(3)
    ]
    with pytest.raises(NotFoundError, match="#99 not found"):
        store.delete_observations([ids[0], 99])
    assert store.count_observations("acme") == 3
    with pytest.raises(ValidationError, match="must be an integer"):
        store.delete_observations([ids[0], "x"])
    gone = store.delete_observations([ids[1], ids[2], ids[1]])
    assert [o.id for o in gone] == [ids[1], ids[2]]
    assert [o.id for o in store.recent_observations("acme")] == [ids[0]]
