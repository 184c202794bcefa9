"""Relations between memories (issue 20) at the store: create, judge, supersede; one relation per
pair; what search results show and how superseded memories rank; the bad cases (another
project, a missing or deleted memory, itself, cycles of supersession, bad names)."""

from __future__ import annotations

import orjson
import pytest

from engram.errors import NotFoundError, ValidationError
from engram.record import relation_key, validate_record
from engram.store import Store


def save(store: Store, title: str, content: str, project: str = "acme", **kw):
    return store.add_observation(title=title, content=content, project=project, **kw).observation


def test_relate_journals_one_replicated_relation_per_pair(store: Store) -> None:
    old = save(store, "Sessions in Redis", "We keep sessions in Redis")
    new = save(store, "Sessions in PostgreSQL", "We moved sessions to PostgreSQL")
    rel = store.relate(new.id, old.sync_id, "supersedes", reason="Redis was dropped")
    assert rel.sync_id == relation_key("acme", new.sync_id, old.sync_id)
    assert (rel.source.id, rel.target.id, rel.state) == (new.id, old.id, "judged")
    assert rel.note(new.sync_id) == f"supersedes #{old.id} (Sessions in Redis)"
    assert rel.note(old.sync_id) == f"superseded by #{new.id} (Sessions in PostgreSQL)"
    records = [e.as_record() for e in store.journal.pending("x") if e.entity == "relation"]
    assert len(records) == 1 and validate_record(records[0])
    payload = records[0]["payload"]
    assert payload["source_id"] == new.sync_id and payload["target_id"] == old.sync_id
    assert payload["project"] == "acme" and "scope" not in payload
    # Relating the pair again (either way round) changes that relation, never adds one.
    again = store.relate(old.id, new.id, "related")
    assert again.sync_id == rel.sync_id and again.source_id == old.sync_id
    assert store.db.scalar("SELECT COUNT(*) FROM memory_relations") == 1
    assert store.get_relation(rel.sync_id).relation == "related"


def test_judging_a_relation(store: Store) -> None:
    a, b = save(store, "A", "first"), save(store, "B", "second")
    rel = store.relate(b.id, a.id, "conflicts_with", status="pending")
    assert store.relations_for(a.id).needs_review and store.relations_for(b.id).needs_review
    judged = store.judge_relation(rel.sync_id, "judged", relation="supersedes", reason="B is new")
    assert (judged.relation, judged.state, judged.reason) == ("supersedes", "judged", "B is new")
    assert not store.relations_for(a.id).needs_review
    ignored = store.judge_relation(rel.sync_id, "ignored")
    assert ignored.state == "ignored" and not ignored.active
    assert store.relation_count(a.id) == 0
    reopened = store.judge_relation(rel.sync_id, "pending")
    assert reopened.active and store.relation_count(a.id) == 1
    with pytest.raises(ValidationError, match="status must be one of"):
        store.judge_relation(rel.sync_id, "orphaned")
    with pytest.raises(NotFoundError):
        store.judge_relation("rel-0000000000000000")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"relation": "loves"}, ValidationError, "relation must be one of"),
        ({"status": "maybe"}, ValidationError, "status must be one of"),
        ({"confidence": 1.5}, ValidationError, "confidence must be a number"),
        ({"confidence": True}, ValidationError, "confidence must be a number"),
        ({"reason": "x\x00y"}, ValidationError, "reason"),
        ({"reason": "x" * 5000}, ValidationError, "over the 4,000"),
    ],
)
def test_bad_relation_arguments_write_nothing(store: Store, kwargs, error, message) -> None:
    a, b = save(store, "A", "first"), save(store, "B", "second")
    args = {"relation": "related", **kwargs}
    relation = args.pop("relation")
    before = store.db.scalar("SELECT COUNT(*) FROM sync_journal")
    with pytest.raises(error, match=message):
        store.relate(a.id, b.id, relation, **args)
    assert store.db.scalar("SELECT COUNT(*) FROM memory_relations") == 0
    assert store.db.scalar("SELECT COUNT(*) FROM sync_journal") == before


def test_a_relation_never_links_two_projects(store: Store) -> None:
    a = save(store, "A", "in acme")
    b = save(store, "B", "in widgets", project="widgets")
    with pytest.raises(ValidationError, match="never links two projects"):
        store.relate(a.id, b.id, "related")
    # Naming the other project's memory by its sync id inside acme finds nothing.
    with pytest.raises(NotFoundError):
        store.relate(a.id, b.sync_id, "related", project="acme")
    assert store.db.scalar("SELECT COUNT(*) FROM memory_relations") == 0


