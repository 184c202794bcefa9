"""The write path's side of the vector index: every change to a memory's indexed text forgets
its vector and queues the memory, in the same transaction (called from :mod:`engram.store.fts`
and the soft-delete paths). A *new* memory waits above the queue's mark without a row
(:mod:`engram.store.queue_marks`) until the vectorizer takes it in (``QUEUE.take_new``) when
it starts. Kept apart from :mod:`engram.store.vectors` (the store API that fills the queue)
because the FTS module, which every write imports, must not import the store's mixins."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import TypeVar

from engram.store import queue_marks

TABLE = "observation_vectors"
PENDING = "vector_pending"
#: New memories wait for a vector above this queue's mark (every live one).
QUEUE = queue_marks.MarkedQueue("vectors", PENDING, "obs_id", "o.deleted_at IS NULL")

_T = TypeVar("_T")


def chunks(ids: Iterable[_T], size: int = 500) -> Iterator[list[_T]]:
    """``ids`` in lists of at most ``size``: few enough values for one ``IN (...)``."""
    wanted = list(ids)
    for start in range(0, len(wanted), size):
        yield wanted[start : start + size]


def queue(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
    """Queue these observations for (re-)embedding (a memory restored, or about to change)."""
    conn.executemany(f"INSERT OR IGNORE INTO {PENDING}(obs_id) VALUES (?)", [(i,) for i in ids])


def forget(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
    """Delete the vectors of these observations and queue them: their text is about to change
    or go. (The queue drops a memory that turns out deleted.)"""
    wanted = list(ids)
    for part in chunks(wanted):
        conn.execute(f"DELETE FROM {TABLE} WHERE obs_id IN ({', '.join('?' * len(part))})", part)
    queue(conn, wanted)


def forget_deleted(conn: sqlite3.Connection, column: str, value: object) -> None:
    """Delete the vector of the observation(s) where ``column = value``, being soft-deleted (a
    soft delete leaves the row, and its full-text entry, in place)."""
    if column not in ("id", "sync_id"):
        raise ValueError(f"cannot look observations up by {column!r}")
    conn.execute(
        f"DELETE FROM {TABLE} WHERE obs_id IN (SELECT id FROM observations WHERE {column} = ?)",
        (value,),
    )


def forget_all(conn: sqlite3.Connection) -> None:
    """Delete every vector and queue every live memory (the indexed rows were rewritten behind
    the store's back)."""
    conn.execute(f"DELETE FROM {TABLE}")
    conn.execute(
        f"INSERT OR IGNORE INTO {PENDING}(obs_id) SELECT id FROM observations"
        " WHERE deleted_at IS NULL"
    )
