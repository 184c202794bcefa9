"""Relations replicating (DESIGN §3 ``relation`` entity): applied on every replica; a relation
whose memory has not arrived waits in the inbound quarantine (never lost, never blocking) and
applies as soon as the memory does; hostile relation records are quarantined or stay inert."""

from __future__ import annotations

import orjson
import pytest

from engram.record import build_record, format_hlc, new_mid
from engram.store import Store, quarantine
from engram.store.journal import now_ms

from .replicas import exchange


def save(store: Store, title: str, project: str = "acme", **kw):
    return store.add_observation(
        title=title, content=f"{title} content", project=project, **kw
    ).observation


def records(store: Store, entity: str | None = None) -> list[str]:
    return [e.record for e in store.journal.pending("x") if entity is None or e.entity == entity]


def test_relations_replicate_and_converge(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    old, new = save(a, "Old"), save(a, "New")
    a.relate(new.id, old.id, "supersedes", reason="replaced")
    exchange(a, b)
    assert b.canonical_export() == a.canonical_export()
    here = b.get_observation_by_sync_id(new.sync_id, project="acme")
    found = b.relations_for(here.id).relations
    assert [(r.relation, r.state, r.reason) for r in found] == [
        ("supersedes", "judged", "replaced")
    ]
    # Judged on the other replica, the change comes back.
    b.judge_relation(found[0].sync_id, "ignored")
    exchange(b, a)
    assert a.get_relation(found[0].sync_id).state == "ignored"
    assert b.canonical_export() == a.canonical_export()


def test_a_relation_before_its_memory_waits_then_applies(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    old, new = save(a, "Old"), save(a, "New")
    a.relate(new.id, old.id, "supersedes")
    memories = records(a, "observation") + records(a, "session")
    relation = records(a, "relation")
    first = b.apply_mutations([*relation, *memories[:1]], source="git:/repo")
    assert first.quarantined == {"waiting_endpoint": 1} and first.relations == 0
    waiting = quarantine.listing(b.db)
    assert [(q.reason, q.entity, q.project) for q in waiting] == [
        ("waiting_endpoint", "relation", "acme")
    ]
    assert "has not arrived yet" in waiting[0].error
    # Not journaled while it waits: nothing half-known is relayed.
    assert not [e for e in b.journal.pending("y") if e.entity == "relation"]
    later = b.apply_mutations(memories[1:], source="git:/repo")
    assert later.released == 1 and later.relations == 1
    assert quarantine.listing(b.db) == []
    assert b.canonical_export() == a.canonical_export()
    # The relation arrived through git: it is never sent back there.
    assert [e for e in b.journal.pending("git:/repo") if e.entity == "relation"] == []


def test_the_memory_later_in_the_same_batch_releases_it(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    old, new = save(a, "Old"), save(a, "New")
    a.relate(new.id, old.id, "related")
    batch = records(a, "relation") + records(a, "session") + records(a, "observation")
    result = b.apply_mutations(batch, source="peer:a")
    assert result.relations == 1 and result.released == 1 and not quarantine.listing(b.db)
    assert b.canonical_export() == a.canonical_export()


def test_a_memory_saved_locally_also_releases_a_waiting_relation(make_store) -> None:
    """Topic keys are derived: the memory a relation waits for may be saved here."""
    a, b = make_store("a"), make_store("b")
    one = save(a, "One", topic_key="decision/db")
    two = save(a, "Two")
    a.relate(two.id, one.id, "supersedes")
    b.apply_mutations([*records(a, "relation"), records(a, "observation")[1]], source="peer:a")
    assert quarantine.counts(b.db)["inbound"] == {"waiting_endpoint": 1}
    save(b, "One here", topic_key="decision/db")
    assert b.recheck_quarantine().released == 1
    assert quarantine.listing(b.db) == []


def test_a_relation_to_a_deleted_memory_applies_orphaned(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    old, new = save(a, "Old"), save(a, "New")
    a.relate(new.id, old.id, "supersedes")
    a.delete_observation(old.id, hard=True)
    exchange(a, b)
    rel = b.list_relations("acme")[0]
    assert rel.state == "orphaned" and rel.target.deleted
    assert b.canonical_export() == a.canonical_export()


def _relation_record(project: str, source: str, target: str, **payload) -> dict:
    hlc = format_hlc(now_ms(), 0, "0badc0de0badc0de")
    body = {
        "sync_id": "rel-hostile000001",
        "source_id": source,
        "target_id": target,
        "relation": "supersedes",
        "judgment_status": "judged",
        "project": project,
        **payload,
    }
    return build_record(
        mid=new_mid(),
        hlc=hlc,
        origin="0badc0de0badc0de",
        entity="relation",
        key=body["sync_id"],
        op="upsert",
        project=project,
        scope="project",
        payload=body,
    )


def test_a_relation_naming_another_projects_memories_never_links_them(make_store) -> None:
    """Keys are computable: a record of project ``evil`` naming ``acme`` memories addresses
    ``(evil, key)`` only, so it waits for memories that will never exist there."""
    a = make_store("a")
    old, new = save(a, "Old"), save(a, "New")
    result = a.apply_mutations(
        [orjson.dumps(_relation_record("evil", new.sync_id, old.sync_id))], source="git:/x"
    )
    assert result.quarantined == {"waiting_endpoint": 1}
    assert a.relations_for(new.id).relations == [] and a.relation_count(old.id) == 0
    assert a.db.scalar("SELECT COUNT(*) FROM memory_relations") == 0
    assert [o.relations for o in a.search("old new", project="acme")] == [[], []]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"op": "delete"}, "upserts only"),
        ({"payload": {"target_id": "same"}, "source": "same"}, "two different memories"),
        ({"payload": {"relation": "Drop Table"}}, "lowercase identifier"),
        ({"payload": {"judgment_status": "approved"}}, "judgment_status"),
        ({"payload": {"confidence": 7}}, "from 0 to 1"),
        ({"payload": {"confidence": "high"}}, "from 0 to 1"),
        ({"payload": {"reason": "bad\x00text"}}, "NUL"),
        ({"payload": {"project": "other"}}, "does not match project"),
        ({"payload": {"source_id": ""}}, "source_id is required"),
        ({"payload": {"source_id": "x" * 300}}, "at most 256"),
    ],
)
def test_hostile_relation_records_are_quarantined_as_invalid(
    make_store, change: dict, message: str
) -> None:
    a = make_store("a")
    old, new = save(a, "Old"), save(a, "New")
    record = _relation_record("acme", change.get("source", new.sync_id), old.sync_id)
    record["payload"].update(change.get("payload", {}))
    if "op" in change:
        record["op"] = change["op"]
    good = records(a)
    result = a.apply_mutations([orjson.dumps(record)], source="git:/x")
    assert result.quarantined == {"invalid": 1}
    held = quarantine.listing(a.db)
    assert len(held) == 1 and message in held[0].error
    assert a.db.scalar("SELECT COUNT(*) FROM memory_relations") == 0
    assert records(a) == good  # nothing journaled


def test_waiting_relations_never_block_the_records_after_them(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    old, new = save(a, "Old"), save(a, "New")
    a.relate(new.id, old.id, "related")
    later = save(a, "Later")
    batch = [*records(a, "relation"), *records(a, "session"), records(a, "observation")[2]]
    result = b.apply_mutations(batch, source="peer:a")
    assert result.quarantined == {"waiting_endpoint": 1}
    assert b.get_observation_by_sync_id(later.sync_id, project="acme").title == "Later"
