"""New memories wait for their vector and their conflict check without a queue row
(engram/store/queue_marks.py): the memories above a queue's mark are pending, and the queue's
worker takes them in when it starts. These tests need no model: they check the bookkeeping
every install runs (tests/semantic/test_vectors.py embeds for real)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson

from engram.settings import Config
from engram.store import Store, conflicts, vector_queue
from engram.store.conflicts import ConflictWorker
from engram.store.schema import MIGRATIONS, SCHEMA_VERSION, migration_queue_marks

QUEUES = {"vectors": "SELECT obs_id FROM vector_pending ORDER BY obs_id",
          "conflicts": "SELECT observation_id FROM graph_conflict_queue ORDER BY observation_id"}  # fmt: skip


def queued(store: Store, queue: str = "vectors") -> list[int]:
    return [r[0] for r in store.db.rows(QUEUES[queue])]


def mark(store: Store, queue: str = "vectors") -> int:
    return int(store.db.scalar("SELECT last_id FROM queue_marks WHERE queue = ?", (queue,)))


def take(store: Store) -> None:
    with store.db.write() as conn:
        vector_queue.QUEUE.take_new(conn)


def save(store: Store, word: str, **fields) -> int:
    return store.add_observation(
        title=word, content=f"about the {word}", project="p", **fields
    ).observation.id


def test_a_save_writes_no_queue_row_and_its_memory_still_waits(store: Store) -> None:
    assert not store.vectors_pending()
    first, second = save(store, "walrus"), save(store, "otter")
    assert queued(store) == queued(store, "conflicts") == [] and mark(store) == 0
    assert store.vectors_pending() and store._waiting(None) == 2
    assert store.pending_conflict_checks() == 2
    take(store)
    assert queued(store) == [first, second] and mark(store) == second
    take(store)  # nothing new: no change
    assert queued(store) == [first, second] and mark(store) == second
    assert store._waiting(None) == 2 and store._waiting("other") == 0
    third = save(store, "heron")  # saved after the queue took the others: waits above the mark
    assert queued(store) == [first, second] and store._waiting(None) == 3
    take(store)
    assert queued(store) == [first, second, third] and mark(store) == third
    assert mark(store, "conflicts") == 0  # each queue has its own mark


def test_deleted_memories_above_the_mark_do_not_wait(store: Store) -> None:
    kept, soft, hard = save(store, "walrus"), save(store, "otter"), save(store, "heron")
    store.delete_observation(soft)
    store.delete_observation(hard, hard=True)
    assert store._waiting(None) == 1 and store.pending_conflict_checks() == 1
    take(store)
    # (The hard delete queued its memory, as every change of indexed text does: the vectorizer
    # drops a queued memory that is gone.)
    assert kept in queued(store) and soft not in queued(store)
    assert store._waiting(None) == 1
    newer = save(store, "pelican")  # ids only grow: a hard-deleted top id is never reused
    assert newer > hard and store._waiting(None) == 2


def test_an_edit_below_the_mark_is_queued_by_the_edit(store: Store) -> None:
    oid = save(store, "walrus")
    take(store)
    store.detect_conflicts()
    store.db.conn.execute("DELETE FROM vector_pending")  # as if the vectorizer had embedded it
    assert not store.vectors_pending() and store.pending_conflict_checks() == 0
    store.update_observation(oid, content="about the walrus, edited")
    assert queued(store) == queued(store, "conflicts") == [oid]
    assert store.vectors_pending() and store.pending_conflict_checks() == 1


def test_only_memories_saved_here_get_a_conflict_check(
    make_store: Callable[[str], Store],
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    for i in range(40):
        save(alice, f"animal{i}")
    bob.apply_mutations([e.record for e in alice.journal.pending("x")], source="git:/a/.engram")
    assert queued(bob) == queued(bob, "conflicts") == []
    live = [r[0] for r in bob.db.rows("SELECT id FROM observations ORDER BY id")]
    assert len(live) == 40 and bob._waiting(None) == 40  # every memory needs its vector
    assert bob.pending_conflict_checks() == 0  # but a check only where it was saved
    own = save(bob, "heron")
    duplicate = save(bob, "heron")  # a duplicate save changes no text: nothing more to check
    assert duplicate == own and bob.pending_conflict_checks() == 1
    assert bob.detect_conflicts() == [] and bob.pending_conflict_checks() == 0
    assert mark(bob, "conflicts") == own  # past the memories received, which need no check
    take(bob)
    assert queued(bob) == [*live, own]


def test_the_worker_takes_new_memories_in_as_of_their_save(store: Store) -> None:
    """A memory taken in from above the mark is queued as of when it was saved, so the read
    that settles the newest saves first still finds its own save first."""
    oid = save(store, "walrus")
    with store.db.write() as conn:
        conflicts.QUEUE.take_new(conn)
        queued_at, created_at = conn.execute(
            "SELECT q.queued_at, o.created_at FROM graph_conflict_queue q"
            " JOIN observations o ON o.id = q.observation_id WHERE o.id = ?",
            (oid,),
        ).fetchone()
    assert queued_at == created_at


def test_the_migration_starts_both_marks_at_the_newest_memory(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path / "old")
    with Store.open(config=config) as store:
        ids = [save(store, word) for word in ("walrus", "otter", "heron")]
        # What the version before wrote: every new memory queued, no marks, no saved_here.
        conn = store.db.conn
        conn.execute("INSERT INTO vector_pending(obs_id) VALUES (?), (?)", ids[1:])
        conn.execute("INSERT INTO graph_conflict_queue VALUES (?, '2026-01-01 00:00:00')", ids[2:])
        conn.execute("DROP TABLE queue_marks")
        conn.execute("ALTER TABLE observations DROP COLUMN saved_here")
        conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(migration_queue_marks)}")
    with Store.open(config=config) as store:
        assert store.db.scalar("PRAGMA user_version") == SCHEMA_VERSION
        assert mark(store) == mark(store, "conflicts") == ids[-1]
        assert queued(store) == ids[1:] and queued(store, "conflicts") == ids[2:]  # as they were
        assert store._waiting(None) == 2 and store.pending_conflict_checks() == 1
        newer = save(store, "pelican")
        assert store._waiting(None) == 3 and store.pending_conflict_checks() == 2
        take(store)
        assert queued(store) == [*ids[1:], newer]


def test_the_background_worker_moves_the_mark_once_and_goes_quiet(
    make_store: Callable[[str], Store],
) -> None:
    """Moving the mark past memories received from elsewhere is a write, and every write wakes
    the worker: it must then find nothing new and stop, not wake itself again and again."""
    alice, bob = make_store("alice"), make_store("bob")
    for i in range(20):
        save(alice, f"animal{i}")
    runs: list[float] = []
    real = bob.detect_conflicts

    def counted(*args, **kwargs):
        runs.append(time.monotonic())
        return real(*args, **kwargs)

    bob.detect_conflicts = counted  # type: ignore[method-assign]
    with ConflictWorker(bob, delay=0.01):
        bob.apply_mutations([e.record for e in alice.journal.pending("x")], source="git:/a")
        deadline = time.monotonic() + 10
        while mark(bob, "conflicts") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # many worker delays: a worker waking itself would run on and on
        settled = len(runs)
        time.sleep(0.3)
    assert mark(bob, "conflicts") == 20 and bob.pending_conflict_checks() == 0
    assert settled <= 4 and len(runs) == settled
    assert bob.db.scalar("SELECT COUNT(*) FROM memory_relations") == 0


def test_a_received_record_cannot_claim_it_was_saved_here(
    make_store: Callable[[str], Store],
) -> None:
    """``saved_here`` is this machine's own fact: a payload naming it (an unknown field to the
    replicated state) never reaches the column, so a teammate's records cannot make this
    machine check them, through either lane of a bulk apply or one by one."""
    alice = make_store("alice")
    for i in range(12):
        save(alice, f"animal{i}")
    records = []
    for entry in alice.journal.pending("x"):
        record = entry.record if isinstance(entry.record, dict) else orjson.loads(entry.record)
        if record["entity"] == "observation":
            record = {**record, "payload": {**record["payload"], "saved_here": 1}}
        records.append(record)
    bulk, single = make_store("bulk"), make_store("single")
    bulk.apply_mutations(records, source="git:/a")
    for record in records:
        single.apply_mutations([record], source="cloud:x")
    for bob in (bulk, single):
        assert bob.db.scalar("SELECT COUNT(*) FROM observations") == 12
        assert bob.db.scalar("SELECT COUNT(*) FROM observations WHERE saved_here IS NOT NULL") == 0
        assert bob.pending_conflict_checks() == 0


def test_a_memory_edited_before_it_is_taken_in_waits_once(store: Store) -> None:
    oid = save(store, "walrus")
    store.update_observation(oid, content="about the walrus, edited")  # queued by the edit too
    assert store._waiting(None) == 1 and store.pending_conflict_checks() == 1
    take(store)
    store.detect_conflicts()
    assert queued(store) == [oid] and store.pending_conflict_checks() == 0
