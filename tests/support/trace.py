"""Capturing the statements a store runs (SQLite's trace callback), for tests that pin which
statements an operation issues: no copy of the store's SQL in the tests that could drift."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from engram.store import Store


@contextmanager
def traced(store: Store) -> Iterator[list[str]]:
    """The statements ``store`` runs inside the block (with their values bound)."""
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        store.db.conn.set_trace_callback(None)
