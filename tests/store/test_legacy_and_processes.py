"""Opening a database the Go tool wrote; several processes at once; locked and unusable stores."""

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from engram.errors import StoreUnavailableError
from engram.settings import Config
from engram.store import Store

GO_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, project TEXT NOT NULL, directory TEXT NOT NULL,
  started_at TEXT NOT NULL DEFAULT (datetime('now')), ended_at TEXT, summary TEXT);
CREATE TABLE observations (id INTEGER PRIMARY KEY AUTOINCREMENT, sync_id TEXT,
  session_id TEXT NOT NULL REFERENCES sessions(id), type TEXT NOT NULL, title TEXT NOT NULL,
  content TEXT NOT NULL, tool_name TEXT, project TEXT, scope TEXT NOT NULL DEFAULT 'project',
  topic_key TEXT, normalized_hash TEXT, revision_count INTEGER NOT NULL DEFAULT 1,
  duplicate_count INTEGER NOT NULL DEFAULT 1, last_seen_at TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')), updated_at TEXT NOT NULL DEFAULT (datetime('now')),
  deleted_at TEXT);
CREATE TABLE user_prompts (id INTEGER PRIMARY KEY AUTOINCREMENT, sync_id TEXT,
  session_id TEXT NOT NULL REFERENCES sessions(id), content TEXT NOT NULL, project TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')));
CREATE VIRTUAL TABLE observations_fts USING fts5(title, content, tool_name, type, project, topic_key,
  content='observations', content_rowid='id');
CREATE TRIGGER obs_fts_insert AFTER INSERT ON observations BEGIN
  INSERT INTO observations_fts(rowid, title, content, tool_name, type, project, topic_key)
  VALUES (new.id, new.title, new.content, new.tool_name, new.type, new.project, new.topic_key); END;
CREATE TABLE sync_chunks (target_key TEXT NOT NULL DEFAULT 'local', chunk_id TEXT NOT NULL,
  imported_at TEXT NOT NULL DEFAULT (datetime('now')), PRIMARY KEY (target_key, chunk_id));
CREATE TABLE sync_mutations (seq INTEGER PRIMARY KEY AUTOINCREMENT, target_key TEXT NOT NULL,
  entity TEXT NOT NULL, entity_key TEXT NOT NULL, op TEXT NOT NULL, payload TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT 'local', occurred_at TEXT NOT NULL DEFAULT (datetime('now')), acked_at TEXT,
  project TEXT NOT NULL DEFAULT '');
CREATE TABLE sync_enrolled_projects (project TEXT PRIMARY KEY, enrolled_at TEXT NOT NULL DEFAULT (datetime('now')));
INSERT INTO sessions VALUES ('s-go', 'acme', '/src/acme', '2026-01-01 09:00:00', NULL, NULL);
INSERT INTO observations(sync_id, session_id, type, title, content, project, scope, created_at, updated_at)
  VALUES ('obs-dup', 's-go', 'bugfix', 'Old copy', 'first import', 'acme', '', '2026-01-01 10:00:00', '2026-01-01 10:00:00'),
         ('obs-dup', 's-go', 'bugfix', 'Newest copy', 'edited later', 'acme', 'project', '2026-01-01 10:00:00', '2026-01-02 10:00:00'),
         (NULL, 's-go', 'decision', 'No sync id yet', 'pick postgres', NULL, 'personal', '2026-01-01 11:00:00', '2026-01-01 11:00:00');
INSERT INTO user_prompts(sync_id, session_id, content, project, created_at)
  VALUES ('prompt-go', 's-go', 'why is login slow', NULL, '2026-01-01 09:30:00');
INSERT INTO sync_enrolled_projects(project) VALUES ('acme');
"""


def make_go_database(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.executescript(GO_SCHEMA)
    conn.close()


def test_a_go_database_is_backed_up_and_migrated_in_place(tmp_path: Path) -> None:
    db = tmp_path / "data" / "engram.db"
    make_go_database(db)
    with Store.open(db, config=Config(data_dir=db.parent)) as store:
        backups = list(db.parent.glob("engram.db.go-backup-*"))
        assert len(backups) == 1
        with sqlite3.connect(backups[0]) as old:
            assert old.execute("SELECT COUNT(*) FROM observations").fetchone()[0] == 3
        live = {o.title: o for o in store.recent_observations(limit=10)}
        assert set(live) == {"Newest copy", "No sync id yet"}  # duplicate sync ids collapsed
        assert (
            live["No sync id yet"].sync_id.startswith("obs-")
            and live["No sync id yet"].project == ""
        )
        assert store.search("postgres")[0].title == "No sync id yet"
        assert store.search_prompts("login")[0].sync_id == "prompt-go"
        records = [e.as_record() for e in store.journal.pending("x", include_personal=True)]
        # Identity is per project: the memory and prompt of project "" that named acme's
        # session get their own copy of it in "" (a fifth legacy record, also origin zero).
        assert len(records) == 5 and {r["origin"] for r in records} == {"0" * 16}
        copy = store.get_session("s-go", project="")
        assert (copy.directory, copy.started_at) == ("/src/acme", "2026-01-01 09:00:00")
        assert store.get_session("s-go", project="acme").project == "acme"
        assert store.db.scalar("SELECT COUNT(*) FROM sync_enrolled_projects") == 1
        # The Go tool left deleted rows' bytes in free pages: the first purge rebuilds the file.
        assert store.purge_pending() and store.purge().vacuumed
        store.add_observation(title="after upgrade", content="works", project="acme")
    with Store.open(db, config=Config(data_dir=db.parent)) as again:  # a second open does nothing
        assert again.stats().total_observations == 3
    assert len(list(db.parent.glob("engram.db.go-backup-*"))) == 1


def _writer(data_dir: str, worker: int, count: int) -> None:
    with Store.open(config=Config(data_dir=Path(data_dir))) as store:
        for i in range(count):
            store.add_observation(
                title=f"w{worker} #{i}", content=f"worker {worker} note {i}", project="p"
            )


def test_four_processes_writing_at_once_lose_nothing(data_dir: Path) -> None:
    Store.open(config=Config(data_dir=data_dir)).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(data_dir), w, 60)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with Store.open(config=Config(data_dir=data_dir)) as store:
        assert store.stats().total_observations == 240
        hlcs = [e.hlc for e in store.journal.pending("x")]
        assert len(hlcs) == len(set(hlcs)) == 240 + 1  # one session + every save, no clock reuse


def test_a_locked_database_gives_a_clear_error_and_loses_nothing(data_dir: Path) -> None:
    config = Config(data_dir=data_dir, busy_timeout_ms=200)
    with Store.open(config=config) as store:
        store.add_observation(title="before", content="x", project="p")
        blocker = sqlite3.connect(config.db_path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreUnavailableError, match="locked by another process"):
                store.add_observation(title="blocked", content="y", project="p")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        store.add_observation(title="after", content="z", project="p")
        assert [o.title for o in store.recent_observations()] == ["after", "before"]


def test_unusable_data_directories_are_reported(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(StoreUnavailableError, match="cannot create data directory"):
        Store.open(config=Config(data_dir=not_a_dir / "sub"))
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "engram.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreUnavailableError, match="not a valid Engram database"):
        Store.open(config=Config(data_dir=garbage))


def test_a_schema_v1_database_with_fts_triggers_is_upgraded(tmp_path: Path) -> None:
    from engram.store import schema

    db = tmp_path / "v1" / "engram.db"
    db.parent.mkdir()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN")
    schema.migration_1(conn)
    conn.execute("""CREATE TRIGGER obs_fts_insert AFTER INSERT ON observations BEGIN
        INSERT INTO observations_fts(rowid, title) VALUES (new.id, new.title); END""")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("COMMIT")
    conn.close()
    with Store.open(db, config=Config(data_dir=db.parent)) as store:
        # No trigger writes the full-text index (the only ones left keep journaled states,
        # issue 18: engram/store/schema.py kept_states_sql).
        triggers = store.db.rows("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        assert not [r[0] for r in triggers if "_fts" in r[1]]
        assert all(
            r[0].endswith(("_keep_moved", "_keep_deleted", "_forget_kept")) for r in triggers
        )
        obs = store.add_observation(title="after", content="upgrade", project="p").observation
        store.delete_observation(obs.id, hard=True)
        tomb = store.db.one("SELECT scope FROM sync_tombstones")
        assert tomb is not None and tomb[0] == "project"
        store.db.conn.execute(
            "INSERT INTO observations_fts(observations_fts, rank) VALUES ('integrity-check', 1)"
        )


GO_RELATIONS = """
CREATE TABLE memory_relations (id INTEGER PRIMARY KEY AUTOINCREMENT, sync_id TEXT UNIQUE,
  source_id TEXT NOT NULL, target_id TEXT NOT NULL, relation TEXT NOT NULL, reason TEXT,
  evidence TEXT, confidence REAL, judgment_status TEXT NOT NULL DEFAULT 'pending',
  marked_by_actor TEXT, marked_by_kind TEXT, marked_by_model TEXT, session_id TEXT,
  superseded_at TEXT, superseded_by_relation_id TEXT, created_at TEXT, updated_at TEXT);
INSERT INTO observations(sync_id, session_id, type, title, content, project, scope, created_at, updated_at)
  VALUES ('obs-new', 's-go', 'decision', 'Newer choice', 'pick sqlite', 'acme', 'project',
          '2026-01-03 10:00:00', '2026-01-03 10:00:00');
INSERT INTO memory_relations(sync_id, source_id, target_id, relation, reason, confidence,
  judgment_status, marked_by_actor, marked_by_kind, created_at, updated_at)
  VALUES ('rel-go1', 'obs-new', 'obs-dup', 'supersedes', 'we changed our mind', 0.9, 'judged',
          'alice', 'human', '2026-01-03 11:00:00', '2026-01-03 11:00:00'),
         ('rel-go2', 'obs-new', 'obs-missing', 'related', NULL, NULL, 'pending',
          'engram', 'system', '2026-01-03 11:00:00', '2026-01-03 11:00:00');
"""


def test_a_later_go_database_keeps_its_relations(tmp_path: Path) -> None:
    """Issue 20: a Go database of the versions with memory relations is upgraded with them
    (its relations table has no project: the memories' project is the relation's)."""
    db = tmp_path / "data" / "engram.db"
    make_go_database(db)
    with sqlite3.connect(db) as conn:
        conn.executescript(GO_RELATIONS)
    conn.close()
    with Store.open(db, config=Config(data_dir=db.parent)) as store:
        [rel] = store.list_relations()
        assert (rel.sync_id, rel.project, rel.relation, rel.state, rel.confidence) == (
            "rel-go1",
            "acme",
            "supersedes",
            "judged",
            0.9,
        )
        assert (rel.source.title, rel.target.title) == ("Newer choice", "Newest copy")
        records = [e.as_record() for e in store.journal.pending("x") if e.entity == "relation"]
        assert len(records) == 1 and records[0]["origin"] == "0" * 16
