"""How many links a memory has, for the importance formula's link signal.

Until memory relations exist (the memory-graph issue), the only links between memories are the
ones consolidation makes: a merged memory supersedes each memory merged into it (their
``superseded_by`` names it). Everything that counts links goes through :data:`LINKS_SQL`, so
pointing it at the relations table later changes one place.
"""

from __future__ import annotations

import sqlite3

#: The link count of the row aliased ``o`` (an SQL expression).
LINKS_SQL = (
    "(SELECT COUNT(*) FROM observations s"
    " WHERE s.project = o.project AND s.superseded_by = o.sync_id)"
)


def link_count(conn: sqlite3.Connection, project: str, key: str) -> int:
    """The links of the memory ``(project, key)``."""
    row = conn.execute(
        f"SELECT {LINKS_SQL} FROM observations o WHERE o.project = ? AND o.sync_id = ?",
        (project, key),
    ).fetchone()
    return 0 if row is None else int(row[0])
