"""Keeping the derived indexes in step with their tables: the FTS5 indexes, the vector
index's bookkeeping (a memory whose text changes loses its vector and is queued for a new one,
see :mod:`engram.store.vectors`; no model ever runs here), and the entity graph (a memory whose
text changes leaves it until the next ingest, see :mod:`engram.store.graph`).

Done with explicit statements, not triggers: a trigger runs inside a statement savepoint, at
which FTS5 flushes its pending terms, so every written row became its own index segment and bulk
writes ran 2-3x slower. Every write path of the store calls these functions; nothing else writes
the indexed tables. Remove a row from an index *before* the row changes (the external-content
index needs the exact old values to delete them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engram.store import graph_rows, vector_queue

OBSERVATION_COLUMNS = ("title", "content", "tool_name", "type", "project", "topic_key",
                       "search_context")  # fmt: skip
PROMPT_COLUMNS = ("content", "project")

_INDEXES = {
    "observations": ("observations_fts", OBSERVATION_COLUMNS),
    "user_prompts": ("prompts_fts", PROMPT_COLUMNS),
}
_ADD = {
    table: f"INSERT INTO {fts}(rowid, {', '.join(cols)}) VALUES (?{', ?' * len(cols)})"
    for table, (fts, cols) in _INDEXES.items()
}
_REMOVE = {
    table: f"INSERT INTO {fts}({fts}, rowid, {', '.join(cols)}) VALUES ('delete', ?{', ?' * len(cols)})"
    for table, (fts, cols) in _INDEXES.items()
}
_KEYS = ("id", "sync_id")


def _select(table: str, column: str) -> str:
    if column not in _KEYS:
        raise ValueError(f"cannot look rows up by {column!r}")
    _, cols = _INDEXES[table]
    return f"SELECT id, {', '.join(cols)} FROM {table} WHERE {column} = ?"


def add(conn: sqlite3.Connection, table: str, rowid: int, values: Mapping[str, Any]) -> None:
    """Index a row that was just inserted (``values`` holds at least the indexed columns)."""
    _, cols = _INDEXES[table]
    conn.execute(_ADD[table], (rowid, *(values.get(c) for c in cols)))
    # (A new memory waits for its vector without a queue row: engram/store/vector_queue.py.)


def restore(conn: sqlite3.Connection, table: str, column: str, value: object) -> None:
    """Index the row(s) where ``column = value`` as they now are (after an update)."""
    for row in conn.execute(_select(table, column), (value,)).fetchall():
        conn.execute(_ADD[table], tuple(row))


def remove(
    conn: sqlite3.Connection, table: str, column: str, value: object, *, own_text: bool = True
) -> None:
    """Take the row(s) where ``column = value`` out of the index, before they change.
    ``own_text=False``: only the session context changes, so a memory keeps its vector and its
    entity graph (made from its title and content)."""
    rows = conn.execute(_select(table, column), (value,)).fetchall()
    for row in rows:
        conn.execute(_REMOVE[table], tuple(row))
    if table == "observations" and own_text:
        vector_queue.forget(conn, [row[0] for row in rows])
        graph_rows.forget(conn, [row[0] for row in rows])


def _add_rows(conn: sqlite3.Connection, table: str, rowids: list[int]) -> None:
    """Index the rows ``rowids`` (sorted) as they now are; rows no longer there are skipped."""
    fts, cols = _INDEXES[table]
    names = ", ".join(cols)
    for part in vector_queue.chunks(rowids):
        conn.execute(
            f"INSERT INTO {fts}(rowid, {names}) SELECT id, {names} FROM {table}"
            f" WHERE id IN ({', '.join('?' * len(part))}) ORDER BY id",
            part,
        )


def rebuild(conn: sqlite3.Connection) -> None:
    """Re-index every row (after a bulk copy that bypassed the functions above)."""
    for fts, _ in _INDEXES.values():
        conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")
    vector_queue.forget_all(conn)


class DeferredIndex:
    """Index maintenance for a batch of changes to existing rows.

    FTS5 flushes its pending terms to a new segment whenever a rowid arrives out of order, and
    every edit or delete of an older row does that: applying a batch with edits spent most of its
    time in those flushes. So a batch notes each changed row's indexed values the first time it
    touches it and, at :meth:`flush`, removes those and adds the rows' final values in rowid order.
    New rows are indexed at once (their rowids only grow), or at :meth:`flush` when noted with
    :meth:`inserted` (a bulk apply: its new memories' session context is derived at its end, and
    its new prompts, indexed as they came, became one tiny segment each, since any later
    statement that runs a trigger — an edit keeping a state — made FTS5 flush them).
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._old: dict[str, dict[int, tuple[Any, ...]]] = {table: {} for table in _INDEXES}
        #: Observations inserted but not indexed yet (indexed at flush, if still there).
        self._fresh: set[int] = set()
        #: Prompts likewise.
        self._fresh_prompts: set[int] = set()

    def inserted(self, rowid: int) -> None:
        """An observation just inserted, to be indexed at flush."""
        self._fresh.add(rowid)

    def inserted_prompts(self, rowids: Iterable[int]) -> None:
        """Prompts just inserted, to be indexed at flush."""
        self._fresh_prompts.update(rowids)

    def before_change(
        self, table: str, column: str, value: object, *, own_text: bool = True
    ) -> None:
        """Call before updating or deleting the row(s) where ``column = value`` (``own_text``
        as in :func:`remove`)."""
        if table == "observations" and column == "id" and value in self._fresh:
            return  # not indexed yet, and new: no vector, and none queued (vector_queue.py)
        fresh = self._fresh if table == "observations" else self._fresh_prompts
        if column == "id" and value in fresh:
            return  # a prompt not indexed yet
        old = self._old[table]
        rows = self.conn.execute(_select(table, column), (value,)).fetchall()
        for row in rows:
            if row[0] not in fresh:  # not in the index yet
                old.setdefault(row[0], tuple(row))
        if table == "observations" and own_text:
            vector_queue.forget(self.conn, [row[0] for row in rows])
            graph_rows.forget(self.conn, [row[0] for row in rows])

    def before_changes(self, rowids: Sequence[int], *, own_text: bool = True) -> None:
        """:meth:`before_change` of observations ``rowids`` (by id) at once, a few statements
        for all of them (a bulk apply's edits, or its rewritten contexts: ``own_text``
        False)."""
        # (New rows, not indexed yet, have no vector and no queue row: nothing to note.)
        old = self._old["observations"]
        held = [rowid for rowid in rowids if rowid not in self._fresh]
        if not own_text:  # (a row noted before: its old values are known, nothing else to do)
            held = [rowid for rowid in held if rowid not in old]
        if not held:
            return
        _, cols = _INDEXES["observations"]
        found: list[int] = []
        for part in vector_queue.chunks(held):
            rows = self.conn.execute(
                f"SELECT id, {', '.join(cols)} FROM observations"
                f" WHERE id IN ({', '.join('?' * len(part))})",
                part,
            )
            for row in rows:
                old.setdefault(row[0], tuple(row))
                found.append(row[0])
        if own_text:
            vector_queue.forget(self.conn, found)
            graph_rows.forget(self.conn, found)

    def flush(self) -> None:
        """Remove the noted old values (in rowid order), then index every changed and new row
        as it now is, a few hundred rows per statement (in rowid order too: one index segment
        for the batch; reading and adding each row with its own statements cost an import a
        tenth of its time)."""
        fresh, self._fresh = self._fresh, set()
        prompts, self._fresh_prompts = self._fresh_prompts, set()
        for table, old in self._old.items():
            for rowid in sorted(old):
                self.conn.execute(_REMOVE[table], old[rowid])
            _add_rows(
                self.conn,
                table,
                sorted(old.keys() | (fresh if table == "observations" else prompts)),
            )
            old.clear()
