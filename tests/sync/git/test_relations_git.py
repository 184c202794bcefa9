"""Relations through git sync (issue 20): exported and imported like every mutation; a chunk
holding a relation whose memories are in a chunk not pulled yet leaves it waiting (the chunk is
done, nothing blocks) until that chunk arrives; the Go tool's later relation mutations (written
from the reference's relation upsert payload: the Go build here predates relations) import in
the repository's project; the scope gate holds back relations of projects not bound here."""

from __future__ import annotations

from pathlib import Path

from engram.store import Store, quarantine
from engram.sync.git.gitdir import SyncDir
from tests.support.sync_git import canonical, export, import_, pull
from tests.sync.git.clones import world  # noqa: F401 - the real-git fixture
from tests.sync.git.gofixtures import go_mutation, write_go_chunk


def _pair(store: Store) -> tuple[int, int]:
    old = store.add_observation(
        title="Sessions in Redis", content="We keep sessions in Redis", project="acme"
    )
    new = store.add_observation(
        title="Sessions in PostgreSQL", content="Sessions moved to PostgreSQL", project="acme"
    )
    return old.observation.id, new.observation.id


def test_relations_travel_through_a_sync_directory(make_store, sync_dir: SyncDir) -> None:
    a, b = make_store("a"), make_store("b")
    old, new = _pair(a)
    a.relate(new, old, "supersedes", reason="we moved")
    report = export(a, sync_dir)
    assert report.total("relations") == 1
    result = import_(b, sync_dir)
    assert result.applied.relations == 1 and canonical(b) == canonical(a)
    # Judged on b, exported from b, imported back on a.
    rel = b.list_relations("acme")[0]
    b.judge_relation(rel.sync_id, "ignored", reason="not really")
    export(b, sync_dir)
    import_(a, sync_dir)
    assert a.get_relation(rel.sync_id).state == "ignored"
    assert canonical(a) == canonical(b)


def test_a_relation_chunk_before_its_memories_chunk_waits(make_store, tmp_path: Path) -> None:
    a, b = make_store("a"), make_store("b")
    theirs, mine = (
        SyncDir(tmp_path / "a" / "acme" / ".engram"),
        SyncDir(tmp_path / "acme" / ".engram"),
    )
    old, new = _pair(a)
    first = export(a, theirs).chunks[0].id  # the memories
    a.relate(new, old, "supersedes")
    second = export(a, theirs).chunks[0].id  # the relation
    mine.log_dir.mkdir(parents=True)
    name = f"{second}.jsonl.gz"
    (mine.log_dir / name).write_bytes((theirs.log_dir / name).read_bytes())
    report = import_(b, mine)
    assert report.chunks_imported == [second] and report.applied.quarantined == {
        "waiting_endpoint": 1
    }
    assert [q.reason for q in quarantine.listing(b.db)] == ["waiting_endpoint"]
    pull(theirs, mine)
    report = import_(b, mine)
    assert report.chunks_imported == [first] and report.applied.released == 1
    assert quarantine.listing(b.db) == [] and canonical(b) == canonical(a)


GO_RELATION = {
    # The reference's relation upsert payload (§2.12), as a later Go version journals it.
    "sync_id": "rel-go00000000000001",
    "source_id": "obs-go000000000003",
    "target_id": "obs-go000000000001",
    "relation": "supersedes",
    "reason": "refresh is done by the gateway now",
    "evidence": "PR 42",
    "confidence": 0.8,
    "judgment_status": "judged",
    "marked_by_actor": "alice",
    "marked_by_kind": "human",
    "marked_by_model": None,
    "session_id": "go-s1",
    "project": "Acme",
    "created_at": "2026-01-05 10:00:00",
    "updated_at": "2026-01-05 10:00:00",
}
GO_OBSERVATIONS = [
    {
        "id": n,
        "sync_id": f"obs-go00000000000{n}",
        "session_id": "go-s1",
        "type": "bugfix",
        "title": title,
        "content": content,
        "project": "Acme",
        "scope": "project",
        "revision_count": 1,
        "duplicate_count": 1,
        "created_at": f"2026-01-0{n} 03:10:00",
        "updated_at": f"2026-01-0{n} 03:10:00",
    }
    for n, title, content in (
        (1, "Token refresh", "the client refreshes tokens"),
        (3, "Gateway refresh", "the gateway refreshes tokens"),
    )
]
GO_SESSIONS = [
    {
        "id": "go-s1",
        "project": "Acme",
        "directory": "/src/acme",
        "started_at": "2026-01-01 00:00:00",
    }
]


def test_go_relation_mutations_import_in_the_repositorys_project(
    store: Store, sync_dir: SyncDir
) -> None:
    write_go_chunk(
        sync_dir.path,
        GO_SESSIONS,
        GO_OBSERVATIONS,
        None,
        [go_mutation(9, "relation", GO_RELATION["sync_id"], "upsert", GO_RELATION, double=True)],
    )
    report = import_(store, sync_dir)
    assert report.failures == [] and report.skipped_relations == 0
    assert report.applied.relations == 1
    rel = store.get_relation("rel-go00000000000001")
    assert (rel.project, rel.relation, rel.state, rel.confidence) == (
        "acme",
        "supersedes",
        "judged",
        0.8,
    )
    assert (rel.source.title, rel.target.title) == ("Gateway refresh", "Token refresh")
    assert rel.marked_by_actor == "alice" and rel.evidence == "PR 42"
    found = store.search("refresh tokens", project="acme")
    assert [o.title for o in found] == ["Gateway refresh", "Token refresh"]
    assert found[1].relations[0]["note"].startswith("superseded by #")


