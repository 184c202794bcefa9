"""Conflict detection (issue 20): a new memory very similar to another of its project but saying
something different is linked ``conflicts_with`` (pending) and both need review. The check runs
off the save path: saving only queues it; the next read (or a server's background worker) does
it."""

from __future__ import annotations

import threading

from engram.store import Store
from engram.store.conflicts import ConflictWorker, compare, words


def save(store: Store, title: str, content: str, project: str = "acme", **kw):
    return store.add_observation(title=title, content=content, project=project, **kw).observation


def test_compare_rules() -> None:
    redis = words("Session store: we keep sessions in Redis with a 30 minute TTL")
    postgres = words("Session store: we keep sessions in PostgreSQL with a 30 minute TTL")
    assert compare(redis, postgres) is not None
    assert "redis" in compare(redis, postgres).reason  # type: ignore[union-attr]
    # The same thing said again is a duplicate, not a conflict.
    assert (
        compare(redis, words("Session store: we keep the sessions in Redis, 30 minute TTL")) is None
    )
    # Adding details only extends a memory.
    longer = words("Session store: we keep sessions in Redis with a 30 minute TTL and a replica")
    assert compare(redis, longer) is None
    # Saying the opposite is a conflict even when nothing else differs.
    negated = words("Session store: we do not keep sessions in Redis with a 30 minute TTL")
    verdict = compare(redis, negated)
    assert verdict is not None and "opposite" in verdict.reason
    # Little in common: not a conflict, unless both are in one topic family.
    loose = words("sessions expire after 30 minutes in the cache")
    assert compare(redis, loose) is None
    a, b = words("decision db hosted redis fast"), words("decision db hosted postgres cache slow")
    assert compare(a, b) is None and compare(a, b, same_family=True) is not None  # 3 of 8


