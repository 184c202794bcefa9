"""Copies of a memory that went through the Go tool and came back (issue 16).

The Go tool stores no ``sync_id``. A memory or prompt of ours that reached a Go teammate (a
``--go-compat`` chunk, ``engram export --format go``) comes back without its id when their
database is upgraded by Engram, or in a chunk or export their Go tool writes, and gets the key
derived from its fields (:func:`engram.record.derived_sync_id`) — next to the original, under
another key: the same memory twice.

**The rule.** In one project, a row whose key is the derived key of its own fields (the *copy*)
and another row with the same session, creation time, title and content (the *original*) are
one memory: the copy is retired by a hard delete that every replica derives identically (origin
zero, the copy's legacy clock plus one counter step, a mid from both keys), so replicas
converge whichever of the two they saw first, and any real edit of the copy (a real clock)
beats it. A copy that was edited for real is left alone. The check runs whenever a row
arrives from elsewhere (:mod:`engram.store.replication`) or is imported
(:mod:`engram.store.exchange`): cheap, one lookup by key or by session and time.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

from engram.record import (
    EPOCH_TEXT,
    LEGACY_ORIGIN,
    build_record,
    derived_id,
    format_hlc,
    parse_hlc,
)

_TABLE = {"observation": "observations", "prompt": "user_prompts"}


def derived_key(entity: str, state: dict[str, Any]) -> str:
    """The key the Go tool's copy of this memory or prompt (``state``) gets."""
    # (derived_sync_id's digest with its arguments passed by position: an import derives
    # the key of every new memory and prompt.)
    return derived_id(
        entity, state["project"], state["session_id"], state.get("created_at") or EPOCH_TEXT,
        state.get("title"), state["content"],
    )  # fmt: skip


def _original(
    conn: sqlite3.Connection, entity: str, project: str, copy_key: str, state: dict[str, Any]
) -> str | None:
    """Another row of ``project`` with the copy's session, creation time and text."""
    if entity == "observation":
        row = conn.execute(
            """SELECT sync_id FROM observations WHERE session_id = ? AND created_at = ?
                   AND project = ? AND title = ? AND content = ? AND sync_id != ?
               ORDER BY sync_id LIMIT 1""",
            (state["session_id"], state["created_at"], project, state["title"],
             state["content"], copy_key),
        ).fetchone()  # fmt: skip
    else:
        row = conn.execute(
            """SELECT sync_id FROM user_prompts WHERE session_id = ? AND created_at = ?
                   AND project = ? AND content = ? AND sync_id != ?
               ORDER BY sync_id LIMIT 1""",
            (state["session_id"], state["created_at"], project, state["content"], copy_key),
        ).fetchone()
    return str(row[0]) if row else None


def copy_pair(
    conn: sqlite3.Connection, entity: str, project: str, key: str, state: dict[str, Any]
) -> tuple[str, str] | None:
    """``(copy, original)`` keys when the row that just arrived at ``key`` with ``state``
    (observations and prompts) and another row of ``project`` are one memory, else None."""
    if entity not in _TABLE:
        return None
    derived = derived_key(entity, state)
    if derived != key:  # an original: is its copy here?
        found = conn.execute(
            f"SELECT 1 FROM {_TABLE[entity]} WHERE project = ? AND sync_id = ?",
            (project, derived),
        ).fetchone()
        return (derived, key) if found else None
    original = _original(conn, entity, project, key, state)
    return (key, original) if original else None


def retire_record(
    conn: sqlite3.Connection, entity: str, project: str, copy_key: str, original_key: str
) -> dict[str, Any] | None:
    """The hard delete that retires the copy, the same on every replica; None when the copy
    is gone or was edited for real since (its clock is not a legacy one)."""
    table = _TABLE[entity]
    updated = "updated_at" if entity == "observation" else "created_at"
    scope = "scope" if entity == "observation" else "'project'"
    row = conn.execute(
        f"SELECT hlc, session_id, {updated}, {scope} FROM {table} "
        "WHERE project = ? AND sync_id = ?",
        (project, copy_key),
    ).fetchone()
    if row is None or not row[0]:
        return None
    wall, counter, origin = parse_hlc(str(row[0]))
    if origin != LEGACY_ORIGIN:
        return None
    hlc = format_hlc(wall, counter + 1, LEGACY_ORIGIN)
    digest = hashlib.sha256(f"go-copy\0{copy_key}\0{original_key}\0{hlc}".encode()).hexdigest()
    return build_record(
        mid=digest[:32],
        hlc=hlc,
        origin=LEGACY_ORIGIN,
        entity=entity,
        key=copy_key,
        op="delete",
        project=project,
        scope=str(row[3] or "project"),
        payload={
            "sync_id": copy_key,
            "session_id": row[1],
            "project": project,
            "deleted_at": row[2] or EPOCH_TEXT,
            "hard": True,
        },
    )
