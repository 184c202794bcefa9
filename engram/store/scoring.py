"""Keeping each memory's computed importance up to date.

The score (``observations.importance``) is local, derived data: every replica computes it from
the memory's replicated fields plus its local access count (docs/importance.md). It is written
whenever a memory is saved, changed or applied from elsewhere, and re-scored by consolidation
(recency decays). One implementation, :func:`engram.importance.compute`, is registered as the
SQL function ``engram_importance`` so single writes and batch re-scoring always agree.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from engram import importance
from engram.store import links
from engram.store.links import LINKS_SQL
from engram.times import now_text

#: The computed importance of the row aliased ``o``, at the instant given as the parameter.
SCORE_SQL = (
    f"engram_importance(o.content, o.topic_key, o.type, {LINKS_SQL},"
    " MAX(o.updated_at, COALESCE(o.reviewed_at, '')), o.access_count, ?)"
)
_CHUNK = 500  # ids per statement (well under SQLite's variable limit)


def register(conn: sqlite3.Connection) -> None:
    """Make ``engram_importance`` available on ``conn`` (once: SQLite refuses to replace a
    function while a statement of that connection is still active)."""
    try:
        conn.execute("SELECT engram_importance('', NULL, NULL, 0, NULL, 0, '1970-01-01 00:00:00')")
    except sqlite3.OperationalError:
        conn.create_function("engram_importance", 7, importance.sql_function())


def new_memory_score(values: Mapping[str, Any]) -> float:
    """The computed importance of a memory about to be inserted under a fresh random key with
    ``values`` (its ``content``, ``topic_key``, ``type`` and ``now``): what :func:`rescore_ids`
    would write right after the insert (changed now, never read, and no links: nothing can name
    a key minted this instant), without the extra statement."""
    return unlinked_score(values["content"], values["topic_key"], values["type"], values["now"],
                          values["now"])  # fmt: skip


def unlinked_score(
    content: str, topic_key: str | None, type: str | None, changed_at: str, now: str
) -> float:
    """What :data:`SCORE_SQL` gives a memory no relation names and nobody read yet, computed
    before its row is written (one UPDATE less per row): ``changed_at`` is the later of its
    ``updated_at`` and ``reviewed_at``, ``now`` the scoring instant (store format)."""
    return importance.compute(content, topic_key, type, 0, changed_at, 0, _moment(now))


def unlinked_scorer(now: str) -> Callable[[str, str | None, str | None, str], float]:
    """:func:`unlinked_score` at the one instant ``now`` (a bulk apply's), as a function of
    ``(content, topic_key, type, changed_at)``: the same scores, for less per memory."""
    return importance.unlinked_scorer(_moment(now))


@functools.lru_cache(maxsize=4)
def _moment(now: str) -> datetime:
    """The scoring instant ``now`` as a datetime (a bulk apply scores every row at one)."""
    return datetime.fromisoformat(now).replace(tzinfo=UTC)


def rescore_ids(conn: sqlite3.Connection, ids: Iterable[int], now: str | None = None) -> int:
    """Score the memories with these local ids; returns how many rows were scored."""
    moment = now or now_text()
    wanted = sorted(set(ids))
    done = 0
    for start in range(0, len(wanted), _CHUNK):
        part = wanted[start : start + _CHUNK]
        marks = ", ".join("?" for _ in part)
        done += conn.execute(
            f"UPDATE observations AS o SET importance = {SCORE_SQL} WHERE o.id IN ({marks})",
            [moment, *part],
        ).rowcount
    return done


def rescore_where(
    conn: sqlite3.Connection, where: str, params: Iterable[object] = (), now: str | None = None
) -> int:
    """Score every memory matching ``where`` (a condition on the alias ``o``)."""
    moment = now or now_text()
    return conn.execute(
        f"UPDATE observations AS o SET importance = {SCORE_SQL} WHERE {where}",
        [moment, *params],
    ).rowcount


def rescore_linked(conn: sqlite3.Connection, ids: Iterable[int], now: str | None = None) -> int:
    """Score the memories that share a relation with the memories with these ids (a change of
    these memories — deleted, archived, restored, removed — may change their link count)."""
    return rescore_ids(conn, links.linked_ids(conn, ids), now)


def rescore_keys(
    conn: sqlite3.Connection, project: str, keys: Iterable[str], now: str | None = None
) -> int:
    """Score the memories ``keys`` of ``project`` (the ends of a relation that changed)."""
    return rescore_ids(conn, links.ids_of(conn, project, keys), now)
