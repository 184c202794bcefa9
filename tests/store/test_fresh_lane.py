"""Issue 18: a bulk apply (an import's chunk) writes its records that create a row at an empty
address a run at a time with a few statements (engram/store/fresh_lane.py). What it writes
must be exactly what applying the same records one at a time writes: rows, journal (order,
elision), deliveries, counts, session context, both full-text indexes, vector queue and
scores."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from engram.record import build_record, derived_sync_id, format_hlc
from engram.store import Store
from engram.store.replication import BULK_RECORDS


def journal(store: Store) -> list[tuple]:
    return [
        tuple(r)
        for r in store.db.rows(
            "SELECT mid, hlc, entity, key, op, project, scope, record, source FROM sync_journal"
            " ORDER BY seq"
        )
    ]


def written(store: Store) -> dict[str, list[tuple]]:
    """Everything an apply writes, in a comparable form."""
    queries = {
        "observations": "SELECT * FROM observations ORDER BY id",
        "prompts": "SELECT * FROM user_prompts ORDER BY id",
        "sessions": "SELECT * FROM sessions ORDER BY project, id",
        "tombstones": "SELECT * FROM sync_tombstones ORDER BY entity, project, key",
        "delivery": "SELECT d.target, j.mid FROM sync_delivery d JOIN sync_journal j USING (seq)"
        " ORDER BY d.seq",
        "targets": "SELECT * FROM sync_targets ORDER BY target",
        # The live memories waiting for a vector: queued, or new since the queue's mark
        # (vector_queue.py; a queued id whose memory is gone is dropped by the vectorizer).
        "vectors": "SELECT id FROM observations WHERE deleted_at IS NULL AND (id IN"
        " (SELECT obs_id FROM vector_pending) OR id > (SELECT last_id FROM queue_marks WHERE queue = 'vectors'))"
        " ORDER BY id",
        "kept": "SELECT * FROM sync_kept_observations ORDER BY seq",
        "words": "SELECT rowid FROM observations_fts WHERE observations_fts MATCH 'walrus'"
        " ORDER BY rowid",
        "prompt_words": "SELECT rowid FROM prompts_fts WHERE prompts_fts MATCH 'walrus'"
        " ORDER BY rowid",
    }
    out = {name: [tuple(r) for r in store.db.rows(sql)] for name, sql in queries.items()}
    out["journal"] = journal(store)
    for fts in ("observations_fts", "prompts_fts"):
        store.db.conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
    return out


def go_copy(store: Store, memory_id: int) -> str:
    """The record of a memory's copy as the Go tool brings it back (its derived key, a legacy
    clock), as a chunk line."""
    o = store.get_observation(memory_id)
    key = derived_sync_id("observation", project=o.project, session_id=o.session_id,
                          created_at=o.created_at, title=o.title, content=o.content)  # fmt: skip
    payload = {"sync_id": key, "session_id": o.session_id, "type": o.type, "title": o.title,
               "content": o.content, "tool_name": None, "project": o.project,
               "scope": "project", "topic_key": None, "revision_count": 1,
               "duplicate_count": 1, "last_seen_at": None, "created_at": o.created_at,
               "updated_at": o.created_at, "deleted_at": None}  # fmt: skip
    record = build_record(mid="f" * 31 + "0", hlc=format_hlc(1_700_000_000_000, 0, "0" * 16),
                          origin="0" * 16, entity="observation", key=key, op="upsert",
                          project=o.project, scope="project", payload=payload)  # fmt: skip
    return orjson.dumps(record).decode()


def mixed_records(make_store) -> tuple[list[str], int]:
    """A replica's journal with every kind of record, and how many of them a receiver gets
    one at a time before the batch (so the batch also meets rows that are already there)."""
    a = make_store("a")
    ids = []
    a.create_session("s-late", "p", "/src")
    for i in range(BULK_RECORDS + 20):
        session = f"s{i // 15}" if i % 9 else "manual"
        if i % 6 == 0:
            a.add_prompt(f"walrus prompt {i}?", session_id=session, project="p")
        ids.append(a.add_observation(title=f"Memory {i}", content=f"walrus fact number {i}",
                                     project="p" if i % 11 else "q",
                                     session_id=session).observation.id)  # fmt: skip
    a.end_session("s-late", "done")
    a.update_observation(ids[3], content="walrus fact three, edited")
    a.update_observation(ids[40], content="walrus fact forty, edited")
    a.delete_observation(ids[5])  # soft
    a.delete_observation(ids[8], hard=True)
    a.delete_observation(ids[41], hard=True)
    a.relate(ids[10], ids[12], "related")
    records = [e.record for e in a.journal.pending("x")]
    records.insert(30, go_copy(a, ids[20]))  # a Go copy of a memory, before the memory
    records.append(records[7])  # a duplicate
    return records, 12


def test_a_bulk_apply_writes_what_applying_one_by_one_writes(make_store) -> None:
    records, before = mixed_records(make_store)
    one, bulk = make_store("one"), make_store("bulk")
    for store in (one, bulk):
        for record in records[:before]:
            store.apply_mutations([record], source="git:/x")
    singles = [one.apply_mutations([r], source="git:/x") for r in records[before:]]
    result = bulk.apply_mutations(records[before:], source="git:/x")
    assert len(records) - before >= BULK_RECORDS
    assert written(bulk) == written(one)
    assert bulk.canonical_export() == one.canonical_export()
    for name in ("applied", "duplicates", "stale", "observations", "prompts", "sessions",
                 "relations", "copies_retired"):  # fmt: skip
        assert getattr(result, name) == sum(getattr(r, name) for r in singles), name
    assert result.copies_retired == 1 and result.duplicates == 1


def test_a_bulk_apply_in_reverse_order_converges_on_the_same_memories(make_store) -> None:
    records, _ = mixed_records(make_store)
    forward, backward = make_store("forward"), make_store("backward")
    forward.apply_mutations(records, source="git:/x")
    backward.apply_mutations(records[::-1], source="git:/x")
    assert backward.canonical_export() == forward.canonical_export()
    contexts = "SELECT project, sync_id, search_context FROM observations ORDER BY 1, 2"
    assert backward.db.rows(contexts) == forward.db.rows(contexts)


def test_new_records_are_written_a_run_at_a_time(make_store) -> None:
    """Creating rows costs a few statements per run of new records, not several per record
    (before: a lookup, the row, its stub session, the Go-copy check and the journal row each
    ran once per record)."""
    a = make_store("a")
    for i in range(200):
        a.add_observation(title=f"Memory {i}", content=f"walrus fact {i}", project="p",
                          session_id=f"s{i // 20}")  # fmt: skip
        if i % 10 == 0:
            a.add_prompt(f"walrus prompt {i}?", session_id=f"s{i // 20}", project="p")
    records = [e.record for e in a.journal.pending("x")]
    b = make_store("b")
    counted = Counted(b.db.conn)
    b.db.conn = counted  # type: ignore[assignment]
    try:
        result = b.apply_mutations(records, source="git:/x")
    finally:
        b.db.conn = counted.conn
    assert result.applied == len(records) > 220
    assert counted.calls < len(records) // 4, counted.calls
    assert b.canonical_export() == a.canonical_export()


class Counted:
    """The store's connection, counting the statements it is asked to run (an
    ``executemany`` is one call, however many rows it writes)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.calls = 0

    def execute(self, *args: Any) -> sqlite3.Cursor:
        self.calls += 1
        return self.conn.execute(*args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        self.calls += 1
        return self.conn.executemany(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def test_a_bulk_apply_derives_contexts_by_looking_its_sessions_up(make_store) -> None:
    """The sessions a bulk apply derives again are looked up through the session index, one
    by one: with an IN list SQLite scanned the whole index (or built an automatic index of
    the whole table) for every batch, so an import's derivation grew with the store. (Only
    sessions the store held rows of before the batch are derived again: the receiver holds
    the first memory of each session.)"""
    a = make_store("a")
    for i in range(BULK_RECORDS + 10):
        a.add_observation(title=f"Memory {i}", content=f"walrus fact {i}", project="p",
                          session_id=f"s{i // 5}")  # fmt: skip
    records = [e.record for e in a.journal.pending("x")]
    b = make_store("b")
    b.apply_mutations([r for i, r in enumerate(records) if i % 5 == 0], source="git:/x")
    seen: list[str] = []
    b.db.conn.set_trace_callback(seen.append)
    try:
        b.apply_mutations([r for i, r in enumerate(records) if i % 5], source="git:/x")
    finally:
        b.db.conn.set_trace_callback(None)
    # (The derivation reads the sessions' memories and prompts, then follows the rule in
    # Python: batch_contexts._read_and_derived.)
    [memories] = [s for s in seen if "SELECT o.id, o.search_context" in s]
    [prompts] = [s for s in seen if "FROM wanted CROSS JOIN user_prompts" in s]
    for derivation, index in ((memories, "observations_session"),
                              (prompts, "user_prompts_context")):  # fmt: skip
        plan = [r[3] for r in b.db.rows(f"EXPLAIN QUERY PLAN {derivation}")]
        assert any(step.startswith("SEARCH") and f"USING INDEX {index}" in step
                   for step in plan), plan  # fmt: skip
        assert not any(step.startswith(("SCAN o", "SCAN p", "SCAN observations",
                                        "SCAN user_prompts")) for step in plan), plan  # fmt: skip


def test_a_bulk_batch_still_quarantines_hostile_fresh_records(make_store) -> None:
    """The lane takes only records whose rules it knows the outcome of: a new memory with a
    clock far ahead, or whose payload names another project than its record, is quarantined
    with its reason inside a bulk batch exactly as when it comes alone, and the rest applies."""
    from types import SimpleNamespace

    from engram.store import quarantine

    from .test_trust import FAR_FUTURE, upsert_of

    a = make_store("a")
    for i in range(BULK_RECORDS + 10):
        a.add_observation(title=f"Memory {i}", content=f"walrus fact number {i}", project="p")
    records: list[Any] = [e.record for e in a.journal.pending("x")]

    def fresh(key: str) -> SimpleNamespace:
        return SimpleNamespace(sync_id=key, session_id="manual", type="manual", title="Planted",
                               topic_key=None)  # fmt: skip

    ahead = upsert_of(fresh("obs-future00000000001"), project="p", content="FOREVER",
                      hlc=FAR_FUTURE)  # fmt: skip
    liar = upsert_of(fresh("obs-liar000000000001"), project="q", content="ATTACKER TEXT")
    liar["payload"]["project"] = "p"  # a q record carrying a p payload
    records[20:20] = [ahead, liar]
    victim = make_store("victim")
    result = victim.apply_mutations(records, source="git:/elsewhere")
    assert len(records) >= BULK_RECORDS
    assert result.quarantined == {"clock_skew": 1, "invalid": 1}
    assert result.observations == BULK_RECORDS + 10
    held = {(q.reason, q.key) for q in quarantine.listing(victim.db)}
    assert held == {("clock_skew", "obs-future00000000001"), ("invalid", "obs-liar000000000001")}
    planted = victim.db.rows("SELECT sync_id FROM observations WHERE title = 'Planted'")
    assert list(planted) == []


def test_a_bulk_apply_indexes_its_new_prompts_in_one_segment(make_store) -> None:
    """New prompts are indexed at the batch's end with its memories, in rowid order. Indexed
    as each run was written, every later record that runs a trigger (an edit of a memory
    already here keeps its state) made FTS5 flush them: one tiny segment per run, merged
    again and again (3,246 index page writes in an import of 20,000 mutations)."""
    a = make_store("a")
    old = [a.add_observation(title=f"Old {i}", content=f"fact {i}", project="p",
                             session_id="s-old").observation.id for i in range(10)]  # fmt: skip
    b = make_store("b")
    b.apply_mutations([e.record for e in a.journal.pending("x")], source="git:/x")
    before = len(b.journal.pending("y"))
    for i in range(BULK_RECORDS):
        a.add_prompt(f"walrus prompt {i}?", session_id=f"s{i // 10}", project="p")
        a.add_observation(title=f"Memory {i}", content=f"walrus fact {i}", project="p",
                          session_id=f"s{i // 10}")  # fmt: skip
        a.update_observation(old[i % 10], content=f"fact {i}, edited")
    records = [e.record for e in a.journal.pending("x")][before:]
    one = make_store("one")
    one.apply_mutations([e.record for e in a.journal.pending("x")][:before], source="git:/x")
    for record in records:
        one.apply_mutations([record], source="git:/x")
    b.apply_mutations(records, source="git:/x")
    segments = "SELECT count(DISTINCT segid) FROM prompts_fts_idx"
    assert b.db.scalar(segments) == 1
    assert written(b) == written(one)
