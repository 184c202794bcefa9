"""The later export format (``0.2.0``) carries relations: exported when there are some, imported
(from Engram and in the Go tool's shape), never across projects; a bad relation refuses the
whole document."""

from __future__ import annotations

import copy

import pytest

from engram.errors import UnsupportedFormatError, ValidationError
from engram.store import Store

GO_EXPORT = {
    "version": "0.2.0",
    "exported_at": "2026-03-01 10:00:00",
    "sessions": [
        {
            "id": "go-s1",
            "project": "acme",
            "directory": "/src/acme",
            "started_at": "2026-03-01 09:00:00",
        }
    ],
    "observations": [
        {
            "id": 1,
            "sync_id": "obs-go0000000000a1",
            "session_id": "go-s1",
            "type": "decision",
            "title": "Sessions in Redis",
            "content": "We keep sessions in Redis",
            "project": "acme",
            "scope": "project",
            "revision_count": 1,
            "duplicate_count": 1,
            "created_at": "2026-03-01 09:10:00",
            "updated_at": "2026-03-01 09:10:00",
            "pinned": True,
        },
        {
            "id": 2,
            "sync_id": "obs-go0000000000a2",
            "session_id": "go-s1",
            "type": "decision",
            "title": "Sessions in PostgreSQL",
            "content": "We keep sessions in PostgreSQL",
            "project": "acme",
            "scope": "project",
            "revision_count": 1,
            "duplicate_count": 1,
            "created_at": "2026-03-01 09:20:00",
            "updated_at": "2026-03-01 09:20:00",
        },
        {
            "id": 3,
            "sync_id": "obs-go0000000000b1",
            "session_id": "go-s2",
            "type": "manual",
            "title": "Elsewhere",
            "content": "other project",
            "project": "widgets",
            "scope": "project",
            "created_at": "2026-03-01 09:30:00",
            "updated_at": "2026-03-01 09:30:00",
        },
    ],
    "prompts": None,
    # The Go tool's relations table as its export writes it: no project (it is the memories').
    "memory_relations": [
        {
            "id": 7,
            "sync_id": "rel-go00000000000001",
            "source_id": "obs-go0000000000a2",
            "target_id": "obs-go0000000000a1",
            "relation": "supersedes",
            "reason": "moved",
            "evidence": "ADR-7",
            "confidence": 0.9,
            "judgment_status": "judged",
            "marked_by_actor": "alice",
            "marked_by_kind": "human",
            "marked_by_model": None,
            "session_id": "go-s1",
            "superseded_at": None,
            "superseded_by_relation_id": None,
            "created_at": "2026-03-01 09:25:00",
            "updated_at": "2026-03-01 09:25:00",
        },
        {
            "id": 8,
            "sync_id": "rel-go00000000000002",
            "source_id": "obs-go0000000000a2",
            "target_id": "obs-go0000000000b1",
            "relation": "related",
            "judgment_status": "pending",
            "created_at": "2026-03-01 09:35:00",
            "updated_at": "2026-03-01 09:35:00",
        },
    ],
}


def test_go_0_2_0_relations_import(store: Store, make_store) -> None:
    result = store.import_data(copy.deepcopy(GO_EXPORT))
    assert (result.observations_imported, result.relations_imported) == (3, 1)
    assert result.skipped == 1  # the relation across two projects
    rel = store.get_relation("rel-go00000000000001")
    assert (rel.project, rel.relation, rel.state, rel.confidence, rel.evidence) == (
        "acme",
        "supersedes",
        "judged",
        0.9,
        "ADR-7",
    )
    assert rel.source.title == "Sessions in PostgreSQL"
    results = store.search("sessions", project="acme")
    assert [o.title for o in results] == ["Sessions in PostgreSQL", "Sessions in Redis"]
    # Legacy records: every machine importing the same file writes the same mutations.
    other = make_store("other")
    other.import_data(copy.deepcopy(GO_EXPORT))
    assert other.canonical_export() == store.canonical_export()
    assert store.import_data(copy.deepcopy(GO_EXPORT)).relations_imported == 0


def test_round_trip_through_our_export(store: Store, make_store) -> None:
    a = store.add_observation(title="A", content="first", project="acme").observation
    b = store.add_observation(title="B", content="second", project="acme").observation
    assert store.export_data()["version"] == "0.1.0"  # nothing to carry yet
    store.relate(b.id, a.id, "conflicts_with", status="pending", reason="differ")
    doc = store.export_data("acme")
    assert doc["version"] == "0.2.0" and doc["relations"][0]["reason"] == "differ"
    other = make_store("other")
    assert other.import_data(doc).relations_imported == 1
    copied = other.list_relations("acme")[0]
    assert (copied.relation, copied.state, copied.source.title) == (
        "conflicts_with",
        "pending",
        "B",
    )


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"version": "0.1.0"}, UnsupportedFormatError, "carries no relations"),
        ({"version": "0.3.0"}, UnsupportedFormatError, "unsupported export version"),
        ({"memory_relations": {}}, ValidationError, "relations must be a list"),
        (
            {"memory_relations": [{"source_id": "a", "target_id": "b"}]},
            ValidationError,
            "relation is required",
        ),
        (
            {
                "memory_relations": [
                    {"source_id": "a", "target_id": "b", "relation": "x", "confidence": 2}
                ]
            },
            ValidationError,
            "confidence",
        ),
        (
            {
                "memory_relations": [
                    {"source_id": "a", "target_id": "b", "relation": "x", "reason": "\x00"}
                ]
            },
            ValidationError,
            "reason",
        ),
        (
            {
                "memory_relations": [
                    {
                        "source_id": "a",
                        "target_id": "b",
                        "relation": "x",
                        "judgment_status": "maybe",
                    }
                ]
            },
            ValidationError,
            "judgment_status",
        ),
    ],
)
def test_a_bad_relation_refuses_the_whole_document(store: Store, change, error, message) -> None:
    doc = {**copy.deepcopy(GO_EXPORT), **change}
    with pytest.raises(error, match=message):
        store.import_data(doc)
    assert store.count_observations() == 0


def test_relations_that_cannot_be_placed_are_skipped(store: Store) -> None:
    doc = copy.deepcopy(GO_EXPORT)
    doc["memory_relations"] = [
        {"source_id": "obs-nowhere", "target_id": "obs-go0000000000a1", "relation": "related"},
        {
            "source_id": "obs-go0000000000a1",
            "target_id": "obs-go0000000000a1",
            "relation": "related",
        },
        {
            "source_id": "obs-go0000000000a1",
            "target_id": "obs-go0000000000a2",
            "relation": "Not An Id",
        },
        {
            "source_id": "obs-go0000000000a1",
            "target_id": "obs-go0000000000a2",
            "relation": "related",
            "project": "widgets",
        },
    ]
    result = store.import_data(doc)
    assert (result.relations_imported, result.skipped) == (0, 4)
    assert store.db.scalar("SELECT COUNT(*) FROM memory_relations") == 0
