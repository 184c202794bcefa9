"""Revisions: each memory's earlier versions, kept locally and bounded (DESIGN §3 "The journal
may be compacted": what people are shown of the past lives here, not in the journal).

Whenever a write replaces a memory's title, content, type, topic or scope — an edit here, a topic
save, or an edit that arrives by git or cloud sync and wins — the version it replaces is kept in
``observation_revisions`` in the same transaction, with the clock that wrote it (its origin says
which machine) and the clock that replaced it. The newest :data:`KEPT` per memory are kept. A
hard delete removes them with the memory (its text must not linger); a move to another project
takes them along. Nothing here is synced: every machine keeps what it saw.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from engram.store.base import StoreBase
from engram.store.checks import check_id
from engram.store.models import History, Revision
from engram.times import now_text

#: Earlier versions kept per memory.
KEPT = 20
#: The fields whose change makes a new revision (counters and times alone do not).
TRACKED = ("title", "content", "type", "topic_key", "scope", "tool_name")

_INSERT = """INSERT INTO observation_revisions(project, sync_id, hlc, state, replaced_at,
                 replaced_by) VALUES (?, ?, ?, ?, ?, ?)"""
_PRUNE = """DELETE FROM observation_revisions WHERE project = ? AND sync_id = ? AND id NOT IN (
                SELECT id FROM observation_revisions WHERE project = ? AND sync_id = ?
                ORDER BY id DESC LIMIT ?)"""


def origin_of(hlc: str) -> str:
    """The machine (origin) that wrote a clock ``{wall}.{counter}.{origin}``."""
    return hlc.rsplit(".", 1)[-1] if hlc.count(".") >= 2 else ""


def changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return any(old.get(name) != new.get(name) for name in TRACKED)


def keep(
    conn: sqlite3.Connection,
    old: dict[str, Any],
    old_hlc: str,
    new: dict[str, Any],
    new_hlc: str,
) -> bool:
    """Keep ``old`` (the replicated state at ``old_hlc``) as a revision of its memory, replaced
    by ``new`` at ``new_hlc``, if what people read changed; prune beyond :data:`KEPT`. Returns
    whether a revision was kept."""
    if not changed(old, new):
        return False
    import orjson  # here, not at the top: a plain save or search never loads it (issue 18)

    project, key = old["project"], old["sync_id"]
    conn.execute(
        _INSERT, (project, key, old_hlc or "", orjson.dumps(old).decode(), now_text(), new_hlc)
    )
    conn.execute(_PRUNE, (project, key, project, key, KEPT))
    return True


def keep_many(
    conn: sqlite3.Connection, versions: list[tuple[dict[str, Any], str, dict[str, Any], str]]
) -> list[bool]:
    """:func:`keep` for many ``(old, old_hlc, new, new_hlc)`` versions of distinct memories at
    once (a bulk apply's edits), in two statements; whether each was kept."""
    import orjson

    done = [changed(old, new) for old, _, new, _ in versions]
    rows = [
        (old["project"], old["sync_id"], old_hlc or "", orjson.dumps(old).decode(), now_text(),
         new_hlc)
        for (old, old_hlc, _, new_hlc), kept in zip(versions, done, strict=True) if kept
    ]  # fmt: skip
    if rows:
        conn.executemany(_INSERT, rows)
        conn.executemany(_PRUNE, [(p, k, p, k, KEPT) for p, k, *_ in rows])
    return done


def kept_at(conn: sqlite3.Connection, project: str, key: str, when: str) -> dict[str, Any] | None:
    """The newest kept version of memory ``(project, key)`` written at or before ``when``
    (``None`` when none is that old): what it said then, for search as of a moment."""
    import orjson

    best: dict[str, Any] | None = None
    for (text,) in conn.execute(
        "SELECT state FROM observation_revisions WHERE project = ? AND sync_id = ?",
        (project, key),
    ):
        state = orjson.loads(text)
        at = state.get("updated_at") or ""
        if at <= when and (best is None or at > (best.get("updated_at") or "")):
            best = state
    return best


def forget(conn: sqlite3.Connection, project: str, key: str) -> None:
    """A hard delete: the memory's earlier text goes with it."""
    conn.execute(
        "DELETE FROM observation_revisions WHERE project = ? AND sync_id = ?", (project, key)
    )


def move(conn: sqlite3.Connection, project: str, key: str, new_project: str, new_key: str) -> None:
    """A memory moved to another project (new address): its revisions follow it."""
    conn.execute(
        "UPDATE observation_revisions SET project = ?, sync_id = ? WHERE project = ? AND sync_id = ?",
        (new_project, new_key, project, key),
    )


class RevisionsMixin(StoreBase):
    def history(self, observation_id: Any, *, include_deleted: bool = True) -> History:
        """A memory (deleted ones too: their past is what one looks for) and its earlier
        versions, newest first."""
        import orjson

        oid = check_id(observation_id)
        current = self.get_observation(oid, include_deleted=include_deleted)
        row = self.db.one("SELECT hlc FROM observations WHERE id = ?", (oid,))
        hlc = str(row[0]) if row is not None else ""
        rows = self.db.rows(
            """SELECT hlc, state, replaced_at, replaced_by FROM observation_revisions
               WHERE project = ? AND sync_id = ? ORDER BY id DESC""",
            (current.project, current.sync_id),
        )
        local = self.journal.origin
        revisions = []
        for r in rows:
            state = orjson.loads(r["state"])
            revisions.append(
                Revision(
                    title=state.get("title") or "",
                    content=state.get("content") or "",
                    type=state.get("type") or "",
                    topic_key=state.get("topic_key"),
                    scope=state.get("scope") or "project",
                    updated_at=state.get("updated_at") or "",
                    revision_count=int(state.get("revision_count") or 1),
                    origin=origin_of(r["hlc"]),
                    written_here=origin_of(r["hlc"]) == local,
                    replaced_at=r["replaced_at"],
                    replaced_by_origin=origin_of(r["replaced_by"]),
                    replaced_here=origin_of(r["replaced_by"]) == local,
                )
            )
        return History(
            observation=current,
            origin=origin_of(hlc),
            written_here=origin_of(hlc) == local,
            revisions=revisions,
            count=len(revisions),
        )


def current_state(conn: sqlite3.Connection, rowid: int) -> tuple[dict[str, Any], str] | None:
    """The replicated state of observation ``rowid`` and its clock (before a write replaces
    them)."""
    from engram.store.base import StoreBase as _Base

    row = conn.execute(
        "SELECT project, sync_id, hlc FROM observations WHERE id = ?", (rowid,)
    ).fetchone()
    if row is None:
        return None
    state = _Base._state(conn, "observation", row[0], row[1])
    return (state, str(row[2] or "")) if state is not None else None