def test_missing_deleted_and_self(store: Store) -> None:
    a, b = save(store, "A", "first"), save(store, "B", "second")
    with pytest.raises(NotFoundError, match="#999"):
        store.relate(a.id, 999, "related")
    with pytest.raises(ValidationError, match="itself"):
        store.relate(a.id, f"#{a.id}", "related")
    store.delete_observation(b.id)
    with pytest.raises(NotFoundError):
        store.relate(a.id, b.id, "related")
    with pytest.raises(ValidationError, match="required"):
        store.relate(None, a.id, "related")


def test_a_sync_id_in_two_projects_needs_a_project(store: Store) -> None:
    a = save(store, "A", "acme one", topic_key="x/y")
    b = save(store, "B", "acme two")
    w = save(store, "W", "widgets", project="widgets")
    # The same key in two projects (moves make derived keys; here we plant one).
    store.db.conn.execute("UPDATE observations SET sync_id = ? WHERE id = ?", (a.sync_id, w.id))
    with pytest.raises(ValidationError, match="several projects"):
        store.relate(a.sync_id, b.id, "related")
    assert store.relate(a.sync_id, b.id, "related", project="acme").project == "acme"


def test_supersession_cycles_are_refused(store: Store) -> None:
    a, b, c = (save(store, n, f"text {n}") for n in ("A", "B", "C"))
    store.relate(b.id, a.id, "supersedes")
    store.relate(c.id, b.id, "supersedes")
    with pytest.raises(ValidationError, match="cycle") as info:
        store.relate(a.id, c.id, "supersedes")
    assert f"#{c.id} supersedes #{b.id} supersedes #{a.id}" in str(info.value)
    # Turning an existing supersession round replaces it: no cycle with itself.
    flipped = store.relate(a.id, b.id, "supersedes")
    assert flipped.source.id == a.id
    # Judging a relation into a cycle is refused too; ignoring it is fine.
    d = save(store, "D", "text D")
    rel = store.relate(d.id, c.id, "conflicts_with", status="pending")
    store.relate(d.id, a.id, "supersedes")  # d > a
    store.relate(c.id, d.id, "related")
    rel2 = store.relate(a.id, c.id, "related")
    store.judge_relation(rel2.sync_id, "judged", relation="supersedes")  # a > c: fine
    with pytest.raises(ValidationError, match="cycle"):
        store.judge_relation(
            store.relate(c.id, d.id, "related").sync_id, "judged", relation="supersedes"
        )
    assert store.judge_relation(rel.sync_id, "ignored").state == "ignored"


def test_deleting_a_memory_orphans_its_relations(store: Store) -> None:
    a, b = save(store, "Old", "redis sessions"), save(store, "New", "postgres sessions")
    rel = store.relate(b.id, a.id, "supersedes")
    store.delete_observation(a.id)
    found = store.relations_for(b.id).relations
    assert [(r.sync_id, r.state, r.target.deleted) for r in found] == [
        (rel.sync_id, "orphaned", True)
    ]
    assert store.relation_count(b.id) == 0 and store.relations_of(b.sync_id) == []
    with pytest.raises(ValidationError, match="orphaned"):
        store.judge_relation(rel.sync_id, "judged")
    store.delete_observation(b.id, hard=True)
    assert store.get_relation(rel.sync_id).state == "orphaned"


def test_search_annotates_and_ranks_superseded_memories_below_their_successor(
    store: Store,
) -> None:
    old = save(store, "Session store: Redis", "session store session store Redis redis")
    new = save(store, "Session store", "We moved the session store to PostgreSQL")
    other = save(store, "Unrelated", "session cookies are signed")
    before = [o.id for o in store.search("session store redis", project="acme")]
    assert before.index(old.id) < before.index(new.id)  # ranking alone puts the old one first
    store.relate(new.id, old.id, "supersedes")
    results = store.search("session store redis", project="acme")
    ids = [o.id for o in results]
    assert ids.index(old.id) == ids.index(new.id) + 1
    notes = {o.id: [n["note"] for n in o.relations or []] for o in results}
    assert notes[new.id] == [f"supersedes #{old.id} (Session store: Redis)"]
    assert notes[old.id] == [f"superseded by #{new.id} (Session store)"]
    assert notes.get(other.id, []) == []
    assert results[ids.index(old.id)].to_dict()["relations"][0]["direction"] == "in"
    # An ignored supersession neither annotates nor reorders.
    rel = store.relations_for(new.id).relations[0]
    store.judge_relation(rel.sync_id, "ignored")
    assert [o.id for o in store.search("session store redis", project="acme")] == before


