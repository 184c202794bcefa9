"""Revisions (issue 17 item 11): every memory keeps its earlier versions — bounded, local, filled
in the write transaction — whether the new version was written here (an edit, a topic save, a
revival) or arrived from another replica; a hard delete takes them along, a move carries them;
an edit made here that another machine's newer one replaces is reported as superseded."""

from __future__ import annotations

import time

from engram.store import Store
from engram.store.revisions import KEPT

from .replicas import exchange


def test_edits_and_topic_saves_keep_earlier_versions(store: Store) -> None:
    first = store.add_observation(title="Auth", content="JWT", project="acme", topic_key="a/auth")
    oid = first.observation.id
    store.add_observation(title="Auth", content="Sessions", project="acme", topic_key="a/auth")
    store.update_observation(oid, title="Auth model", content="Sessions in Redis")
    store.update_observation(oid, type="decision")
    history = store.history(oid)
    assert history.observation.content == "Sessions in Redis" and history.written_here
    assert [(r.title, r.content, r.type) for r in history.revisions] == [
        ("Auth model", "Sessions in Redis", "manual"),
        ("Auth", "Sessions", "manual"),
        ("Auth", "JWT", "manual"),
    ]
    assert all(r.written_here and r.replaced_here for r in history.revisions)


def test_what_is_no_new_version_keeps_nothing(store: Store) -> None:
    oid = store.add_observation(title="t", content="same", project="acme").observation.id
    store.add_observation(title="t", content="same", project="acme")  # a duplicate counted
    store.delete_observation(oid)  # a soft delete is no new text
    store.restore_observation(oid)
    assert store.history(oid).revisions == []


def test_revisions_are_bounded(store: Store) -> None:
    oid = store.add_observation(title="t", content="v0", project="acme").observation.id
    for n in range(1, KEPT + 6):
        store.update_observation(oid, content=f"v{n}")
    kept = [r.content for r in store.history(oid).revisions]
    assert len(kept) == KEPT and kept[0] == f"v{KEPT + 4}" and kept[-1] == "v5"


def test_a_hard_delete_takes_the_past_along_and_a_move_carries_it(store: Store) -> None:
    gone = store.add_observation(title="t", content="secret v1", project="acme").observation.id
    store.update_observation(gone, content="secret v2")
    moved = store.add_observation(title="m", content="m1", project="acme").observation.id
    store.update_observation(moved, content="m2")
    store.delete_observation(gone, hard=True)
    assert (
        store.db.scalar("SELECT COUNT(*) FROM observation_revisions WHERE state LIKE '%secret%'")
        == 0
    )
    store.update_observation(moved, project="other")  # a move is no new text: m1 follows it
    assert [r.content for r in store.history(moved).revisions] == ["m1"]
    store.merge_projects(["other"], "final")
    assert store.get_observation(moved).project == "final"
    assert [r.content for r in store.history(moved).revisions] == ["m1"]


def test_an_edit_from_another_replica_is_kept_and_a_replaced_local_edit_reported(
    make_store,
) -> None:
    a, b = make_store("a"), make_store("b")
    oid_a = a.add_observation(title="Pool", content="10 connections", project="acme").observation.id
    exchange(a, b)
    oid_b = b.search("pool")[0].id
    a.update_observation(oid_a, content="20 connections (edited on a)")
    time.sleep(0.005)  # b's concurrent edit is the later one (the clocks' millisecond differs)
    b.update_observation(oid_b, content="30 connections (edited on b, later)")
    exchange(b, a)  # b's later edit reaches a: a's own edit is replaced
    applied = a.apply_mutations([], source="peer:none")  # nothing new: nothing reported
    assert applied.superseded == []
    history = a.history(oid_a)
    assert history.observation.content == "30 connections (edited on b, later)"
    assert not history.written_here and history.origin == b.origin
    latest = history.revisions[0]
    assert latest.content == "20 connections (edited on a)" and latest.written_here
    assert latest.replaced_by_origin == b.origin and not latest.replaced_here
    exchange(a, b)  # a's older edit reaches b: it loses, and b keeps no revision of it
    assert [r.content for r in b.history(oid_b).revisions] == ["10 connections"]


def test_apply_reports_the_superseded_local_edit(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    oid_a = a.add_observation(title="Pool", content="10", project="acme").observation.id
    exchange(a, b)
    a.update_observation(oid_a, title="Pool size", content="20")
    time.sleep(0.005)  # wall time must pass: the clocks' millisecond orders the two edits
    b.update_observation(b.search("pool")[0].id, content="30")
    records = [e.record for e in b.journal.pending("to-a")]
    result = a.apply_mutations(records, source="peer:b")
    assert result.superseded == [
        {"id": oid_a, "project": "acme", "title": "Pool size", "new_title": "Pool", "by": b.origin}
    ]
