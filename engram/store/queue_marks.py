"""The marks of the two queues of work done off the save path on new memories — a vector
(:mod:`engram.store.vector_queue`) and a conflict check (:mod:`engram.store.conflicts`).

A queue's mark is the newest memory id it has taken in. A memory inserted after the mark waits
without a queue row, so a save writes none: each queue's row was a b-tree page of its own in
every save's transaction (two of ~24). The queue's worker calls :func:`take_new` when it starts,
which queues the memories above the mark and moves the mark past the newest; memory ids only
grow (AUTOINCREMENT) and writers take turns, so no memory inserted later is skipped. A change
to an existing memory (an edit, a restore) still queues it with a row.
"""

from __future__ import annotations

import sqlite3


def mark(queue: str) -> str:
    """SQL for the queue's mark (a scalar subquery), to compare memory ids with."""
    if queue not in ("vectors", "conflicts"):
        raise ValueError(f"no queue {queue!r}")
    return f"(SELECT last_id FROM queue_marks WHERE queue = '{queue}')"


def new_rows(queue: str) -> str:
    """SQL: whether any memory was inserted after the queue's mark (one rowid probe). Any, not
    only those the queue wants: the worker's :func:`take_new` then moves the mark past
    memories it does not want, which would otherwise be read again by every probe."""
    return f"SELECT 1 FROM observations WHERE id > {mark(queue)} LIMIT 1"


def take_new(conn: sqlite3.Connection, queue: str, insert: str) -> None:
    """In a write transaction: run ``insert`` (an ``INSERT … SELECT`` of the memories above the
    mark, whose one parameter is the mark) and move the mark to the newest memory."""
    last = conn.execute(f"SELECT {mark(queue)}").fetchone()[0]
    newest = conn.execute("SELECT MAX(id) FROM observations").fetchone()[0] or 0
    if newest <= last:
        return
    conn.execute(insert, (last,))
    conn.execute("UPDATE queue_marks SET last_id = ? WHERE queue = ?", (newest, queue))
