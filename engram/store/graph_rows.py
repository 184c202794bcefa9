"""The write path's side of the entity graph: a memory whose text changes or that is deleted
leaves the graph, in the same transaction (called from :mod:`engram.store.fts` and the
soft-delete paths). Kept apart from :mod:`engram.store.graph` (the store API that builds and
queries the graph) because the FTS module, which every write imports, must not import the
store's mixins."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from engram.store import vector_queue


def forget(conn: sqlite3.Connection, observation_ids: Iterable[int]) -> None:
    """Take memories out of the graph before their row changes or goes (every write path calls
    this through :mod:`engram.store.fts`); entities nobody mentions any more go too."""
    ingested: list[int] = []
    for part in vector_queue.chunks(observation_ids):  # which of them are in the graph
        ingested += [
            r[0]
            for r in conn.execute(
                "SELECT observation_id FROM graph_ingested WHERE observation_id IN"
                f" ({', '.join('?' * len(part))})",
                part,
            )
        ]
    for oid in ingested:
        entities = [
            r[0]
            for r in conn.execute(
                "SELECT entity FROM graph_mentions WHERE observation_id = ?", (oid,)
            )
        ]
        conn.execute("DELETE FROM graph_triples WHERE observation_id = ?", (oid,))
        conn.execute("DELETE FROM graph_mentions WHERE observation_id = ?", (oid,))
        conn.execute("DELETE FROM graph_ingested WHERE observation_id = ?", (oid,))
        for entity in entities:
            conn.execute(
                """DELETE FROM graph_entities WHERE id = ?
                   AND NOT EXISTS (SELECT 1 FROM graph_mentions WHERE entity = ?)""",
                (entity, entity),
            )
