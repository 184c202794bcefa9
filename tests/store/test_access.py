"""Access counts (issue 21): searches and reads count, locally, without a database write per
search; folding loses and doubles nothing when processes race or stop."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from engram.settings import Config
from engram.store import Store
from engram.store.access import _json_string


def data_version(path: Path) -> int:
    """SQLite's data_version seen from another connection: it changes when anyone commits."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA data_version").fetchone()[0]
    finally:
        conn.close()


def test_a_search_or_a_read_writes_no_database_transaction(store: Store) -> None:
    obs = store.add_observation(title="Redis eviction", content="allkeys-lru", project="acme")
    # The save's deferred conflict check (docs/graph.md) is the one write a later read may do;
    # run it now, so what is measured is the reads themselves.
    store.detect_conflicts(limit=None)
    import sqlite3

    watcher = sqlite3.connect(store.path)
    version = watcher.execute("PRAGMA data_version").fetchone()[0]
    journal = store.journal.count_pending("x")
    for _ in range(50):
        assert store.search("redis eviction")
        store.get_observation(obs.observation.id, record_access=True)
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == version
    assert store.journal.count_pending("x") == journal  # reads are never replicated
    assert store.access.pending_bytes() > 0
    watcher.close()


def test_searches_and_reads_count_once_folded(store: Store) -> None:
    hit = store.add_observation(title="Redis eviction", content="allkeys-lru", project="acme")
    other = store.add_observation(title="Postgres", content="vacuum", project="other")
    before = store.get_observation(hit.observation.id).importance
    for _ in range(3):
        store.search("redis")
    shown = store.get_observation(hit.observation.id, record_access=True)
    assert shown.access_count == 0  # folded in batches: the same count on every face
    assert store.access.pending_counts()[("acme", hit.observation.sync_id)] == 4
    store.search("redis", record_access=False)  # as-you-type search: not a read
    assert store.access.fold() == 4
    after = store.get_observation(hit.observation.id)
    assert after.access_count == 4 and after.last_accessed_at is not None
    assert after.importance > before  # 4 reads of 10 add 0.06
    assert store.get_observation(other.observation.id).access_count == 0
    assert store.access.fold() == 0 and store.access.pending_bytes() == 0


def test_the_log_folds_itself_once_it_is_big_enough(data_dir: Path) -> None:
    with Store.open(config=Config(data_dir=data_dir, access_fold_bytes=2000)) as store:
        obs = store.add_observation(title="Redis", content="eviction", project="acme")
        for _ in range(60):
            store.search("redis")
        folded = store.get_observation(obs.observation.id).access_count
        assert 0 < folded <= 60
        assert (
            folded + store.access.pending_counts().get(("acme", obs.observation.sync_id), 0) == 60
        )


def test_hits_are_counted_once_when_a_fold_stopped_before_deleting_its_file(store: Store) -> None:
    obs = store.add_observation(title="Redis", content="eviction", project="acme").observation
    store.search("redis")
    store.search("redis")
    # A fold that committed, then stopped before deleting its file: the file is still there.
    store.access._take_current()
    (taken,) = store.path.parent.glob("*.folding")
    kept = taken.read_bytes()
    assert store.access.fold() == 2
    taken.write_bytes(kept)  # as if the unlink never happened
    assert store.access.fold() == 0
    assert store.get_observation(obs.id).access_count == 2
    assert not list(store.path.parent.glob("*.folding"))


def test_a_torn_line_and_foreign_lines_are_skipped(store: Store) -> None:
    obs = store.add_observation(title="Redis", content="eviction", project="acme").observation
    store.search("redis")
    with open(store.access.path, "ab") as log:
        log.write(b'["acme", "obs-gone", "2026-01-01 00:00:00"]\n{"not": "a hit"}\n["acme", "ob')
    assert store.access.fold() == 2  # ours and the one of a memory that no longer exists
    assert store.get_observation(obs.id).access_count == 1


