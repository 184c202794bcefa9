"""The marks of the two queues of work done off the save path on new memories — a vector
(:mod:`engram.store.vector_queue`) and a conflict check (:mod:`engram.store.conflicts`).

A queue's mark is the newest memory id it has taken in. A memory inserted after the mark waits
without a queue row, so a save writes none: each queue's row was a b-tree page of its own in
every save's transaction (two of ~24). The queue's worker calls :meth:`MarkedQueue.take_new`
when it starts, which queues the memories above the mark the queue wants and moves the mark
past the newest; memory ids only grow (AUTOINCREMENT) and writers take turns, so no memory
inserted later is skipped. A change to an existing memory (an edit, a restore) still queues it
with a row.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MarkedQueue:
    """One queue: its row in ``queue_marks``, its table and memory-id column, which new
    memories it wants (SQL over ``observations o``) and, if it has one, the time column a
    memory taken in gets (its ``created_at``: queued as of its save)."""

    name: str
    table: str
    column: str
    wants: str
    stamp: str | None = None

    @property
    def mark(self) -> str:
        """SQL for the mark (a scalar subquery), to compare memory ids with."""
        return f"(SELECT last_id FROM queue_marks WHERE queue = '{self.name}')"

    @property
    def new_rows(self) -> str:
        """SQL: whether any memory was inserted after the mark (one rowid probe). Any, not
        only those the queue wants: :meth:`take_new` then moves the mark past the others,
        which every probe would otherwise read again."""
        return f"SELECT 1 FROM observations WHERE id > {self.mark} LIMIT 1"

    @property
    def waiting(self) -> str:
        """SQL (one statement, two probes): whether a row is queued or a memory was inserted
        after the mark."""
        return (
            f"SELECT EXISTS (SELECT 1 FROM {self.table})"
            f" OR EXISTS (SELECT 1 FROM observations WHERE id > {self.mark})"
        )

    def waiting_above(self, where: str = "1") -> str:
        """SQL ``FROM … WHERE …`` of the wanted memories above the mark (and matching
        ``where``, over ``o``) that have no queue row: with the queue's rows, all that waits."""
        return (
            f"FROM observations o WHERE o.id > {self.mark} AND {self.wants} AND {where}"
            f" AND o.id NOT IN (SELECT {self.column} FROM {self.table})"
        )

    def take_new(self, conn: sqlite3.Connection) -> None:
        """In a write transaction: queue the wanted memories above the mark and move the mark
        to the newest memory."""
        last = conn.execute(f"SELECT {self.mark}").fetchone()[0]
        newest = conn.execute("SELECT MAX(id) FROM observations").fetchone()[0] or 0
        if newest <= last:
            return
        columns, values = self.column, "o.id"
        if self.stamp:
            columns, values = f"{columns}, {self.stamp}", f"{values}, o.created_at"
        conn.execute(
            f"INSERT OR IGNORE INTO {self.table}({columns})"
            f" SELECT {values} FROM observations o WHERE o.id > ? AND {self.wants}",
            (last,),
        )
        conn.execute("UPDATE queue_marks SET last_id = ? WHERE queue = ?", (newest, self.name))