def test_a_conflict_is_found_on_the_next_read_not_at_save(store: Store) -> None:
    old = save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    new = save(store, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
    # Saving only queued the checks: no relation exists yet.
    assert store.pending_conflict_checks() == 2
    assert store.db.scalar("SELECT COUNT(*) FROM memory_relations") == 0
    results = store.search("session store", project="acme", check_conflicts=True)  # as faces do
    assert store.pending_conflict_checks() == 0
    rel = store.list_relations("acme")
    assert [(r.relation, r.state, r.source.id, r.target.id) for r in rel] == [
        ("conflicts_with", "pending", new.id, old.id)
    ]
    assert rel[0].marked_by_kind == "system" and 0.5 <= (rel[0].confidence or 0) < 0.9
    notes = {o.id: [n["note"] for n in o.relations or []] for o in results}
    assert notes[new.id] == [f"conflicts with #{old.id} (Session store) — pending review"]
    assert notes[old.id] == [f"contested by #{new.id} (Session store) — pending review"]
    assert store.relations_for(old.id).needs_review and store.relations_for(new.id).needs_review
    # The conflict is a relation like any other: it replicates.
    assert any(e.entity == "relation" for e in store.journal.pending("git:/x"))


def test_what_is_not_a_conflict(store: Store) -> None:
    base = save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL and a replica")
    save(store, "CI", "The CI pipeline runs on GitHub Actions every night")
    save(
        store,
        "Session store",
        "We keep sessions in PostgreSQL with a 30 minute TTL",
        project="other",
    )
    save(
        store,
        "Session store",
        "We keep sessions in Memcached with a 30 minute TTL",
        scope="personal",
    )
    assert store.detect_conflicts() == []
    assert store.relations_for(base.id).relations == []


def test_a_judged_pair_is_never_flagged_again(store: Store) -> None:
    old = save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    new = save(store, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
    [rel] = store.detect_conflicts()
    store.judge_relation(rel.sync_id, "judged", relation="supersedes")
    store.update_observation(new.id, content="We keep sessions in PostgreSQL with a 60 minute TTL")
    assert store.detect_conflicts() == []
    assert store.get_relation(rel.sync_id).relation == "supersedes"
    assert store.relation_count(old.id) == 1


def test_topic_family_lowers_the_bar(store: Store) -> None:
    # 3 words of 7 in common: too little on its own, enough in one topic family.
    save(store, "Team server database", "PostgreSQL, hosted", project="plain")
    save(store, "Team server cache", "Redis, hosted", project="plain")
    assert store.detect_conflicts() == []
    a = save(store, "Team server database", "PostgreSQL, hosted", topic_key="decision/database")
    b = save(store, "Team server cache", "Redis, hosted", topic_key="decision/cache")
    found = store.detect_conflicts()
    assert [(r.source.id, r.target.id) for r in found] == [(b.id, a.id)]
    assert "same topic family" in (found[0].reason or "")


def test_deleted_and_changed_memories_in_the_queue(store: Store) -> None:
    save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    gone = save(store, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
    store.delete_observation(gone.id)
    assert store.detect_conflicts() == []
    assert store.pending_conflict_checks() == 0


def test_the_background_worker_checks_without_any_read(store: Store) -> None:
    done = threading.Event()
    store.add_write_listener(lambda: store.pending_conflict_checks() == 0 and done.set())
    with ConflictWorker(store, delay=0.01):
        save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
        save(store, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
        assert done.wait(10)
    assert store.db.scalar("SELECT COUNT(*) FROM memory_relations") == 1


def test_other_projects_never_crowd_out_the_candidates(store: Store) -> None:
    """The best full-text matches may all be another project's: the check then looks within
    its own project."""
    for i in range(90):
        save(
            store,
            "Session store",
            "We keep sessions in PostgreSQL with a 30 minute TTL",
            project=f"p{i}",
        )
    old = save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    store.detect_conflicts(limit=None)
    new = save(store, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
    found = store.detect_conflicts()
    assert [(r.source.id, r.target.id) for r in found] == [(new.id, old.id)]


def test_template_texts_with_little_in_common_are_not_conflicts(store: Store) -> None:
    """Short notes written from one template ("b 1 backlog 1" …) share too few words to be
    about one thing."""
    for i in range(5):
        save(store, f"b {i}", f"backlog {i}")
    save(store, "From first", "written through the first process")
    save(store, "From second", "written through the second process")
    assert store.detect_conflicts() == []
    assert compare(words("alpha beta"), words("alpha gamma")) is None


def test_a_read_after_a_bulk_save_does_a_bounded_share(store: Store) -> None:
    """After many saves the first read runs the newest checks first and stops after its time
    budget (at least one check); later reads and the worker do the rest."""
    import engram.store.conflicts as conflicts

    for i in range(30):
        save(store, f"Note {i}", f"alpha bravo charlie delta number {i}")
    old = save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    store.detect_conflicts(limit=None)
    for i in range(30):
        save(store, f"More {i}", f"echo foxtrot golf hotel number {i}")
    new = save(store, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
    budget, conflicts.READ_BUDGET_S = conflicts.READ_BUDGET_S, 0.0
    try:
        results = store.search("session store", project="acme", check_conflicts=True)
    finally:
        conflicts.READ_BUDGET_S = budget
    assert store.pending_conflict_checks() == 30  # one check ran: the newest save's
    assert {o.id: [n["note"] for n in o.relations or []] for o in results}[new.id] == [
        f"conflicts with #{old.id} (Session store) — pending review"
    ]


def test_a_plain_search_leaves_the_queue_to_the_faces_and_workers(store: Store) -> None:
    """Issue 18: a backlog of checks (after a bulk save) cost every search up to its whole
    budget, some milliseconds each; the library's search takes on none of them (the CLI, MCP
    and HTTP searches ask for them, the workers of ``engram mcp`` and ``serve`` run them), and
    still shows the relations that exist."""
    import sqlite3

    old = save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    new = save(store, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
    watcher = sqlite3.connect(store.path)
    version = watcher.execute("PRAGMA data_version").fetchone()[0]
    results = store.search("session store", project="acme")
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == version  # nothing written
    assert store.pending_conflict_checks() == 2
    assert all(o.relations == [] for o in results)
    store.detect_conflicts()
    notes = {o.id: [n["note"] for n in o.relations or []]
             for o in store.search("session store", project="acme")}  # fmt: skip
    assert notes[new.id] == [f"conflicts with #{old.id} (Session store) — pending review"]
    watcher.close()


def test_a_run_of_checks_finds_what_single_checks_find(make_store) -> None:
    """One run reads how many memories hold each word once and keeps the counts for its next
    checks (issue 18): it must make the same relations, with the same reasons, as checks run
    one per run, each reading the counts afresh."""
    stores = make_store("together"), make_store("one-by-one")
    engines = ["Redis", "PostgreSQL", "Memcached", "SQLite", "DynamoDB"]
    for store in stores:
        for i, engine in enumerate(engines):
            for project in ("acme", "beta"):
                save(store, "Session store", f"We keep sessions in {engine} with a 30 minute TTL",
                     project=project)  # fmt: skip
                save(store, f"Deploys {i}", f"The deploy job runs nightly on runner {engine}",
                     project=project)  # fmt: skip
        save(store, "Session store", "We do not keep sessions in Redis with a 30 minute TTL")
    together, alone = stores
    made = together.detect_conflicts(limit=None)
    while alone.detect_conflicts(limit=1) or alone.pending_conflict_checks():
        pass

    def relations(store: Store) -> list[tuple]:
        rows = store.db.rows(
            """SELECT s.project, s.content, t.content, r.reason, r.confidence
                 FROM memory_relations r JOIN observations s ON s.sync_id = r.source_id
                 JOIN observations t ON t.sync_id = r.target_id"""
        )  # (sync ids are random: each store names its memories its own way)
        return sorted(tuple(r) for r in rows)

    assert len(made) >= 10
    assert relations(together) == relations(alone)


def test_a_memory_of_many_words_is_checked_by_its_longest(store: Store) -> None:
    """A pasted log of hundreds of distinct words is not counted word by word: its longest
    words make the candidate query, and its conflict is still found."""
    base = [f"w{n:04d}" for n in range(600)]
    old = save(store, "Build log", " ".join(base))
    new = save(store, "Build log", " ".join(base[:450] + [f"x{n:04d}" for n in range(120)]))
    found = store.detect_conflicts()
    assert [(r.source.id, r.target.id) for r in found] == [(new.id, old.id)]


def test_only_short_texts_words_are_kept() -> None:
    """The words of recent texts are kept for the next checks, but not those of long texts: a
    long-running process must not hold a thousand 50 KB memories."""
    from engram.store.conflicts import KEPT_CHARS, _kept_words

    long = ("Redis keeps the sessions " * (KEPT_CHARS // 20))[: KEPT_CHARS + 1]
    before = _kept_words.cache_info().currsize
    assert words(long) == {"redis", "keep", "session"}
    assert _kept_words.cache_info().currsize == before
    assert words("Redis keeps the sessions") == {"redis", "keep", "session"}
    assert _kept_words.cache_info().currsize in (before, before + 1)


def test_a_pair_related_the_other_way_round_is_never_flagged_again(store: Store) -> None:
    """The pair's relation is looked up in both directions (one indexed seek each): when the
    older memory of a judged pair is edited and checked again, the relation — written from the
    newer memory to the older — still keeps the check from linking them a second time."""
    old = save(store, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    new = save(store, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
    [rel] = store.detect_conflicts()
    assert (rel.source.id, rel.target.id) == (new.id, old.id)
    store.judge_relation(rel.sync_id, "judged", relation="related")
    store.update_observation(old.id, content="We keep sessions in Redis with a 45 minute TTL")
    assert store.detect_conflicts() == []
    assert store.relation_count(old.id) == 1 and store.relation_count(new.id) == 1