def test_concurrent_searchers_and_folders_lose_no_hit(data_dir: Path) -> None:
    config = Config(data_dir=data_dir, access_fold_bytes=1500)
    with Store.open(config=config) as store:
        key = store.add_observation(title="Redis", content="eviction", project="acme")
    threads, per_thread = 4, 40

    def search() -> None:
        with Store.open(config=config) as mine:
            for _ in range(per_thread):
                mine.search("redis")

    workers = [threading.Thread(target=search) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    with Store.open(config=config) as store:
        store.access.fold()
        assert store.get_observation(key.observation.id).access_count == threads * per_thread


def test_hits_wait_in_memory_and_are_appended_when_the_store_closes(data_dir: Path) -> None:
    """A search does not touch the log file (an append per search was ~4% of its time): the
    hits wait in memory, and closing the store appends them, so no normal exit loses one."""
    config = Config(data_dir=data_dir)
    with Store.open(config=config) as store:
        key = store.add_observation(title="Redis", content="eviction", project="acme")
        store.search("redis")
        store.get_observation(key.observation.id, record_access=True)
        assert not store.access.path.exists()
    assert store.access.path.exists()
    with Store.open(config=config) as other:
        assert other.access.pending_counts() == {("acme", key.observation.sync_id): 2}


def test_hits_are_appended_once_a_second_has_passed_or_the_buffer_is_full(
    data_dir: Path, monkeypatch
) -> None:
    from engram.store import access

    with Store.open(config=Config(data_dir=data_dir, access_fold_bytes=1_000_000)) as store:
        store.add_observation(title="Redis", content="eviction", project="acme")
        clock = [1000.0]
        monkeypatch.setattr(access.time, "monotonic", lambda: clock[0])
        store.search("redis")
        clock[0] += access.BUFFER_SECONDS / 2
        store.search("redis")
        assert not store.access.path.exists()
        clock[0] += access.BUFFER_SECONDS / 2
        store.search("redis")  # the oldest hit has waited long enough: all three appended
        assert store.access.path.read_bytes().count(b"\n[") == 3
        for _ in range(access.BUFFER_HITS):  # the buffer fills
            store.search("redis")
        assert store.access.path.read_bytes().count(b"\n[") > 3


def test_hits_noted_by_a_process_that_never_closes_its_store_are_appended_at_exit(
    data_dir: Path,
) -> None:
    import subprocess
    import sys

    with Store.open(config=Config(data_dir=data_dir)) as store:
        key = store.add_observation(title="Redis", content="eviction", project="acme")
    script = (
        "from pathlib import Path; from engram.settings import Config;"
        "from engram.store import Store; import sys;"
        f"s = Store.open(config=Config(data_dir=Path({str(data_dir)!r})));"
        "s.search('redis', mode='lexical'); sys.exit(0)"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    with Store.open(config=Config(data_dir=data_dir)) as store:
        assert store.access.pending_counts() == {("acme", key.observation.sync_id): 1}


def test_the_log_is_private(store: Store) -> None:
    store.add_observation(title="Redis", content="eviction", project="acme")
    store.search("redis")
    store.access.flush()  # hits are appended in batches (see the tests below)
    assert os.stat(store.access.path).st_mode & 0o077 == 0


def test_a_file_folded_but_not_yet_deleted_keeps_its_name_through_a_fold_that_missed_it(
    store: Store, monkeypatch
) -> None:
    """The race behind a double count seen under load: folder A folds a file and commits but
    has not deleted it yet; folder X, which listed the files before A took that one, commits
    next and used to drop every name it had not seen; folder B then counted A's file again."""
    from engram.store import access, scoring

    obs = store.add_observation(title="Redis", content="eviction", project="acme").observation
    store.search("redis")  # one hit, in the current log: folder X takes and folds it
    taken_by_a = store.access.path.with_name(
        f"{store.access.path.name}.aaaa{access.FOLDING_SUFFIX}"
    )
    real_rescore = scoring.rescore_ids

    def folder_a_commits_meanwhile(conn, ids, now=None):  # inside X's write transaction
        taken_by_a.write_bytes(f'["acme", "{obs.sync_id}", "2026-01-01 00:00:00"]\n'.encode())
        conn.execute("UPDATE observations SET access_count = access_count + 1 WHERE id = ?",
                     (obs.id,))  # fmt: skip
        conn.execute("INSERT INTO access_folds(name, folded_at) VALUES (?, '')", (taken_by_a.name,))
        return real_rescore(conn, ids, now)

    monkeypatch.setattr(scoring, "rescore_ids", folder_a_commits_meanwhile)
    assert store.access.fold() == 1  # folder X: its own hit
    monkeypatch.setattr(scoring, "rescore_ids", real_rescore)
    assert store.access.fold() == 0  # folder B: A's file was folded already, only deleted
    assert not taken_by_a.exists()
    assert store.get_observation(obs.id).access_count == 2


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_hit_lines_write_any_text_as_the_json_string_it_is(text: str) -> None:
    """Names and keys are written as JSON by hand (no JSON library on the search path), most
    without translating a character: whatever they hold reads back as itself."""
    assert json.loads(_json_string(text)) == text
