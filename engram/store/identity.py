"""Per-project identity (docs/architecture.md, "Identity, the journal and replication"): every session, memory and prompt
is addressed by ``(project, key)``. This module owns the rules that follow from it and that
several write paths share: a memory or prompt refers to the session ``(its project,
session_id)``, so a session recorded only under another project is copied (or held by a stub)
inside the referring project; and the keys a memory or prompt gets when it moves.
"""

from __future__ import annotations

import sqlite3

from engram.record import legacy_record
from engram.store.journal import insert_record, now_ms

#: Placeholder sessions carry no clock: the real session, whenever it arrives, overwrites them.
STUB_HLC = ""


def session_exists(conn: sqlite3.Connection, project: str, session_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sessions WHERE project = ? AND id = ?", (project, session_id)
    ).fetchone()
    return row is not None


def session_tombstoned(conn: sqlite3.Connection, project: str, session_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sync_tombstones WHERE entity = 'session' AND project = ? AND key = ?",
        (project, session_id),
    ).fetchone()
    return row is not None


def insert_stub_session(
    conn: sqlite3.Connection, project: str, session_id: str, started_at: str
) -> None:
    """A placeholder for a session a record names before the session itself arrives."""
    conn.execute(
        "INSERT OR IGNORE INTO sessions(id, project, directory, started_at, hlc)"
        " VALUES (?, ?, '', ?, ?)",
        (session_id, project, started_at, STUB_HLC),
    )


def copy_session_into(conn: sqlite3.Connection, project: str, session_id: str) -> bool:
    """Give ``project`` its own row of session ``session_id`` when the session is recorded only
    under other projects (data written before identity was per project, or by the Go tool).

    The copy is journaled with a deterministic legacy record (origin zero, clock from the
    session's own times, mid from project and id), so every machine that upgrades the same data
    writes the same mutation, and any real edit of the copy beats it. A stub is copied as a
    stub. Returns whether a row was added."""
    if session_exists(conn, project, session_id) or session_tombstoned(conn, project, session_id):
        return False
    source = conn.execute(
        """SELECT id, directory, started_at, ended_at, summary, hlc FROM sessions
           WHERE id = ? ORDER BY hlc = '', started_at DESC, project LIMIT 1""",
        (session_id,),
    ).fetchone()
    if source is None:
        return False
    state = {
        "id": session_id,
        "project": project,
        "directory": source[1],
        "started_at": source[2],
        "ended_at": source[3],
        "summary": source[4],
    }
    if source[5] == STUB_HLC:
        insert_stub_session(conn, project, session_id, state["started_at"])
        return True
    record = legacy_record(
        entity="session",
        op="upsert",
        payload=state,
        updated_at=state["ended_at"] or state["started_at"],
        project=project,
        scope="project",
        not_after_ms=now_ms(),
        mid_key=f"{project}\0{session_id}",
    )
    conn.execute(
        """INSERT INTO sessions(id, project, directory, started_at, ended_at, summary, hlc)
           VALUES (:id, :project, :directory, :started_at, :ended_at, :summary, :hlc)""",
        {**state, "hlc": record["hlc"]},
    )
    if conn.execute("SELECT 1 FROM sync_journal WHERE mid = ?", (record["mid"],)).fetchone():
        return True
    insert_record(conn, record, source="local")
    return True


def copy_foreign_sessions(conn: sqlite3.Connection) -> int:
    """Copy every session that memories or prompts of another project refer to into that
    project (see :func:`copy_session_into`); returns how many copies were made."""
    wanted = conn.execute(
        """SELECT DISTINCT t.project, t.session_id FROM (
               SELECT project, session_id FROM observations
               UNION SELECT project, session_id FROM user_prompts) t
           WHERE NOT EXISTS (SELECT 1 FROM sessions s
                             WHERE s.project = t.project AND s.id = t.session_id)
             AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = t.session_id)
           ORDER BY t.project, t.session_id"""
    ).fetchall()
    return sum(copy_session_into(conn, project, session_id) for project, session_id in wanted)
