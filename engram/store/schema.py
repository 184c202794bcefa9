"""The local schema and its versioned migrations (``PRAGMA user_version``).

Migrations only ever append: to change the schema, add a function to ``MIGRATIONS``. A database
written by the Go tool that first defined Engram (user_version 0 with an ``observations`` table)
is backed up next to itself and rebuilt into this schema by :mod:`engram.store.legacy`.

Size: over 500 lines on purpose: the migrations are an append-only history, each kept exactly as
it ran on people's databases; one list in one file is the record of their order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

OBSERVATIONS_FTS_COLUMNS = (
    "title",
    "content",
    "tool_name",
    "type",
    "project",
    "topic_key",
    "search_context",
)
#: BM25 weight of each FTS column: the session context counts about half as much as the memory.
OBSERVATIONS_FTS_WEIGHTS = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5)
#: What the content-hash index holds of each memory's ``normalized_hash`` (a 64-digit SHA-256):
#: its first 12 hex digits (48 bits). A lookup names this expression, exactly so, beside the
#: full ``+normalized_hash = ?`` (see :func:`dedupe_prefix`): SQLite uses an index on an
#: expression only for that same expression (and a plain ``normalized_hash = ?`` would have its
#: value substituted into it). Migration ``migration_hash_prefix`` says why.
DEDUPE_PREFIX_SQL = "substr(normalized_hash, 1, 12)"


def dedupe_prefix(digest: str) -> str:
    """The part of a content hash the dedupe index holds (compared to :data:`DEDUPE_PREFIX_SQL`)."""
    return digest[:12]


V1_TABLES = """
CREATE TABLE IF NOT EXISTS sessions (
    id          TEXT PRIMARY KEY,
    project     TEXT NOT NULL DEFAULT '',
    directory   TEXT NOT NULL DEFAULT '',
    started_at  TEXT NOT NULL,
    ended_at    TEXT,
    summary     TEXT,
    hlc         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sessions_project ON sessions(project, started_at);

CREATE TABLE IF NOT EXISTS observations (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    sync_id          TEXT NOT NULL UNIQUE,
    session_id       TEXT NOT NULL,
    type             TEXT NOT NULL,
    title            TEXT NOT NULL,
    content          TEXT NOT NULL,
    tool_name        TEXT,
    project          TEXT NOT NULL DEFAULT '',
    scope            TEXT NOT NULL DEFAULT 'project',
    topic_key        TEXT,
    normalized_hash  TEXT,
    revision_count   INTEGER NOT NULL DEFAULT 1,
    duplicate_count  INTEGER NOT NULL DEFAULT 1,
    last_seen_at     TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    deleted_at       TEXT,
    search_context   TEXT NOT NULL DEFAULT '',
    hlc              TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS observations_session ON observations(session_id, created_at);
CREATE INDEX IF NOT EXISTS observations_project ON observations(project, created_at DESC);
CREATE INDEX IF NOT EXISTS observations_created ON observations(created_at DESC);
CREATE INDEX IF NOT EXISTS observations_topic
    ON observations(topic_key, project, scope, updated_at DESC);
CREATE INDEX IF NOT EXISTS observations_dedupe ON observations(normalized_hash, project);

CREATE TABLE IF NOT EXISTS user_prompts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    sync_id     TEXT NOT NULL UNIQUE,
    session_id  TEXT NOT NULL,
    content     TEXT NOT NULL,
    project     TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    hlc         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS user_prompts_session ON user_prompts(session_id, created_at);
CREATE INDEX IF NOT EXISTS user_prompts_project ON user_prompts(project, created_at DESC);
CREATE INDEX IF NOT EXISTS user_prompts_created ON user_prompts(created_at DESC);

-- Both FTS tables are external-content indexes maintained by engram/store/fts.py.
CREATE VIRTUAL TABLE IF NOT EXISTS observations_fts USING fts5(
    title, content, tool_name, type, project, topic_key, search_context,
    content='observations', content_rowid='id', tokenize='porter unicode61'
);
CREATE VIRTUAL TABLE IF NOT EXISTS prompts_fts USING fts5(
    content, project, content='user_prompts', content_rowid='id', tokenize='porter unicode61'
);
-- Replication ------------------------------------------------------------------------------
-- Identity of this replica and its hybrid logical clock (one row).
CREATE TABLE IF NOT EXISTS sync_clock (
    id                   INTEGER PRIMARY KEY CHECK (id = 1),
    origin               TEXT NOT NULL,
    machine_fingerprint  TEXT NOT NULL,
    wall_ms              INTEGER NOT NULL DEFAULT 0,
    counter              INTEGER NOT NULL DEFAULT 0
);

-- Every mutation this replica wrote or applied, as the exact record bytes that travel.
CREATE TABLE IF NOT EXISTS sync_journal (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    mid          TEXT NOT NULL UNIQUE,
    hlc          TEXT NOT NULL,
    origin       TEXT NOT NULL,
    entity       TEXT NOT NULL,
    key          TEXT NOT NULL,
    op           TEXT NOT NULL,
    project      TEXT NOT NULL DEFAULT '',
    scope        TEXT NOT NULL DEFAULT 'project',
    record       TEXT NOT NULL,
    source       TEXT NOT NULL DEFAULT 'local',
    recorded_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sync_journal_project ON sync_journal(project, seq);
CREATE INDEX IF NOT EXISTS sync_journal_key ON sync_journal(entity, key, hlc);

-- Which targets (git:<dir>, cloud:<server>) already hold which journal rows.
CREATE TABLE IF NOT EXISTS sync_delivery (
    target        TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    delivered_at  TEXT NOT NULL,
    PRIMARY KEY (target, seq)
) WITHOUT ROWID;

-- Hard-deleted entities: the key and winning clock stay so older upserts cannot resurrect them.
CREATE TABLE IF NOT EXISTS sync_tombstones (
    entity      TEXT NOT NULL,
    key         TEXT NOT NULL,
    hlc         TEXT NOT NULL,
    project     TEXT NOT NULL DEFAULT '',
    deleted_at  TEXT,
    PRIMARY KEY (entity, key)
) WITHOUT ROWID;

-- Per-target sync bookkeeping (cursor, lease, backoff, status), as in the Go tool.
CREATE TABLE IF NOT EXISTS sync_state (
    target_key            TEXT PRIMARY KEY,
    lifecycle             TEXT NOT NULL DEFAULT 'idle',
    last_pulled_seq       INTEGER NOT NULL DEFAULT 0,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    backoff_until         TEXT,
    lease_owner           TEXT,
    lease_until           TEXT,
    last_error            TEXT,
    reason_code           TEXT,
    reason_message        TEXT,
    last_sync_at          TEXT,
    updated_at            TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%S', 'now'))
);

-- Chunk ids already applied or written, per target (`git:<dir>`, `cloud:<project>`).
CREATE TABLE IF NOT EXISTS sync_chunks (
    target_key   TEXT NOT NULL,
    chunk_id     TEXT NOT NULL,
    imported_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%S', 'now')),
    PRIMARY KEY (target_key, chunk_id)
) WITHOUT ROWID;

-- Projects opted into cloud replication.
CREATE TABLE IF NOT EXISTS sync_enrolled_projects (
    project      TEXT PRIMARY KEY,
    enrolled_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%S', 'now'))
);

-- Journal rows a server rejected: kept out of the push queue until `engram cloud repair`.
CREATE TABLE IF NOT EXISTS sync_quarantine (
    target          TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    mid             TEXT NOT NULL,
    error_code      TEXT NOT NULL,
    error           TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 1,
    quarantined_at  TEXT NOT NULL,
    PRIMARY KEY (target, seq)
) WITHOUT ROWID;
"""


def _weights_sql() -> str:
    weights = ", ".join(str(w) for w in OBSERVATIONS_FTS_WEIGHTS)
    return (
        f"INSERT INTO observations_fts(observations_fts, rank) VALUES ('rank', 'bm25({weights})')"
    )


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Execute a multi-statement script inside the caller's transaction.

    (``executescript`` would commit the open transaction first.)
    """
    pending = ""
    for line in script.splitlines(keepends=True):
        if not pending and line.lstrip().startswith("--"):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            conn.execute(pending)
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement: {pending[:80]!r}")


def migration_1(conn: sqlite3.Connection) -> None:
    run_script(conn, V1_TABLES)
    conn.execute(_weights_sql())


CLOUD_PROJECTS_TABLE = """
-- Cloud sync bookkeeping per (server, project): the pull cursor (the server's seq), the last
-- push/pull times, why the project is blocked (paused, policy_forbidden...), pulled records that
-- could not be applied, and the stage of `engram cloud upgrade`.
CREATE TABLE IF NOT EXISTS sync_cloud_projects (
    target                  TEXT NOT NULL,
    project                 TEXT NOT NULL,
    last_pulled_seq         INTEGER NOT NULL DEFAULT 0,
    last_push_at            TEXT,
    last_pull_at            TEXT,
    reason_code             TEXT,
    reason_message          TEXT,
    dead_count              INTEGER NOT NULL DEFAULT 0,
    last_dead_error         TEXT,
    upgrade_stage           TEXT,
    upgrade_reason_code     TEXT,
    upgrade_reason_message  TEXT,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (target, project)
) WITHOUT ROWID;
"""


def migration_2(conn: sqlite3.Connection) -> None:
    run_script(conn, CLOUD_PROJECTS_TABLE)


def migration_3(conn: sqlite3.Connection) -> None:
    """FTS is kept in step by the store's own statements (engram/store/fts.py), no longer by
    triggers; tombstones remember their scope so a personal memory's deletion never leaves."""
    for name in ("obs_fts_insert", "obs_fts_delete", "obs_fts_update",
                 "prompt_fts_insert", "prompt_fts_delete", "prompt_fts_update"):  # fmt: skip
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    columns = {r[1] for r in conn.execute("PRAGMA table_info(sync_tombstones)")}
    if "scope" not in columns:
        conn.execute("ALTER TABLE sync_tombstones ADD COLUMN scope TEXT NOT NULL DEFAULT 'project'")


def migration_4(conn: sqlite3.Connection) -> None:
    """Live memories newest first, as an index: counting them and paging deep into the recent
    list (the TUI on 100,000 memories) read the index instead of scanning the table."""
    conn.execute(
        "CREATE INDEX IF NOT EXISTS observations_live"
        " ON observations(created_at DESC, id DESC) WHERE deleted_at IS NULL"
    )


GIT_LEDGER_TABLES = """
-- Records a git import read but was not allowed to apply (a project not bound to that
-- directory here; personal scope without --include-personal), counted per chunk and project
-- (personal = 1: held for its scope), so the import that may apply them re-reads exactly those
-- chunks. Owned by engram/sync/git/ledger.py.
CREATE TABLE IF NOT EXISTS sync_git_held (
    target    TEXT NOT NULL,
    chunk_id  TEXT NOT NULL,
    project   TEXT NOT NULL,
    personal  INTEGER NOT NULL,
    records   INTEGER NOT NULL,
    PRIMARY KEY (target, chunk_id, project, personal)
) WITHOUT ROWID;

-- Chunk files already examined, by file identity (size, mtime): one refused for its size is
-- not read again until it changes; an older-format chunk's header (counts) is not re-parsed.
CREATE TABLE IF NOT EXISTS sync_git_files (
    target     TEXT NOT NULL,
    chunk_id   TEXT NOT NULL,
    size       INTEGER NOT NULL,
    mtime_ns   INTEGER NOT NULL,
    refused    TEXT,
    header     TEXT,
    noted_at   TEXT NOT NULL,
    PRIMARY KEY (target, chunk_id)
) WITHOUT ROWID;
"""


def migration_5(conn: sqlite3.Connection) -> None:
    """Git import scope (issue 12): held-back records per chunk, and chunk files refused for
    their size (remembered until the file changes)."""
    run_script(conn, GIT_LEDGER_TABLES)


def migration_6(conn: sqlite3.Connection) -> None:
    """Cloud sync: until when autosync leaves alone a project the server refused (403
    forbidden: pushes and pulls; 409 paused: pushes), and how many refusals in a row set that
    wait (it doubles each time)."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(sync_cloud_projects)")}
    if "refused_until" not in columns:
        conn.execute("ALTER TABLE sync_cloud_projects ADD COLUMN refused_until TEXT")
    if "refused_count" not in columns:
        conn.execute(
            "ALTER TABLE sync_cloud_projects ADD COLUMN refused_count INTEGER NOT NULL DEFAULT 0"
        )


# --- 7: identity per project -------------------------------------------------------------------

#: How migration 7 turns each table's own definition (whatever columns other migrations added
#: to it) into its per-project form: (pattern, replacement, constraint appended).
_V7_REKEY = {
    "sessions": (r"\bid\s+TEXT\s+PRIMARY\s+KEY\b", "id TEXT NOT NULL", "PRIMARY KEY (project, id)"),
    "observations": (
        r"\bsync_id\s+TEXT\s+NOT\s+NULL\s+UNIQUE\b",
        "sync_id TEXT NOT NULL",
        "UNIQUE (project, sync_id)",
    ),
    "user_prompts": (
        r"\bsync_id\s+TEXT\s+NOT\s+NULL\s+UNIQUE\b",
        "sync_id TEXT NOT NULL",
        "UNIQUE (project, sync_id)",
    ),
    "sync_tombstones": (
        r"PRIMARY\s+KEY\s*\(\s*entity\s*,\s*key\s*\)",
        "PRIMARY KEY (entity, project, key)",
        "",
    ),
}
_V7_INDEXES = """
CREATE INDEX IF NOT EXISTS sessions_id ON sessions(id);
DROP INDEX IF EXISTS sync_journal_key;
CREATE INDEX sync_journal_key ON sync_journal(entity, project, key, hlc);
"""
#: Records received from elsewhere that cannot be applied yet (``clock_skew``, later
#: ``waiting_endpoint``) or at all (``invalid``): kept with their reason, re-checked on every
#: apply, listed by `engram sync --quarantine`.
INBOUND_QUARANTINE_TABLE = """
CREATE TABLE IF NOT EXISTS sync_inbound_quarantine (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint  TEXT NOT NULL UNIQUE,
    reason       TEXT NOT NULL,
    error        TEXT NOT NULL,
    source       TEXT NOT NULL,
    mid          TEXT NOT NULL DEFAULT '',
    hlc          TEXT NOT NULL DEFAULT '',
    origin       TEXT NOT NULL DEFAULT '',
    entity       TEXT NOT NULL DEFAULT '',
    project      TEXT NOT NULL DEFAULT '',
    key          TEXT NOT NULL DEFAULT '',
    record       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 1,
    received_at  TEXT NOT NULL,
    checked_at   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sync_inbound_quarantine_due ON sync_inbound_quarantine(reason, hlc);
"""


def _rekeyed_definition(conn: sqlite3.Connection, table: str) -> str:
    """The table's current ``CREATE TABLE`` text, renamed ``<table>_v7`` and keyed per
    project (see ``_V7_REKEY``); raises if the definition is not the one expected."""
    import re

    sql = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()[0]
    pattern, replacement, constraint = _V7_REKEY[table]
    sql, found = re.subn(pattern, replacement, sql, count=1, flags=re.IGNORECASE)
    head = re.compile(rf'^\s*CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?"?{table}"?', re.I)
    sql, named = head.subn(f"CREATE TABLE {table}_v7", sql, count=1)
    if found != 1 or named != 1:
        raise RuntimeError(f"migration 7: unexpected definition of table {table}: {sql}")
    if constraint:
        close = sql.rindex(")")
        sql = f"{sql[:close].rstrip()},\n    {constraint}\n{sql[close:]}"
    return sql


def _rebuild_table(conn: sqlite3.Connection, table: str) -> None:
    """Rebuild ``table`` keyed per project: same columns (including any a parallel migration
    added) and local ids, so FTS rowids stay valid; its indexes are made again and its
    AUTOINCREMENT high-water mark is kept."""
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    indexes = [
        r[0]
        for r in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
            " AND sql IS NOT NULL",
            (table,),
        )
    ]
    high = None
    if table_exists(conn, "sqlite_sequence"):
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        high = None if row is None else int(row[0])
    conn.execute(_rekeyed_definition(conn, table))
    names = ", ".join(columns)
    conn.execute(f"INSERT INTO {table}_v7 ({names}) SELECT {names} FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"ALTER TABLE {table}_v7 RENAME TO {table}")
    for index in indexes:
        conn.execute(index)
    if high is not None:
        conn.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = ?", (high, table))


def migration_7(conn: sqlite3.Connection) -> None:
    """Identity per project (docs/architecture.md, "Identity, the journal and replication"): memories and prompts are unique per (project, sync_id),
    sessions per (project, id), tombstones per (entity, project, key), so a record of one
    project can never address another project's rows. Memories and prompts that referenced a
    session recorded under another project get a copy of it in their own project. Adds the
    inbound quarantine."""
    for table in ("sessions", "observations", "user_prompts", "sync_tombstones"):
        _rebuild_table(conn, table)
    run_script(conn, _V7_INDEXES)
    run_script(conn, INBOUND_QUARANTINE_TABLE)
    from engram.store.identity import copy_foreign_sessions

    copy_foreign_sessions(conn)


VECTORS_TABLES = """
-- Derived, never synced (like the FTS index): one embedding per live memory, made off the save
-- path by engram/store/vectors.py. A memory whose indexed text changes loses its vector in the
-- same transaction and is queued in vector_pending; seq only grows, so a process holding the
-- vectors in memory reads only rows newer than the last seq it saw.
CREATE TABLE IF NOT EXISTS observation_vectors (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    obs_id  INTEGER NOT NULL UNIQUE,
    model   TEXT NOT NULL,
    vector  BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS observation_vectors_model ON observation_vectors(model);
-- Memories whose vector is missing or out of date.
CREATE TABLE IF NOT EXISTS vector_pending (
    obs_id  INTEGER PRIMARY KEY
);
"""


def migration_8(conn: sqlite3.Connection) -> None:
    """The vector index of semantic search, with every existing memory queued for it (the
    queue is only worked through where the semantic extra is installed)."""
    run_script(conn, VECTORS_TABLES)
    conn.execute(
        "INSERT OR IGNORE INTO vector_pending(obs_id)"
        " SELECT id FROM observations WHERE deleted_at IS NULL"
    )


#: FTS5 prefix indexes of migration 9 (the lean migration, after importance, dropped them again): the prefix lengths (in
#: characters) prefix queries of that length read from a ready-made index.
FTS_PREFIX = "4 5 6"

SEARCH_TRUTH = f"""
-- Session context is looked up by session, project and scope in save order (both directions).
CREATE INDEX IF NOT EXISTS observations_context
    ON observations(session_id, project, scope, created_at, sync_id) WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS user_prompts_context
    ON user_prompts(session_id, project, created_at, sync_id);
DROP TABLE IF EXISTS observations_fts;
DROP TABLE IF EXISTS prompts_fts;
CREATE VIRTUAL TABLE observations_fts USING fts5(
    title, content, tool_name, type, project, topic_key, search_context,
    content='observations', content_rowid='id', tokenize='porter unicode61',
    prefix='{FTS_PREFIX}'
);
CREATE VIRTUAL TABLE prompts_fts USING fts5(
    content, project, content='user_prompts', content_rowid='id', tokenize='porter unicode61',
    prefix='{FTS_PREFIX}'
);
-- How many rows hold each term: search takes the rarest query words first.
CREATE VIRTUAL TABLE IF NOT EXISTS observations_fts_vocab USING fts5vocab(observations_fts, 'row');
CREATE VIRTUAL TABLE IF NOT EXISTS prompts_fts_vocab USING fts5vocab(prompts_fts, 'row');
"""


def migration_9(conn: sqlite3.Connection) -> None:
    """Search that tells the truth (issue 14): session context re-derived under the new rules
    (agent sessions only, never across project or scope, nothing deleted), FTS indexes rebuilt
    with prefix indexes, the vocabulary tables search plans with, and purge's bookkeeping."""
    from engram.store.purge import create_purge_state
    from engram.store.search_context import rederive_all

    run_script(conn, SEARCH_TRUTH)
    conn.execute(_weights_sql())
    create_purge_state(conn)
    rederive_all(conn)
    for fts in ("observations_fts", "prompts_fts"):
        conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")


GO_KEY_TABLES = """
-- Which sessions, memories and prompts each Go-format chunk of a git sync directory holds
-- (every key it names, applied here or not), and which chunks have been read for it: what
-- `engram sync --go-compat` must not write for Go teammates again (the Go tool has no
-- sync_id and would import a second copy). Owned by engram/sync/git/ledger.py.
CREATE TABLE IF NOT EXISTS sync_git_go_chunks (
    target    TEXT NOT NULL,
    chunk_id  TEXT NOT NULL,
    noted_at  TEXT NOT NULL,
    PRIMARY KEY (target, chunk_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sync_git_go_keys (
    target    TEXT NOT NULL,
    chunk_id  TEXT NOT NULL,
    entity    TEXT NOT NULL,
    key       TEXT NOT NULL,
    PRIMARY KEY (target, entity, key, chunk_id)
) WITHOUT ROWID;
"""


def migration_10(conn: sqlite3.Connection) -> None:
    """Moving from the Go tool (issue 16): the keys each Go-format chunk holds."""
    run_script(conn, GO_KEY_TABLES)


# --- importance, consolidation and decay (docs/importance.md) --------------------------------

#: Columns added to ``observations``: the user's intent, replicated in payloads (pin, importance
#: override, validity, why it was deleted, its successor, last confirmation), then local
#: derived data that never travels (the computed score and the access count).
IMPORTANCE_COLUMNS = (
    ("pinned", "INTEGER NOT NULL DEFAULT 0"),
    ("importance_override", "REAL"),
    ("valid_from", "TEXT"),
    ("valid_to", "TEXT"),
    ("delete_reason", "TEXT"),
    ("superseded_by", "TEXT"),
    ("reviewed_at", "TEXT"),
    ("importance", "REAL"),
    ("access_count", "INTEGER NOT NULL DEFAULT 0"),
    ("last_accessed_at", "TEXT"),
)
IMPORTANCE_INDEXES = """
CREATE INDEX IF NOT EXISTS observations_superseded
    ON observations(project, superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX IF NOT EXISTS observations_pinned
    ON observations(project, updated_at DESC) WHERE pinned = 1 AND deleted_at IS NULL;
-- Access-log files already folded into access counts (engram/store/access.py): a fold that
-- stopped after its commit but before deleting its file never counts that file twice.
CREATE TABLE IF NOT EXISTS access_folds (
    name       TEXT PRIMARY KEY,
    folded_at  TEXT NOT NULL
) WITHOUT ROWID;
"""


def migration_importance(conn: sqlite3.Connection) -> None:
    """Importance, pins, validity and access counts (issue 21); every memory is scored."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(observations)")}
    for name, definition in IMPORTANCE_COLUMNS:
        if name not in columns:
            conn.execute(f"ALTER TABLE observations ADD COLUMN {name} {definition}")
    run_script(conn, IMPORTANCE_INDEXES)
    if not table_exists(conn, "memory_relations"):
        return  # a score counts relations as links: the graph migration that follows scores
    from engram.store import scoring

    scoring.register(conn)
    scoring.rescore_where(conn, "o.importance IS NULL")


# --- memory graph (issue 20) --------------------------------------------------------------------

GRAPH_TABLES = """
-- Relations between two memories of one project (replicated: entity `relation`, key `rel-…`).
-- Endpoints are observation sync ids of the same project; nothing enforces that they exist
-- (a relation whose endpoint has not arrived waits in the inbound quarantine instead), and a
-- relation whose endpoint was deleted reads as orphaned. `extra` keeps payload fields this
-- version does not know, written back with the next local edit.
CREATE TABLE IF NOT EXISTS memory_relations (
    id                         INTEGER PRIMARY KEY AUTOINCREMENT,
    sync_id                    TEXT NOT NULL,
    project                    TEXT NOT NULL DEFAULT '',
    scope                      TEXT NOT NULL DEFAULT 'project',
    source_id                  TEXT NOT NULL,
    target_id                  TEXT NOT NULL,
    relation                   TEXT NOT NULL,
    reason                     TEXT,
    evidence                   TEXT,
    confidence                 REAL,
    judgment_status            TEXT NOT NULL DEFAULT 'pending',
    marked_by_actor            TEXT,
    marked_by_kind             TEXT,
    marked_by_model            TEXT,
    session_id                 TEXT,
    superseded_at              TEXT,
    superseded_by_relation_id  TEXT,
    created_at                 TEXT NOT NULL,
    updated_at                 TEXT NOT NULL,
    extra                      TEXT,
    hlc                        TEXT NOT NULL DEFAULT '',
    UNIQUE (project, sync_id)
);
CREATE INDEX IF NOT EXISTS memory_relations_source ON memory_relations(project, source_id);
CREATE INDEX IF NOT EXISTS memory_relations_target ON memory_relations(project, target_id);

-- Memories saved here whose conflict check has not run yet (done off the save path: by the
-- next read or a server's background step). Local only.
CREATE TABLE IF NOT EXISTS graph_conflict_queue (
    observation_id  INTEGER PRIMARY KEY,
    queued_at       TEXT NOT NULL
);

-- The entity graph: derived from the memories on each machine (never synced), rebuilt by
-- `engram graph ingest`. A memory's rows go when the memory changes (engram/store/fts.py).
CREATE TABLE IF NOT EXISTS graph_entities (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    project  TEXT NOT NULL,
    norm     TEXT NOT NULL,
    name     TEXT NOT NULL,
    kind     TEXT NOT NULL,
    UNIQUE (project, norm)
);
CREATE TABLE IF NOT EXISTS graph_mentions (
    observation_id  INTEGER NOT NULL,
    entity          INTEGER NOT NULL,
    PRIMARY KEY (observation_id, entity)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS graph_mentions_entity ON graph_mentions(entity);
CREATE TABLE IF NOT EXISTS graph_triples (
    observation_id  INTEGER NOT NULL,
    subject         INTEGER NOT NULL,
    predicate       TEXT NOT NULL,
    object          INTEGER NOT NULL,
    weight          REAL NOT NULL,
    PRIMARY KEY (observation_id, subject, predicate, object)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS graph_triples_subject ON graph_triples(subject, object);
CREATE INDEX IF NOT EXISTS graph_triples_object ON graph_triples(object, subject);
-- Which memories the graph holds (a memory's row goes whenever its text may have changed),
-- the clock it was read at, and which extractor read it.
CREATE TABLE IF NOT EXISTS graph_ingested (
    observation_id  INTEGER PRIMARY KEY,
    hlc             TEXT NOT NULL,
    extractor       TEXT NOT NULL,
    ingested_at     TEXT NOT NULL
);
"""


def migration_graph(conn: sqlite3.Connection) -> None:
    """The memory graph (issue 20): replicated relations between memories, the queue of saves
    whose conflict check is pending, and the derived entity graph. It creates tables, then
    scores the memories the importance migration before it could not (a score counts
    relations as links, engram/store/links.py)."""
    run_script(conn, GRAPH_TABLES)
    from engram.store import scoring

    scoring.register(conn)
    scoring.rescore_where(conn, "o.importance IS NULL")


#: Every index is written by every save: keep only those a read needs (issue 18). A memory's
#: session (every query by session names its project too) serves the session context, the
#: timeline and session listings alike; topic keys are indexed only where a memory has one.
LEAN_INDEXES = """
DROP INDEX IF EXISTS observations_created;
DROP INDEX IF EXISTS observations_context;
DROP INDEX IF EXISTS observations_session;
CREATE INDEX observations_session ON observations(session_id, project, created_at, sync_id);
DROP INDEX IF EXISTS observations_topic;
CREATE INDEX observations_topic ON observations(topic_key, project, scope, updated_at DESC)
    WHERE topic_key IS NOT NULL;
DROP INDEX IF EXISTS user_prompts_session;
"""


#: Both FTS indexes without prefix indexes: every save wrote each word four times (the word
#: and its 4-, 5- and 6-character prefixes), which made saves 1.7x slower and the index 40%
#: larger, while prefix queries on the main index measured as fast on 5,000 memories and
#: 0-12% slower at 100,000 (docs/performance.md).
LEAN_FTS = """
DROP TABLE IF EXISTS observations_fts_vocab;
DROP TABLE IF EXISTS prompts_fts_vocab;
DROP TABLE IF EXISTS observations_fts;
DROP TABLE IF EXISTS prompts_fts;
CREATE VIRTUAL TABLE observations_fts USING fts5(
    title, content, tool_name, type, project, topic_key, search_context,
    content='observations', content_rowid='id', tokenize='porter unicode61'
);
CREATE VIRTUAL TABLE prompts_fts USING fts5(
    content, project, content='user_prompts', content_rowid='id', tokenize='porter unicode61'
);
CREATE VIRTUAL TABLE observations_fts_vocab USING fts5vocab(observations_fts, 'row');
CREATE VIRTUAL TABLE prompts_fts_vocab USING fts5vocab(prompts_fts, 'row');
"""


#: The replicated fields of each entity when the lean migration was written (the columns of its
#: kept-state table; tests/store/test_lean_writes.py checks they still match record.STATE_FIELDS).
KEPT_FIELDS = {
    "session": ("id", "project", "directory", "started_at", "ended_at", "summary"),
    "observation": (
        "sync_id", "session_id", "type", "title", "content", "tool_name", "project", "scope",
        "topic_key", "revision_count", "duplicate_count", "last_seen_at", "created_at",
        "updated_at", "deleted_at", "pinned", "importance_override", "valid_from", "valid_to",
        "delete_reason", "superseded_by", "reviewed_at",
    ),
    "prompt": ("sync_id", "session_id", "content", "project", "created_at"),
}  # fmt: skip
_KEPT = (("session", "sessions", "id"), ("observation", "observations", "sync_id"),
         ("prompt", "user_prompts", "sync_id"))  # fmt: skip


def kept_states_sql() -> str:
    """Local journal records are stored elided (engram/store/journal.py): the row at the
    record's hlc is its payload. When a row moves on (a newer write, from here or elsewhere, a
    move to another project) or goes (a hard delete), these triggers keep its state, exactly as
    it was, for every elided record written at it, so the journal still holds every state it
    replicated (what transports send and as-of search reads). Untyped columns: values are kept
    as stored. Deleting a journal row (the clock repair) deletes its kept state."""
    parts = []
    for entity, table, key in _KEPT:
        fields = KEPT_FIELDS[entity]
        kept = f"sync_kept_{table}"
        keep = f"""INSERT OR IGNORE INTO {kept}(seq, {", ".join(fields)})
        SELECT seq, {", ".join(f"OLD.{f}" for f in fields)} FROM sync_journal
        WHERE entity = '{entity}' AND project = OLD.project AND key = OLD.{key}
          AND hlc = OLD.hlc AND record = '';"""
        parts.append(f"""
CREATE TABLE IF NOT EXISTS {kept} (seq INTEGER PRIMARY KEY, {", ".join(fields)});
CREATE TRIGGER IF NOT EXISTS {table}_keep_moved AFTER UPDATE OF hlc, project, {key} ON {table}
WHEN OLD.hlc IS NOT NEW.hlc OR OLD.project IS NOT NEW.project OR OLD.{key} IS NOT NEW.{key}
BEGIN
    {keep}
END;
CREATE TRIGGER IF NOT EXISTS {table}_keep_deleted AFTER DELETE ON {table}
BEGIN
    {keep}
END;
""")
    forget = "\n".join(f"    DELETE FROM sync_kept_{t} WHERE seq = OLD.seq;" for _, t, _ in _KEPT)
    parts.append(f"""
CREATE TRIGGER IF NOT EXISTS sync_journal_forget_kept AFTER DELETE ON sync_journal
WHEN OLD.record = ''
BEGIN
{forget}
END;
""")
    return "".join(parts)


def migration_lean(conn: sqlite3.Connection) -> None:
    """Faster saves and a smaller file (issue 18): indexes no read needs are dropped or merged,
    the topic index holds only memories with a topic, and the FTS indexes are rebuilt without
    prefix indexes. Local journal records written from now on are stored elided (see
    engram/store/journal.py; older ones keep their text), with their states kept when their
    rows move on (:func:`kept_states_sql`)."""
    run_script(conn, LEAN_INDEXES)
    run_script(conn, kept_states_sql())
    run_script(conn, LEAN_FTS)
    conn.execute(_weights_sql())
    for fts in ("observations_fts", "prompts_fts"):
        conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")


# --- revisions (issue 17) ---------------------------------------------------------------------

REVISIONS_TABLE = """
-- Earlier versions of each memory, shown to people (engram history, the TUI, mem_get_observation
-- include_history): local, never synced, bounded per memory (engram/store/revisions.py keeps the
-- newest 20). Filled in the write transaction that replaces a version, whether the new one was
-- written here or arrived by git or cloud sync; a hard delete removes its memory's revisions.
CREATE TABLE IF NOT EXISTS observation_revisions (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    project        TEXT NOT NULL,
    sync_id        TEXT NOT NULL,
    hlc            TEXT NOT NULL,   -- the clock of the version kept here ('' for legacy rows)
    state          TEXT NOT NULL,   -- that version's replicated fields, as JSON
    replaced_at    TEXT NOT NULL,   -- when this machine replaced it
    replaced_by    TEXT NOT NULL    -- the clock of the version that replaced it
);
CREATE INDEX IF NOT EXISTS observation_revisions_key
    ON observation_revisions(project, sync_id, id);
"""


def migration_revisions(conn: sqlite3.Connection) -> None:
    """Revisions (issue 17): each memory's earlier versions, bounded, local only."""
    run_script(conn, REVISIONS_TABLE)


# --- the import's storage cost (issue 18, fifth round) -------------------------------------------


def migration_hash_prefix(conn: sqlite3.Connection) -> None:
    """The content-hash (dedupe) index holds a 12-digit prefix of each memory's hash instead of
    the whole 64-digit hash and the project: its keys are random, so every transaction that
    adds memories dirties most of its leaf pages, and an import of 100,000 mutations wrote 18%
    of its WAL pages for it (more than for any other index; docs/performance.md, "The import
    (fifth round)"). A quarter of the size, and a lookup still reads only the rows with that
    prefix (almost always the rows with that hash), filtering project and hash from the row."""
    conn.execute("DROP INDEX IF EXISTS observations_dedupe")
    conn.execute(f"CREATE INDEX observations_dedupe ON observations({DEDUPE_PREFIX_SQL})")


# --- a received record is held by its source without a delivery row (issue 18, sixth round) -----

TARGETS_TABLE = """
-- Every target (git:<dir>, cloud:<server>) records arrived through. A journal row counts as
-- held by the target it arrived through (its `source`) without a sync_delivery row, unless its
-- seq is at most `resend_through`: that target turned out not to hold what we believed
-- (Journal.forget_target / forget_delivered), so those rows are sent to it again.
CREATE TABLE IF NOT EXISTS sync_targets (
    target          TEXT PRIMARY KEY,
    resend_through  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
"""


def migration_delivery_by_source(conn: sqlite3.Connection) -> None:
    """A received record counts as held by its source (``sync_journal.source``) without a
    delivery row: an import of 100,000 mutations wrote 100,000 rows that only repeated the
    source (docs/performance.md, "The import (sixth round)"). The targets records arrived
    through are listed once each; the delivery rows that repeat a row's source are deleted. A
    target whose received rows already lacked their row (forgotten, waiting to be sent again)
    keeps them pending: its ``resend_through`` is the newest such row."""
    run_script(conn, TARGETS_TABLE)
    conn.execute(
        """INSERT OR IGNORE INTO sync_targets(target, resend_through)
           SELECT j.source, COALESCE(MAX(CASE WHEN d.seq IS NULL THEN j.seq END), 0)
           FROM sync_journal j
           LEFT JOIN sync_delivery d ON d.target = j.source AND d.seq = j.seq
           WHERE j.source != 'local' GROUP BY j.source"""
    )
    conn.execute(
        """DELETE FROM sync_delivery WHERE EXISTS (
               SELECT 1 FROM sync_journal j JOIN sync_targets t ON t.target = j.source
               WHERE j.seq = sync_delivery.seq AND j.source = sync_delivery.target
                 AND j.seq > t.resend_through)"""
    )


# --- the import's scope gate (issue 18, seventh round) --------------------------------------------


def migration_personal_index(conn: sqlite3.Connection) -> None:
    """The addresses of personal memories, as a small index of their own: an import's scope
    gate asks, for every memory a chunk would write, whether the memory at its address here
    is personal (engram/sync/git/scope.py); through the address index each key found meant
    reading its row for its scope, a random read in a large store (3.7 µs a key at 100,000
    memories, 0.3 through this index; docs/performance.md, "The import (seventh round)").
    Project memories, nearly all of them, are not in it.

    Its condition is written ``scope IS 'personal'``, never ``scope = 'personal'``: SQLite
    tests whether a statement may use a partial index by comparing its terms with the
    index's condition, and a term ``scope = ?`` compared with ``scope = 'personal'`` makes
    the statement depend on the value bound to it, so it is prepared again on every run (a
    save's duplicate lookup took 30 µs longer). No statement compares the scope with a
    parameter by IS (tests/sync/git/test_scope_gate.py)."""
    conn.execute(
        "CREATE INDEX IF NOT EXISTS observations_personal"
        " ON observations(project, sync_id) WHERE scope IS 'personal'"
    )


# --- a save writes no queue rows (issue 18, tenth round) ------------------------------------------

QUEUE_MARKS_TABLE = """
-- Per queue of off-save-path work on new memories ('vectors', 'conflicts'), the newest memory id
-- the queue has taken in: a memory inserted after it waits without a queue row, and the queue's
-- worker takes those in when it starts (engram/store/vector_queue.py, engram/store/conflicts.py).
CREATE TABLE IF NOT EXISTS queue_marks (
    queue    TEXT PRIMARY KEY,
    last_id  INTEGER NOT NULL
) WITHOUT ROWID;
"""


def migration_queue_marks(conn: sqlite3.Connection) -> None:
    """New memories wait for their vector and their conflict check without a queue row: a
    save wrote one into ``vector_pending`` and one into ``graph_conflict_queue``, each in its
    own b-tree (two of the ~24 pages a save wrote; and a queue that only grew where the
    semantic extra is not installed). Each queue now has a mark, the newest memory id it has
    taken in, and its worker takes in the memories above it when it starts
    (docs/performance.md, "The tenth round"). ``observations.saved_here`` says which new
    memories were saved on this machine (only those get a conflict check). Every memory here
    now was queued by the code that saved it, so both marks start at the newest."""
    run_script(conn, QUEUE_MARKS_TABLE)
    if "saved_here" not in {r[1] for r in conn.execute("PRAGMA table_info(observations)")}:
        conn.execute("ALTER TABLE observations ADD COLUMN saved_here INTEGER")
    conn.execute(
        "INSERT OR IGNORE INTO queue_marks(queue, last_id)"
        " SELECT name, (SELECT COALESCE(MAX(id), 0) FROM observations)"
        " FROM (SELECT 'vectors' AS name UNION ALL SELECT 'conflicts')"
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    migration_1,
    migration_2,
    migration_3,
    migration_4,
    migration_5,
    migration_6,
    migration_7,
    migration_8,
    migration_9,
    migration_10,
    migration_importance,
    migration_graph,
    migration_lean,
    migration_revisions,
    migration_hash_prefix,
    migration_delivery_by_source,
    migration_personal_index,
    migration_queue_marks,
]
SCHEMA_VERSION = len(MIGRATIONS)


def table_exists(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?", (name,)
    ).fetchone()
    return row is not None


def current_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def apply_migrations(conn: sqlite3.Connection) -> int:
    """Bring the schema up to date in one transaction; returns the number of steps applied.

    The caller holds a write transaction (``BEGIN IMMEDIATE``), so two processes opening a new
    database at once cannot both migrate it.
    """
    version = current_version(conn)
    if version > SCHEMA_VERSION:
        from engram.errors import StoreUnavailableError

        raise StoreUnavailableError(
            f"database schema version {version} is newer than this Engram understands "
            f"({SCHEMA_VERSION}); upgrade Engram"
        )
    for step in MIGRATIONS[version:]:
        step(conn)
    if version != SCHEMA_VERSION:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return SCHEMA_VERSION - version
