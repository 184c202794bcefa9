"""Upgrading a database written by the Go tool that first defined Engram.

The file is copied aside first (``engram.db.go-backup-<time>``), then rebuilt into this schema in
one transaction: rows are copied with the Go tool's data fixes (blank scope → ``project``, counts
≥ 1, missing sync ids derived from the row as every importer derives them, duplicate sync ids
from its re-import bug collapsed to the newest row), and every row gets its deterministic legacy
journal entry (docs/architecture.md, "Identity, the journal and replication").
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.platform import private_file
from engram.project import project_name
from engram.record import EPOCH_TEXT, derived_sync_id, legacy_record
from engram.store import fts, scoring
from engram.store.identity import copy_session_into, insert_stub_session
from engram.store.journal import now_ms
from engram.store.schema import apply_migrations, table_exists
from engram.store.search_context import rederive_all
from engram.text import normalize_scope, normalize_topic_key, normalized_hash

if TYPE_CHECKING:
    from engram.store.store import Store

RENAMED = (
    "sessions",
    "observations",
    "user_prompts",
    "sync_chunks",
    "sync_state",
    "sync_enrolled_projects",
    "sync_mutations",
    "memory_relations",  # later Go versions: relations between memories (issue 20)
)
DROPPED_FTS = ("observations_fts", "prompts_fts")


#: The columns the upgrade reads from the Go tool's tables (missing ones: these defaults).
OBSERVATION_COLUMNS = {
    "id": "NULL", "sync_id": "NULL", "session_id": "''", "type": "''", "title": "''",
    "content": "''", "tool_name": "NULL", "project": "''", "scope": "'project'",
    "topic_key": "NULL", "revision_count": "1", "duplicate_count": "1", "last_seen_at": "NULL",
    "created_at": f"'{EPOCH_TEXT}'", "updated_at": "NULL", "deleted_at": "NULL",
    # The Go tool's later versions pin memories on one machine; here a pin is the user's
    # intent and travels with the memory (docs/importance.md).
    "pinned": "0",
}  # fmt: skip
PROMPT_COLUMNS = {
    "id": "NULL", "sync_id": "NULL", "session_id": "''", "content": "''", "project": "''",
    "created_at": f"'{EPOCH_TEXT}'",
}  # fmt: skip


def go_row_key(entity: str, row: dict[str, Any]) -> str:
    """The key a row of the Go tool's database gets here (an observation or prompt): its own
    ``sync_id`` (later Go versions have one), else the one derived from its fields as every
    importer derives it, so the same row upgraded, exported or synced gets one key."""
    return (row.get("sync_id") or "").strip() or derived_sync_id(
        entity,
        project=project_name(row["project"]),
        session_id=row["session_id"] or "manual-save",
        created_at=row["created_at"] or EPOCH_TEXT,
        title=(row.get("title") or "Untitled observation") if entity == "observation" else None,
        content=row["content"] or "",
    )


def go_database_keys(path: Path) -> dict[str, set[tuple[str, str]]]:
    """(project, key) of every session, observation and prompt of a Go tool database (read
    only), as the upgrade would address them. Raises :class:`sqlite3.DatabaseError` for a
    file that is not one."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        if not is_go_database(conn):
            raise sqlite3.DatabaseError("not a database of the Go tool")
        keys: dict[str, set[tuple[str, str]]] = {"session": set(), "observation": set()}
        for row in conn.execute("SELECT id, project FROM sessions"):
            keys["session"].add((project_name(row["project"]), row["id"]))
        for row in _select(conn, "observations", OBSERVATION_COLUMNS, "id"):
            keys["observation"].add((project_name(row["project"]), go_row_key("observation", row)))
        keys["prompt"] = {
            (project_name(row["project"]), go_row_key("prompt", row))
            for row in (
                _select(conn, "user_prompts", PROMPT_COLUMNS, "id")
                if table_exists(conn, "user_prompts")
                else []
            )
        }
        return keys
    finally:
        conn.close()


def is_go_database(conn: sqlite3.Connection) -> bool:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return version == 0 and table_exists(conn, "observations")


