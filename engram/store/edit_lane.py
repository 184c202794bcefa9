"""The edit lane of a bulk apply: edits and soft deletes of memories this store already holds,
written with the fresh lane's run (:mod:`engram.store.fresh_lane`) instead of one by one.

After the new records, most of an import's other records are edits and soft deletes of memories
an earlier chunk brought. One by one each cost a dozen statements (its clock, its old state for
the revision, its session-context places before and after, the row's update, the journal row, the
revision, the Go copy check) and broke the fresh lane's run in two. For such a record the rules of
:mod:`engram.store.replication` need only what the row held before the batch, read for all of
them at once (:func:`held_rows`): last writer wins is one string comparison, the revision's old
state is the row's, the session-context places are the old and new states'. A record qualifies
when, in the batch, it is the first with its mid, it is an upsert or a soft delete of a memory
whose row is here (before the batch, or written by the batch's earlier records at its address,
each of which took a lane), that row's clock is not the Go tool's (only such a row can be
retired as a Go copy by another record of the batch), and its own Go-derived key is not its key
and names no row or batch record (so it retires no copy either). Nothing else in the batch can
then touch its row before the record is written, so writing the run's edits together (after the
run's new rows, before its journal rows, each update setting only the columns whose value
changes; an edit of a memory the run writes already goes in the next run, after the journal
rows whose kept state it must leave) leaves what the one-by-one apply leaves. A row the batch
wrote is read when the run is written; last writer wins is decided at planning from the clocks
alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from engram.record import LEGACY_ORIGIN, STATE_FIELDS, hlc_text
from engram.store import graph_rows, revisions, vector_queue
from engram.text import normalized_hash

if TYPE_CHECKING:
    from engram.store.models import ApplyResult
    from engram.store.replication import _ApplyBatch

_FIELDS = STATE_FIELDS["observation"]
#: The columns a replicated edit sets (and ``hlc``, which it always changes): an edit updates
#: only those whose value differs from the row's, so SQLite rewrites only the indexes that hold
#: them (an edit of a memory's text: 3 of its 8 indexes; 29 against 53 µs an update).
_SET = ("session_id", "type", "title", "content", "tool_name", "scope", "topic_key",
        "normalized_hash", "revision_count", "duplicate_count", "last_seen_at", "created_at",
        "updated_at", "deleted_at", "pinned", "importance_override", "valid_from", "valid_to",
        "delete_reason", "superseded_by", "reviewed_at")  # fmt: skip
_STORED = [_FIELDS.index(name) if name in _FIELDS else len(_FIELDS) for name in _SET]
_SOFT_DELETE = "UPDATE observations SET deleted_at = ?, updated_at = ?, hlc = ? WHERE id = ?"


class Held(NamedTuple):
    """A memory's row as it was before the batch, or only its clock (``state`` None, the row
    read when the run is written) when earlier records of the batch wrote it."""

    rowid: int
    hlc: str
    state: dict[str, Any] | None
    #: The row's values of the columns an edit sets (:data:`_SET`), as stored.
    stored: tuple[Any, ...] | None = None


class Edit(NamedTuple):
    """How the edit lane applies one record: the row it finds and what the record writes."""

    held: Held
    #: What the record sets (``None``: a soft delete that carries only key fields).
    state: dict[str, Any] | None
    #: Whether it wins at its address (last writer wins): else it is journaled as stale.
    wins: bool


def held_rows(conn: sqlite3.Connection, project: str, keys: Sequence[str]) -> dict[str, Held]:
    """The rows of memories ``keys`` of ``project``, with their replicated state (as
    :meth:`engram.store.base.StoreBase._state` reads it) and clock, for the whole batch at
    once (joined from the keys: each looked up through the address's unique index)."""
    found: dict[str, Held] = {}
    columns = ", ".join(f"t.{name}" for name in _FIELDS)
    for part in vector_queue.chunks(keys):
        rows = conn.execute(
            f"""WITH wanted(key) AS (VALUES {", ".join("(?)" for _ in part)})
                SELECT t.id, t.hlc, {columns}, t.normalized_hash
                FROM wanted CROSS JOIN observations t
                  ON t.sync_id = wanted.key AND t.project = ?""",
            [*part, project],
        )
        for row in rows:
            values = row[2:]
            state = dict(zip(_FIELDS, values[:-1], strict=True))
            state["pinned"] = bool(state["pinned"])  # stored as 0/1, replicated as a boolean
            stored = tuple(values[i] for i in _STORED)
            found[state["sync_id"]] = Held(int(row[0]), str(row[1]), state, stored)
    return found


def qualifies(held: Held | None) -> bool:
    """Whether a row may be edited in the lane: here, and not a possible Go copy (another
    record of the batch may retire only a row whose clock is the Go tool's)."""
    return held is not None and not held.hlc.endswith("." + LEGACY_ORIGIN)


def plan(record: dict[str, Any], held: Held, state: dict[str, Any] | None) -> Edit:
    """The lane's plan for ``record`` at ``held``'s address (``state``: its full state)."""
    return Edit(held, state, record["hlc"] > held.hlc)


def write(
    batch: _ApplyBatch, edits: list[tuple[dict[str, Any], Edit]], result: ApplyResult
) -> None:
    """Write a run's winning edits, in its order, with everything the one-by-one apply does
    around them (the old indexed values, vectors and graph, revisions, context, scores). The
    run's new rows and stub sessions are written before, its journal rows after."""
    conn = batch.conn
    edits = _read_rows(conn, edits)
    updates: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    changed: list[int] = []  # the rows whose indexed text may change
    deletes: list[tuple[str, str, str, int]] = []
    kept: list[tuple[dict[str, Any], int, dict[str, Any], str, dict[str, Any]]] = []
    for record, edit in edits:
        if not edit.wins:
            continue
        rowid, hlc, s, old = edit.held.rowid, record["hlc"], edit.state, edit.held.state
        assert old is not None  # (read)
        if s is None:  # a soft delete of key fields only: the row and its index entry stay
            deleted_at = record["payload"].get("deleted_at") or hlc_text(hlc)
            vector_queue.forget_deleted(conn, "id", rowid)
            deletes.append((deleted_at, deleted_at, hlc, rowid))
        else:
            changed.append(rowid)
            new = (s["session_id"], s["type"], s["title"], s["content"], s["tool_name"],
                   s["scope"], s["topic_key"], normalized_hash(s["content"]),
                   s["revision_count"], s["duplicate_count"], s["last_seen_at"],
                   s["created_at"], s["updated_at"], s["deleted_at"], int(s["pinned"]),
                   s["importance_override"], s["valid_from"], s["valid_to"],
                   s["delete_reason"], s["superseded_by"], s["reviewed_at"])  # fmt: skip
            stored = edit.held.stored
            assert stored is not None
            # Unchanged: the same value of the same type (1 and 1.0 may be stored apart).
            differ = [
                i for i, (a, b) in enumerate(zip(stored, new, strict=True))
                if type(a) is not type(b) or a != b
            ]  # fmt: skip
            updates.setdefault(tuple(_SET[i] for i in differ), []).append(
                (*(new[i] for i in differ), hlc, rowid)
            )
            if record["op"] != "delete":  # a delete is no new version
                kept.append((record, rowid, old, edit.held.hlc, s))
        batch.rescore.add(rowid)  # and, at the end, the memories related to it
    if changed:  # (their indexed values noted before any is updated)
        batch.index.before_changes(changed)
    for columns, rows in updates.items():
        sets = "".join(f"{name} = ?, " for name in columns)
        conn.executemany(f"UPDATE observations SET {sets}hlc = ? WHERE id = ?", rows)
    if deletes:
        conn.executemany(_SOFT_DELETE, deletes)
        graph_rows.forget(conn, [d[3] for d in deletes])  # the graph holds live memories only
    for _, edit in edits:
        if edit.wins and edit.held.state is not None:  # the row, the rows after its places
            batch.context.changed(edit.held.rowid, edit.held.state, edit.state)
    if kept:
        _keep_revisions(batch, kept, result)
    if any(edit.wins for _, edit in edits):
        batch.memories_arrived = True  # a waiting relation may name one


def _read_rows(
    conn: sqlite3.Connection, edits: list[tuple[dict[str, Any], Edit]]
) -> list[tuple[dict[str, Any], Edit]]:
    """The edits with the rows they find: a row an earlier record of the batch wrote (the
    run's own new rows are written by now) is read here, once per run."""
    unread: dict[str, list[str]] = {}
    for record, edit in edits:
        if edit.held.state is None:
            unread.setdefault(record["project"], []).append(record["key"])
    if not unread:
        return edits
    rows = {
        (project, key): row
        for project, keys in unread.items()
        for key, row in held_rows(conn, project, keys).items()
    }
    return [
        (r, e if e.held.state is not None else e._replace(held=rows[(r["project"], r["key"])]))
        for r, e in edits
    ]


def _keep_revisions(
    batch: _ApplyBatch,
    kept: list[tuple[dict[str, Any], int, dict[str, Any], str, dict[str, Any]]],
    result: ApplyResult,
) -> None:
    """The versions the run's edits replaced become revisions (if their text changed); one
    this machine wrote, replaced by another machine's, is reported as superseded (as
    :meth:`_ApplyBatch._kept_revision` does one at a time)."""
    done = revisions.keep_many(
        batch.conn, [(old, old_hlc, new, record["hlc"]) for record, _, old, old_hlc, new in kept]
    )
    for (record, rowid, old, old_hlc, new), was_kept in zip(kept, done, strict=True):
        if not was_kept:
            continue
        if batch.origin is None:
            batch.origin = batch.store.journal.origin
        if revisions.origin_of(old_hlc) == batch.origin and record["origin"] != batch.origin:
            result.superseded.append(
                {"id": rowid, "project": record["project"],
                 "title": old.get("title"), "new_title": new.get("title"),
                 "by": record["origin"]}
            )  # fmt: skip
