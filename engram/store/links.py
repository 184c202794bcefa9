"""How many links a memory has, for the importance formula's link signal.

A link is a relation of the memory graph (engram/store/relations.py, docs/graph.md) that is
active: judged or pending, not replaced by another relation, and not orphaned — the other
memory exists and is live, except that a ``supersedes`` relation keeps counting for both ends
once its target was archived (consolidation merges memories that way: the successor carries
what it replaced, :func:`engram.record.orphans`). Both ends of a relation count it, as
:meth:`engram.store.store.Store.relation_count` does, and a shared relation never counts a
personal memory (it is not shown to others either).

Everything that counts links goes through :data:`LINKS_SQL`. A memory's count changes when a
relation naming it is written or removed, and when the memory at its other end is deleted,
archived, restored or removed: :func:`linked_ids` finds the memories to re-score then.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

_ACTIVE = "r.judgment_status IN ('pending', 'judged') AND r.superseded_at IS NULL"
_SHOWN = "(r.scope = 'personal' OR (o.scope != 'personal' AND x.scope != 'personal'))"

#: The link count of the row aliased ``o`` (an SQL expression): its relations as the source
#: (the other end is the target: archived still counts for ``supersedes``), plus its relations
#: as the target (the other end is the source, which must be live). Two indexed lookups.
LINKS_SQL = (
    "((SELECT COUNT(*) FROM memory_relations r JOIN observations x"
    " ON x.project = r.project AND x.sync_id = r.target_id"
    f" WHERE r.project = o.project AND r.source_id = o.sync_id AND {_ACTIVE} AND {_SHOWN}"
    " AND (x.deleted_at IS NULL OR (r.relation = 'supersedes' AND x.delete_reason = 'archived')))"
    " + (SELECT COUNT(*) FROM memory_relations r JOIN observations x"
    " ON x.project = r.project AND x.sync_id = r.source_id"
    f" WHERE r.project = o.project AND r.target_id = o.sync_id AND {_ACTIVE} AND {_SHOWN}"
    " AND x.deleted_at IS NULL))"
)
_CHUNK = 400


def link_count(conn: sqlite3.Connection, project: str, key: str) -> int:
    """The links of the memory ``(project, key)``."""
    row = conn.execute(
        f"SELECT {LINKS_SQL} FROM observations o WHERE o.project = ? AND o.sync_id = ?",
        (project, key),
    ).fetchone()
    return 0 if row is None else int(row[0])


def ids_of(conn: sqlite3.Connection, project: str, keys: Iterable[str]) -> set[int]:
    """The local ids of the memories ``keys`` of ``project`` (those that are here)."""
    wanted = sorted(set(keys))
    found: set[int] = set()
    for start in range(0, len(wanted), _CHUNK):
        part = wanted[start : start + _CHUNK]
        marks = ", ".join("?" for _ in part)
        found.update(
            r[0]
            for r in conn.execute(
                f"SELECT id FROM observations WHERE project = ? AND sync_id IN ({marks})",
                [project, *part],
            )
        )
    return found


def linked_ids(conn: sqlite3.Connection, ids: Iterable[int]) -> set[int]:
    """The memories that share a relation with the memories ``ids`` (whatever its state: a
    change of these memories may make it count or stop counting)."""
    wanted = sorted(set(ids))
    found: set[int] = set()
    for start in range(0, len(wanted), _CHUNK):
        part = wanted[start : start + _CHUNK]
        marks = ", ".join("?" for _ in part)
        found.update(
            r[0]
            for r in conn.execute(
                f"""SELECT x.id FROM observations m
                      JOIN memory_relations r ON r.project = m.project AND r.source_id = m.sync_id
                      JOIN observations x ON x.project = r.project AND x.sync_id = r.target_id
                    WHERE m.id IN ({marks})
                    UNION
                    SELECT x.id FROM observations m
                      JOIN memory_relations r ON r.project = m.project AND r.target_id = m.sync_id
                      JOIN observations x ON x.project = r.project AND x.sync_id = r.source_id
                    WHERE m.id IN ({marks})""",
                [*part, *part],
            )
        )
    return found