def test_a_go_relation_waits_for_a_later_go_chunk(store: Store, sync_dir: SyncDir) -> None:
    write_go_chunk(
        sync_dir.path,
        None,
        None,
        None,
        [go_mutation(9, "relation", GO_RELATION["sync_id"], "upsert", GO_RELATION)],
    )
    first = import_(store, sync_dir)
    assert first.applied.quarantined == {"waiting_endpoint": 1} and first.failures == []
    write_go_chunk(sync_dir.path, GO_SESSIONS, GO_OBSERVATIONS, None)
    second = import_(store, sync_dir)
    assert second.applied.released == 1
    assert store.get_relation("rel-go00000000000001").state == "judged"


def test_bad_go_relations_are_quarantined_alone(store: Store, sync_dir: SyncDir) -> None:
    bad = {**GO_RELATION, "sync_id": "rel-bad", "relation": "DROP TABLE", "confidence": "high"}
    self_link = {**GO_RELATION, "sync_id": "rel-self", "target_id": GO_RELATION["source_id"]}
    write_go_chunk(
        sync_dir.path,
        GO_SESSIONS,
        GO_OBSERVATIONS,
        None,
        [
            go_mutation(9, "relation", "rel-bad", "upsert", bad),
            go_mutation(10, "relation", "rel-self", "upsert", self_link),
            go_mutation(11, "relation", GO_RELATION["sync_id"], "upsert", GO_RELATION),
        ],
    )
    report = import_(store, sync_dir)
    assert report.failures == [] and report.applied.relations == 1
    assert report.applied.quarantined == {"invalid": 2}
    assert store.count_observations("acme") == 2


def test_relations_of_unbound_projects_are_held_back(make_store, sync_dir: SyncDir) -> None:
    a, b = make_store("a"), make_store("b")
    x = a.add_observation(title="X", content="x", project="widgets").observation
    y = a.add_observation(title="Y", content="y", project="widgets").observation
    a.relate(x.id, y.id, "related")
    export(a, sync_dir, ["widgets"])
    report = import_(b, sync_dir)
    assert [(h.project, h.records) for h in report.held] == [("widgets", 4)]
    assert b.db.scalar("SELECT COUNT(*) FROM memory_relations") == 0


def test_two_clones_share_relations_through_real_git(world) -> None:  # noqa: F811
    """Alice relates two memories with the CLI, pushes; Bob pulls, imports and sees the
    relation; his judgment comes back to Alice the same way."""
    import orjson

    from tests.sync.git.clones import Clone

    root, remote, env = world
    alice, bob = Clone(root, "alice", remote, env), Clone(root, "bob", remote, env)
    old = alice.save("Sessions in Redis", "We keep sessions in Redis")
    new = alice.save("Sessions in PostgreSQL", "We moved sessions to PostgreSQL")
    made = orjson.loads(alice.engram("graph", "relate", str(new), "supersedes", str(old), "--json"))
    alice.sync_and_commit("alice: relation")
    alice.git("push", "-q")
    bob.pull()
    bob.engram("sync", "--import")
    hit = bob.find("PostgreSQL")
    shown = orjson.loads(bob.engram("get", str(hit["id"]), "--json"))
    assert [(r["sync_id"], r["relation"], r["state"]) for r in shown["relations"]] == [
        (made["sync_id"], "supersedes", "judged")
    ]
    found = orjson.loads(bob.engram("search", "sessions", "--json"))
    assert [m["title"] for m in found] == ["Sessions in PostgreSQL", "Sessions in Redis"]
    bob.engram("graph", "judge", made["sync_id"], "ignored", "--reason", "both still true")
    bob.sync_and_commit("bob: judged")
    bob.pull()
    bob.git("push", "-q")
    alice.pull()
    alice.engram("sync", "--import")
    judged = orjson.loads(alice.engram("graph", "show", str(new), "--json"))
    assert [(r["state"], r["reason"]) for r in judged["relations"]] == [
        ("ignored", "both still true")
    ]
    assert alice.canonical() == bob.canonical()


def test_a_go_relation_of_another_project_moves_with_its_memories(
    store: Store, sync_dir: SyncDir
) -> None:
    """The Go tool names a project after the clone's folder: rows of another name move into
    the repository's project under moved keys (the Go bridge), and so does their relation,
    whose ends still name them."""
    observations = [{**o, "project": "acme-fork"} for o in GO_OBSERVATIONS]
    relation = {**GO_RELATION, "project": "acme-fork"}
    sessions = [{**s, "project": "acme-fork"} for s in GO_SESSIONS]
    write_go_chunk(
        sync_dir.path, sessions, observations, None,
        [go_mutation(9, "relation", relation["sync_id"], "upsert", relation)],
    )  # fmt: skip
    report = import_(store, sync_dir)
    assert report.failures == [] and report.applied.relations == 1
    [rel] = store.list_relations("acme")
    assert rel.sync_id != GO_RELATION["sync_id"] and rel.state == "judged"
    assert (rel.source.title, rel.target.title) == ("Gateway refresh", "Token refresh")
