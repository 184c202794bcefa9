"""Delete for good (issue 14): after a hard delete and a purge, no byte of the deleted text is in
``engram.db``, ``engram.db-wal`` or ``engram.db-shm`` — checked by reading the files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from engram.settings import Config
from engram.store import Store, purge
from engram.store.purge_worker import PurgeWorker
from tests.support import run_engram, wait_until

from .replicas import exchange

# The index term, not only the saved text: FTS5 keeps terms of deleted rows in its segments (no
# other term here starts with "z", so it is stored whole, not prefix-compressed).
SECRET = b"zebrafish"


def files_holding(data_dir: Path, needle: bytes = SECRET) -> list[str]:
    return sorted(
        p.name
        for p in data_dir.iterdir()
        if p.name.startswith("engram.db") and needle in p.read_bytes()
    )


def fill(store: Store, count: int = 300) -> None:
    """Enough memories that the index has several segments and the secret shares pages."""
    for i in range(count):
        store.add_observation(
            title=f"note {i}", content=f"ordinary text number {i} " * 8, project="leak",
            session_id=f"s{i // 5}",
        )  # fmt: skip


def test_purge_leaves_no_byte_of_a_hard_deleted_memory(store: Store, data_dir: Path) -> None:
    fill(store)
    store.add_prompt("keep the zebrafish-4471 token safe", session_id="agent", project="leak")
    secret = store.add_observation(
        title="Token for staging", content="the staging token is zebrafish-4471",
        project="leak", session_id="agent",
    ).observation.id  # fmt: skip
    for i in range(3):  # their session context holds the secret
        store.add_observation(title=f"after {i}", content="the build uses make", project="leak",
                              session_id="agent")  # fmt: skip
    store.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the secret is in the main file
    assert files_holding(data_dir) == ["engram.db"]
    prompt = store.recent_prompts(limit=1)[0]
    store.delete_prompt(prompt.id)
    store.delete_observation(secret, hard=True)
    assert files_holding(data_dir)  # deleted, but not yet gone from the files
    assert store.purge_pending()
    report = store.purge()
    assert report.wal_truncated and report.merge_steps >= 2
    assert files_holding(data_dir) == []
    assert not store.purge_pending()
    # Nothing else was lost: the rest is still searchable and the indexes are sound.
    assert len(store.search("ordinary text", limit=20)) == 20
    for fts in ("observations_fts", "prompts_fts"):
        store.db.conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")


def test_a_soft_delete_before_the_hard_delete_leaves_no_text_in_the_journal(
    store: Store, data_dir: Path
) -> None:
    oid = store.add_observation(title="Token", content="zebrafish-4471", project="p").observation.id
    store.update_observation(oid, content="zebrafish-4471 rotated")
    store.delete_observation(oid)  # a soft delete journals the full state
    store.delete_observation(oid, hard=True)
    texts = [r[0] for r in store.db.rows("SELECT record FROM sync_journal")]
    assert not any("zebrafish" in t for t in texts)
    assert not any("zebrafish" in e.record for e in store.journal.pending("t"))
    store.purge()
    assert files_holding(data_dir) == []


def test_a_hard_delete_from_a_replica_is_purged_there(store: Store, make_store) -> None:
    other = make_store("other")
    oid = store.add_observation(title="Token", content="zebrafish-4471", project="p",
                                session_id="s1").observation.id  # fmt: skip
    store.add_observation(title="Next", content="the build uses make", project="p", session_id="s1")
    exchange(store, other)
    store.delete_observation(oid, hard=True)
    exchange(store, other)
    assert other.search("zebrafish") == []
    other.purge()
    assert files_holding(other.path.parent) == []


def test_purge_vacuums_once_a_database_written_without_secure_deletes(data_dir: Path) -> None:
    config = Config(data_dir=data_dir)
    with Store.open(config=config) as store:
        fill(store, 50)
        oid = store.add_observation(title="Token", content="zebrafish-4471", project="p")
        store.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.db.conn.execute("PRAGMA secure_delete=OFF")  # as every Engram before this one
        store.delete_observation(oid.observation.id, hard=True)
        store.db.conn.execute("UPDATE store_purge SET vacuum_needed = 1")  # what migration 9 sets
        store.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert files_holding(data_dir) == ["engram.db"]
        report = store.purge()
        assert report.vacuumed
        assert files_holding(data_dir) == []
        assert not store.purge(  # the next purge does not vacuum again
        ).vacuumed


def test_purge_is_pending_after_journal_blanking(store: Store) -> None:
    store.journal.mark_delivered("git:/elsewhere", [])  # nothing: no target yet
    oid = store.add_observation(title="Token", content="zebrafish-4471", project="p").observation.id
    assert not store.purge_pending()
    store.purge()
    assert not store.purge_pending()
    store.delete_observation(oid, hard=True)
    assert store.purge_pending()
    store.purge()
    assert not store.purge_pending()


def test_the_background_worker_purges_after_a_quiet_moment(store: Store, data_dir: Path) -> None:
    worker = PurgeWorker(store, delay=0.05)
    worker.start()
    try:
        oid = store.add_observation(title="Token", content="zebrafish-4471", project="p")
        store.delete_observation(oid.observation.id, hard=True)
        wait_until(lambda: worker.purges, timeout=30)
    finally:
        worker.stop()
    assert worker.purges >= 1
    assert files_holding(data_dir) == []


@pytest.mark.parametrize("auto", [True, False])
def test_the_cli_purges_in_the_background_after_a_hard_delete(data_dir: Path, auto: bool) -> None:
    env = {} if auto else {"ENGRAM_AUTO_PURGE": "0"}

    def ok(*args: str) -> str:
        done = run_engram(*args, data_dir=data_dir, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    ok("save", "Token for staging", "the staging token is zebrafish-4471", "--project", "leak")
    ok("save", "Unrelated note", "the build uses make", "--project", "leak")
    ok("delete", "1", "--hard")
    if auto:
        wait_until(lambda: files_holding(data_dir) == [], timeout=60, every=0.2)
        assert orjson.loads(ok("purge", "--if-pending", "--json")) == {"purged": False}
    else:
        assert files_holding(data_dir)
        report = orjson.loads(ok("purge", "--json"))
        assert report["purged"] is True and report["wal_truncated"] is True
        assert files_holding(data_dir) == []


def test_engram_mcp_runs_the_worker_unless_turned_off(data_dir: Path, monkeypatch) -> None:
    from engram.mcp.server import background_services

    monkeypatch.delenv("ENGRAM_CLOUD_AUTOSYNC", raising=False)
    with Store.open(config=Config(data_dir=data_dir)) as store:
        running = background_services(store)
    with Store.open(config=Config(data_dir=data_dir, auto_purge=False)) as store:
        quiet = background_services(store)
    # The purge worker, and only it, is turned off (the conflict checker of issue 20 runs in
    # both).
    assert len(running) == len(quiet) + 1 == 2


def _segments(path: Path, fts: str = "observations_fts") -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT count(DISTINCT segid) FROM {fts}_idx").fetchone()[0]
    finally:
        conn.close()


def test_closing_after_a_burst_of_saves_leaves_the_indexes_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FTS5 writes a segment per transaction: a burst of saves leaves many, and every search
    looks each word up in each. The process that wrote them merges them as it closes the store
    (not on the save path); one that changed few rows leaves them to FTS5."""
    monkeypatch.setattr(purge, "MERGE_AFTER_CHANGES", 300)
    few, many = tmp_path / "few", tmp_path / "many"
    for data_dir, saves in ((few, 12), (many, 60)):
        with Store.open(config=Config(data_dir=data_dir)) as store:
            for i in range(saves):
                store.add_observation(title=f"note {i}", content=f"words {i} here", project="p")
            store.add_prompt("a prompt to index", session_id="s1", project="p")
            assert _segments(store.path) > 1
    assert _segments(few / "engram.db") > 1
    assert _segments(many / "engram.db") == 1
    assert _segments(many / "engram.db", "prompts_fts") == 1
    with Store.open(config=Config(data_dir=many)) as store:
        assert store.search("note 59", match_mode="all")[0].title == "note 59"


def test_a_store_closed_twice_closes_quietly(tmp_path: Path) -> None:
    store = Store.open(config=Config(data_dir=tmp_path / "d"))
    store.add_observation(title="a", content="b", project="p")
    store.close()
    store.close()  # (the merge check must not touch the closed connection)
