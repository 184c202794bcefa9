"""The entity graph at the store: ingest (one memory, the pending ones, again after an edit),
queries that connect named entities with their source memories, relationships of an entity,
and that changed or deleted memories leave the graph (no deleted text lingers)."""

from __future__ import annotations

import pytest

from engram.errors import NotFoundError, ValidationError
from engram.graph.llm import LLMExtractor
from engram.store import Store

MEMORIES = [
    (
        "Auth middleware",
        "The auth middleware validates the JWT and loads the user from the session cache.",
    ),
    ("Session cache", "The session cache reads entries from the session store when a key expires."),
    ("Session store", "The session store runs on Redis with a 30 minute TTL."),
    ("CI", "The CI pipeline runs on GitHub Actions."),
]


def seed(store: Store, project: str = "acme") -> list[int]:
    return [
        store.add_observation(title=t, content=c, project=project).observation.id
        for t, c in MEMORIES
    ]


def test_ingest_then_query_connects_entities_with_their_sources(store: Store) -> None:
    ids = seed(store)
    assert store.graph_pending("acme") == 4
    report = store.graph_ingest(project="acme")
    assert (report.memories, report.remaining, report.extractor) == (4, 0, "rules")
    assert store.graph_ingest(project="acme").memories == 0  # nothing left to do
    answer = store.graph_query(
        "What connects the auth middleware to the session store?", project="acme"
    )
    assert answer.connected and [e.name for e in answer.entities] == [
        "auth middleware",
        "session store",
    ]
    chain = [(t.subject, t.predicate, t.object, t.source.id) for t in answer.triples]
    assert chain == [
        ("auth middleware", "reads_from", "session cache", ids[0]),
        ("session cache", "reads_from", "session store", ids[1]),
    ]
    assert answer.triples[0].sources[0].title == "Auth middleware"


def test_relationships_and_entities(store: Store) -> None:
    ids = seed(store)
    found = store.graph_relationships("Session Store", project="acme")  # case-insensitive
    assert found.kind == "service"
    assert {(r.predicate, r.direction, r.target) for r in found.relationships} == {
        ("reads_from", "in", "session cache"),
        ("runs_on", "out", "Redis"),
    }
    assert store.graph_relationships("nothing like it").relationships == []
    top = store.graph_entities("acme", limit=3)
    assert {e.name for e in top} <= {"session cache", "session store", "auth middleware", "JWT"}
    mine = store.graph_of_memory(ids[2])
    assert ("session store", "runs_on", "Redis") in {
        (t["subject"], t["predicate"], t["object"]) for t in mine["triples"]
    }


def test_edits_and_deletes_leave_the_graph(store: Store) -> None:
    ids = seed(store)
    store.graph_ingest(project="acme")
    store.update_observation(ids[2], content="The session store runs on Memcached now.")
    assert store.graph_pending("acme") == 1  # the edited memory only
    assert store.db.scalar("SELECT COUNT(*) FROM graph_entities WHERE name = 'Redis'") == 0
    found = store.graph_relationships("session store", project="acme")
    assert ("runs_on", "Memcached") in {(r.predicate, r.target) for r in found.relationships}
    store.delete_observation(ids[3], hard=True)
    for table in ("graph_triples", "graph_mentions", "graph_ingested"):
        assert (
            store.db.scalar(f"SELECT COUNT(*) FROM {table} WHERE observation_id = ?", (ids[3],))
            == 0
        )
    assert store.db.scalar("SELECT COUNT(*) FROM graph_entities WHERE name = 'GitHub'") == 0
    store.delete_observation(ids[1])  # soft: the row stays, its graph goes
    assert (
        store.db.scalar("SELECT COUNT(*) FROM graph_triples WHERE observation_id = ?", (ids[1],))
        == 0
    )
    answer = store.graph_query(
        "What connects the auth middleware to the session store?", project="acme"
    )
    assert not answer.connected
    assert all(t.source.id != ids[1] for t in answer.triples)


def test_remote_changes_make_memories_pending_again(store: Store, make_store) -> None:
    from .replicas import exchange

    other = make_store("other")
    ids = seed(other)
    exchange(other, store)
    assert store.graph_ingest(project="acme").memories == 4
    other.update_observation(
        ids[0], content="The auth middleware no longer uses the session cache."
    )
    exchange(other, store)
    assert store.graph_pending("acme") == 1


def test_one_memory_and_bad_input(store: Store) -> None:
    ids = seed(store)
    assert store.graph_ingest(ids[0]).memories == 1
    with pytest.raises(NotFoundError):
        store.graph_ingest(999)
    with pytest.raises(ValidationError, match="question cannot be empty"):
        store.graph_query("  ")
    with pytest.raises(ValidationError, match="question"):
        store.graph_query("a\x00b")
    with pytest.raises(ValidationError, match="limit"):
        store.graph_query("x", limit=0)
    # FTS and SQL syntax in a question are only words.
    answer = store.graph_query('session" OR 1=1; -- NEAR(store *', project="acme")
    assert answer.count >= 0
    assert store.graph_query("zzz unknown things").triples == []


def test_queries_catch_up_with_new_memories(store: Store) -> None:
    seed(store)
    answer = store.graph_query("what does the session store run on?", project="acme")
    assert answer.not_ingested == 0
    assert ("session store", "runs_on", "Redis") in {
        (t.subject, t.predicate, t.object) for t in answer.triples
    }


class _Provider:
    """A provider speaking the LLMProvider protocol; it answers what a model would."""

    name = "test:model"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete(self, system: str, prompt: str) -> str:
        self.prompts.append(prompt)
        if "boom" in prompt:
            raise RuntimeError("provider down")
        return '{"entities": [], "triples": [{"subject": "auth middleware", "predicate": "guards", "object": "admin pages", "weight": 0.8}]}'


def test_an_llm_extractor_adds_to_the_rules(store: Store) -> None:
    ids = seed(store)
    store.add_observation(
        title="boom", content="secret <private>token</private> boom", project="acme"
    )
    provider = _Provider()
    report = store.graph_ingest(project="acme", extractor=LLMExtractor(provider))
    assert report.extractor == "rules+llm:test:model" and len(report.errors) == 1
    assert report.memories == 5  # the memory whose call failed keeps its rule-based graph
    assert all("token" not in p or "REDACTED" in p for p in provider.prompts)
    found = store.graph_relationships("auth middleware", project="acme")
    assert ("guards", "admin pages") in {(r.predicate, r.target) for r in found.relationships}
    assert ("reads_from", "session cache") in {(r.predicate, r.target) for r in found.relationships}
    del ids


def _graph_of(store: Store) -> set[tuple[str, str, str, str]]:
    """The graph by names and memory keys (local ids differ between machines)."""
    return {
        tuple(r)
        for r in store.db.rows(
            """SELECT s.norm, t.predicate, o.norm, m.sync_id FROM graph_triples t
               JOIN graph_entities s ON s.id = t.subject JOIN graph_entities o ON o.id = t.object
               JOIN observations m ON m.id = t.observation_id"""
        )
    }


def test_a_teammates_graph_converges(store: Store, make_store) -> None:
    """Entities are never synced: two machines holding the same memories derive the same
    graph, whatever order the memories and edits arrived in."""
    from .replicas import exchange

    other = make_store("other")
    ids = seed(store)
    seed(other, project="acme")
    exchange(store, other)
    exchange(other, store)
    store.update_observation(ids[2], content="The session store runs on PostgreSQL now.")
    exchange(store, other)
    for replica in (store, other):
        replica.graph_ingest(project="acme")
    assert _graph_of(store) == _graph_of(other) and _graph_of(store)