def test_a_cycle_made_by_two_replicas_still_orders(store: Store) -> None:
    """Cycles can only come from replicas (each side refused locally): ranking keeps every
    member once."""
    from engram.store.relations import order_superseded

    a, b, c = (save(store, n, f"text {n}") for n in ("A", "B", "C"))
    results = [a, b, c]
    ordered = order_superseded(results, {a.id: b.id, b.id: a.id, c.id: a.id})
    assert sorted(o.id for o in ordered) == [a.id, b.id, c.id]
    assert order_superseded(results, {c.id: a.id}) == [a, c, b]


def test_relations_of_and_counts(store: Store) -> None:
    a, b, c = (save(store, n, f"text {n}") for n in ("A", "B", "C"))
    store.relate(b.id, a.id, "supersedes")
    store.relate(c.id, a.id, "conflicts_with", status="pending")
    assert store.relations_of(a.sync_id) == [
        {"type": "superseded_by", "target": b.sync_id},
        {"type": "contested_by", "target": c.sync_id},
    ]
    assert store.relations_of(b.sync_id, project="acme") == [
        {"type": "supersedes", "target": a.sync_id}
    ]
    assert store.relation_count(a.id) == 2
    assert store.relation_counts([a.id, b.id, c.id, 999]) == {a.id: 2, b.id: 1, c.id: 1}
    assert [r.target.id for r in store.review_queue("acme")] == [a.id]


def test_personal_memories_make_personal_relations(store: Store) -> None:
    mine = save(store, "Mine", "my notes", scope="personal")
    shared = save(store, "Shared", "team notes")
    rel = store.relate(mine.id, shared.id, "related")
    assert rel.scope == "personal"
    # Personal relations never leave the machine unless asked (DESIGN §3 invariant 5).
    assert all(e.entity != "relation" for e in store.journal.pending("git:/x"))
    assert any(
        e.entity == "relation" for e in store.journal.pending("git:/x", include_personal=True)
    )
    # A project-scoped relation someone else wrote about a personal memory is not shown.
    store.db.conn.execute("UPDATE memory_relations SET scope = 'project'")
    assert store.relations_for(shared.id).relations == []


def test_unknown_payload_fields_travel_with_the_next_edit(store: Store, make_store) -> None:
    """DESIGN §3 "Forward compatibility": fields a newer version put in a relation are kept
    and written back by this replica's next edit of it."""
    a, b = save(store, "A", "first"), save(store, "B", "second")
    rel = store.relate(b.id, a.id, "related")
    newer = next(e.as_record() for e in store.journal.pending("x") if e.entity == "relation")
    other = make_store("other")
    other.apply_mutations([e.record for e in store.journal.pending("y")], source="peer:a")
    newer["payload"]["weight_v9"] = 3
    newer["mid"] = "f" * 32
    newer["hlc"] = newer["hlc"][:14] + "00009" + newer["hlc"][19:]
    other.apply_mutations([orjson.dumps(newer)], source="peer:a")
    local_b = other.get_observation_by_sync_id(b.sync_id, project="acme")
    other.judge_relation(rel.sync_id, "judged", reason="edited on a replica")
    last = [e.as_record() for e in other.journal.pending("z") if e.entity == "relation"][-1]
    assert last["payload"]["weight_v9"] == 3 and last["payload"]["reason"] == "edited on a replica"
    assert local_b.id


def test_merging_projects_moves_relations_with_their_memories(store: Store) -> None:
    a = save(store, "A", "first", project="old-name")
    b = save(store, "B", "second", project="old-name")
    store.relate(b.id, a.id, "supersedes")
    store.merge_projects(["old-name"], "new-name")
    moved = store.relations_for(b.id)
    assert moved.project == "new-name"
    assert [(r.project, r.relation, r.state, r.target.id) for r in moved.relations] == [
        ("new-name", "supersedes", "judged", a.id)
    ]
    assert store.search("first second", project="new-name")[0].relations is not None