def backup(conn: sqlite3.Connection, db_path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    target = db_path.with_name(f"{db_path.name}.go-backup-{stamp}")
    private_file(target)  # a copy of every memory: 0600 like the database itself
    copy = sqlite3.connect(str(target))
    try:
        conn.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
    finally:
        copy.close()
    return target


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _select(
    conn: sqlite3.Connection, table: str, wanted: dict[str, str], order: str
) -> list[dict[str, Any]]:
    """Rows of an old table with missing columns replaced by SQL defaults."""
    have = _columns(conn, table)
    cols = ", ".join(
        f"{name}" if name in have else f"{default} AS {name}" for name, default in wanted.items()
    )
    return [dict(r) for r in conn.execute(f"SELECT {cols} FROM {table} ORDER BY {order}")]


def upgrade(store: Store) -> Path:
    """Back up and migrate a Go-format database in place; returns the backup's path."""
    conn = store.db.conn
    saved = backup(conn, store.db.path)
    # The Go schema declares foreign keys between the tables being rebuilt; ours has none.
    conn.execute("PRAGMA foreign_keys=OFF")
    try:
        _rebuild(store)
    finally:
        conn.execute("PRAGMA foreign_keys=ON")
    return saved


def _rebuild(store: Store) -> None:
    with store.db.write() as conn:
        for trigger in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        ).fetchall():
            conn.execute(f'DROP TRIGGER IF EXISTS "{trigger[0]}"')
        for name in DROPPED_FTS:
            conn.execute(f"DROP TABLE IF EXISTS {name}")
        present = [t for t in RENAMED if table_exists(conn, t)]
        for table in present:
            conn.execute(f"ALTER TABLE {table} RENAME TO go_{table}")
        for (index,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        ).fetchall():
            conn.execute(f'DROP INDEX IF EXISTS "{index}"')
        apply_migrations(conn)
        store.journal.ensure_identity(conn)
        newest = _copy_rows(store, conn, set(present))
        rederive_all(conn)
        fts.rebuild(conn)
        scoring.rescore_where(conn, "o.importance IS NULL")
        # The Go tool freed deleted rows without zeroing them: the first purge vacuums.
        conn.execute("UPDATE store_purge SET vacuum_needed = 1")
        if newest:
            store.journal.observe(conn, newest)
        for table in present:
            conn.execute(f"DROP TABLE go_{table}")


def _journal(
    store: Store,
    conn: sqlite3.Connection,
    entity: str,
    state: dict[str, Any],
    updated_at: str,
    table: str,
    key_column: str,
) -> str:
    op = "delete" if entity == "observation" and state.get("deleted_at") else "upsert"
    payload = {**state, "hard": False} if op == "delete" else state
    record = legacy_record(
        entity=entity,
        op=op,
        payload=payload,
        updated_at=updated_at,
        project=state["project"],
        scope=state.get("scope", "project"),
        not_after_ms=now_ms(),  # a row dated in the future must not outrank real edits
    )
    if not store.journal.has_mid(conn, record["mid"]):
        store.journal.append_record(conn, record, source="local")
    conn.execute(
        f"UPDATE {table} SET hlc = ? WHERE project = ? AND {key_column} = ?",
        (record["hlc"], record["project"], record["key"]),
    )
    return str(record["hlc"])


def _copy_rows(store: Store, conn: sqlite3.Connection, present: set[str]) -> str:
    newest = ""
    if "sessions" in present:
        for row in _select(
            conn,
            "go_sessions",
            {
                "id": "''",
                "project": "''",
                "directory": "''",
                "started_at": f"'{EPOCH_TEXT}'",
                "ended_at": "NULL",
                "summary": "NULL",
            },
            "started_at, id",
        ):
            state = {
                **row,
                "project": project_name(row["project"]),
                "directory": row["directory"] or "",
                "started_at": row["started_at"] or EPOCH_TEXT,
            }
            conn.execute(
                """INSERT OR IGNORE INTO sessions(id, project, directory, started_at, ended_at, summary)
                   VALUES (:id, :project, :directory, :started_at, :ended_at, :summary)""",
                state,
            )
            newest = max(
                newest,
                _journal(
                    store,
                    conn,
                    "session",
                    state,
                    state["ended_at"] or state["started_at"],
                    "sessions",
                    "id",
                ),
            )
    rows = _select(conn, "go_observations", OBSERVATION_COLUMNS, "id")
    # Identity is per project: duplicates (the Go tool's re-import bug) are one address each.
    newest_by_sync: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        # Derived, not random: the same row upgraded, exported or synced by the Go tool gets
        # the same key on every machine (and the Go tool's duplicated rows collapse into one).
        sync_id = go_row_key("observation", row)
        row["sync_id"] = sync_id
        row["updated_at"] = row["updated_at"] or row["created_at"]
        address = (project_name(row["project"]), sync_id)
        kept = newest_by_sync.get(address)
        if kept is None or (row["updated_at"], row["id"]) > (kept["updated_at"], kept["id"]):
            newest_by_sync[address] = row
    for row in sorted(newest_by_sync.values(), key=lambda r: r["id"]):
        state = {
            "sync_id": row["sync_id"],
            "session_id": row["session_id"] or "manual-save",
            "type": (row["type"] or "").strip() or "manual",
            "title": row["title"] or "Untitled observation",
            "content": row["content"] or "",
            "tool_name": row["tool_name"],
            "project": project_name(row["project"]),
            "scope": normalize_scope(row["scope"]),
            "topic_key": normalize_topic_key(row["topic_key"]),
            "revision_count": max(1, int(row["revision_count"] or 1)),
            "duplicate_count": max(1, int(row["duplicate_count"] or 1)),
            "last_seen_at": row["last_seen_at"],
            "created_at": row["created_at"] or EPOCH_TEXT,
            "updated_at": row["updated_at"],
            "deleted_at": row["deleted_at"],
        }
        if row["pinned"]:
            state["pinned"] = True
        # Its session in its own project: a copy of the same-id session the Go tool recorded
        # under another project, else a stub.
        if not copy_session_into(conn, state["project"], state["session_id"]):
            insert_stub_session(conn, state["project"], state["session_id"], EPOCH_TEXT)
        conn.execute(
            """INSERT INTO observations(id, sync_id, session_id, type, title, content, tool_name,
                   project, scope, topic_key, normalized_hash, revision_count, duplicate_count,
                   last_seen_at, created_at, updated_at, deleted_at, search_context, pinned)
               VALUES (:id, :sync_id, :session_id, :type, :title, :content, :tool_name, :project,
                   :scope, :topic_key, :normalized_hash, :revision_count, :duplicate_count,
                   :last_seen_at, :created_at, :updated_at, :deleted_at, :search_context,
                   :pinned)""",
            {
                **state,
                "pinned": int(bool(state.get("pinned"))),
                "id": row["id"],
                "normalized_hash": normalized_hash(state["content"]),
                "search_context": "",  # derived for every row once all are copied
            },
        )
        newest = max(
            newest,
            _journal(
                store, conn, "observation", state, state["updated_at"], "observations", "sync_id"
            ),
        )
    if "user_prompts" in present:
        seen: set[tuple[str, str]] = set()
        for row in _select(conn, "go_user_prompts", PROMPT_COLUMNS, "id"):
            sync_id = go_row_key("prompt", row)
            if (project_name(row["project"]), sync_id) in seen:
                continue
            seen.add((project_name(row["project"]), sync_id))
            state = {
                "sync_id": sync_id,
                "session_id": row["session_id"] or "manual-save",
                "content": row["content"] or "",
                "project": project_name(row["project"]),
                "created_at": row["created_at"] or EPOCH_TEXT,
            }
            copy_session_into(conn, state["project"], state["session_id"])
            conn.execute(
                """INSERT INTO user_prompts(id, sync_id, session_id, content, project, created_at)
                   VALUES (:id, :sync_id, :session_id, :content, :project, :created_at)""",
                {**state, "id": row["id"]},
            )
            newest = max(
                newest,
                _journal(
                    store, conn, "prompt", state, state["created_at"], "user_prompts", "sync_id"
                ),
            )
    if "memory_relations" in present:
        newest = max(newest, _copy_relations(conn))
    if "sync_enrolled_projects" in present:
        conn.execute("""INSERT OR IGNORE INTO sync_enrolled_projects(project, enrolled_at)
                        SELECT project, COALESCE(enrolled_at, strftime('%Y-%m-%d %H:%M:%S','now'))
                        FROM go_sync_enrolled_projects""")
    return newest


def _copy_relations(conn: sqlite3.Connection) -> str:
    """A later Go database's relations, by the rules of importing a ``0.2.0`` export (the
    relation lives in its memories' project; one whose memories are missing or in two
    projects is left out), each with its deterministic legacy journal entry."""
    from engram.store.exchange import ImportRun
    from engram.store.models import ImportResult

    run = ImportRun(conn, now_ms())
    wanted = {
        name: "NULL"
        for name in (
            "sync_id", "reason", "evidence", "confidence", "judgment_status", "marked_by_actor",
            "marked_by_kind", "marked_by_model", "session_id", "superseded_at",
            "superseded_by_relation_id", "created_at", "updated_at",
        )
    }  # fmt: skip
    wanted.update(source_id="''", target_id="''", relation="''")
    result = ImportResult()
    for row in _select(conn, "go_memory_relations", wanted, "rowid"):
        item = {k: (str(v) if k != "confidence" and v is not None else v) for k, v in row.items()}
        run.relation(item, result)
    run.flush_journal()
    return run.newest
