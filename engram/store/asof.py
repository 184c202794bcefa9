"""Search "as of" a moment: what was true then (docs/importance.md).

Validity decides: a memory answers for moment T when T falls inside its validity window as it
is known *now* — from ``valid_from`` (else when it was saved) up to ``valid_to`` (validity is a
statement about the world, so a window set later still applies to earlier dates, and a memory
saved today "true since 2020" answers for 2024) — and it was not deleted by T. It says what it
said at T: a memory edited in place since T (a topic re-saved, an update) answers with its text
at T (:func:`state_at`, the one place that reads the past): the newest of the versions kept for
history (:mod:`engram.store.revisions`, which outlive a compacted journal) and the journaled
states written by T. A consolidation ends its sources' validity and starts the merged memory's at
the merge, so each moment has one answer. The snapshot is ranked with the same FTS5 tokenizer
and BM25 as live search, in a private in-memory index, then importance breaks ties.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import orjson

from engram.errors import ValidationError
from engram.record import full_state
from engram.store import revisions
from engram.store.journal import record_text
from engram.store.models import Observation
from engram.store.query import build_match
from engram.store.tiebreak import TIE_EXTRA, break_ties
from engram.times import parse_store_text, to_store_text

if TYPE_CHECKING:
    from engram.store.search import SearchMixin

TOPIC_RANK = -1000.0
_TEXT = ("title", "content", "tool_name", "type", "project", "topic_key")
#: The historical fields a result takes from its state at the moment asked about.
_HISTORICAL = ("type", "title", "content", "tool_name", "topic_key", "revision_count",
               "duplicate_count", "updated_at")  # fmt: skip


def parse_as_of(value: Any, field: str = "as_of") -> str:
    """A moment in the store's format: a date means the end of that day (everything known
    during it), a date and time (ISO 8601, UTC unless it says otherwise) that instant."""
    raw = str(value).strip()
    try:
        if len(raw) == 10:
            moment = parse_store_text(raw)
            return to_store_text(moment).replace("00:00:00", "23:59:59")
        return to_store_text(parse_store_text(raw))
    except ValueError:
        raise ValidationError(
            f"{field}: invalid date {raw!r} (use YYYY-MM-DD or an ISO 8601 date and time, "
            "e.g. 2026-09-01T14:30:00Z)",
            field=field,
        ) from None


def state_at(conn: sqlite3.Connection, project: str, key: str, when: str) -> dict[str, Any] | None:
    """The replicated state of memory ``(project, key)`` at ``when`` (``None`` when no known
    state is that old; ``{"deleted_at"}`` when it was deleted by then): the newest written by
    ``when`` of its kept revisions and the states its journal still holds (every state it
    replicated, until compacted; a revision is kept only when the text changed)."""
    journaled = _journaled_at(conn, project, key, when)
    kept = revisions.kept_at(conn, project, key, when)
    if kept is None or journaled is None:
        return kept if journaled is None else journaled
    journal_moment = journaled.get("updated_at") or journaled.get("deleted_at") or ""
    return kept if (kept.get("updated_at") or "") > journal_moment else journaled


def _journaled_at(
    conn: sqlite3.Connection, project: str, key: str, when: str
) -> dict[str, Any] | None:
    rows = conn.execute(
        """SELECT * FROM sync_journal WHERE entity = 'observation' AND project = ?
             AND key = ? ORDER BY hlc DESC""",
        (project, key),
    ).fetchall()
    for row in rows:
        text = record_text(conn, row)  # (elided records are rebuilt: engram/store/journal.py)
        if text is None:
            continue
        record = orjson.loads(text)
        state = full_state(record)
        if state is None:  # a delete that carries only the key
            at = record["payload"].get("deleted_at") or ""
            if at and at <= when:
                return {"deleted_at": at}
            continue
        if (state.get("updated_at") or "") <= when:
            return state
    return None


def search(
    store: SearchMixin,
    query: str,
    as_of: Any,
    *,
    mode: str,
    limit: int,
    type: str | None,
    project: str | None,
    scope: str | None,
    since: str | None,
    until: str | None,
) -> list[Observation]:
    """The best ``limit`` memories for ``query`` among those true at ``as_of``."""
    when = parse_as_of(as_of)
    match = build_match(query, mode)
    clauses, params = store._observation_filters(
        project, scope, type, since, until, include_deleted=True
    )
    clauses += [
        "COALESCE(o.valid_from, o.created_at) <= ?",
        "(o.valid_to IS NULL OR o.valid_to > ?)",
        "(o.deleted_at IS NULL OR o.deleted_at > ?)",
    ]
    params += [when] * 3
    snapshot: list[Observation] = []
    with store.db.read() as conn:
        for row in conn.execute(
            f"SELECT o.* FROM observations o WHERE {' AND '.join(clauses)} ORDER BY o.id",
            params,
        ).fetchall():
            memory = Observation.from_row(row)
            # Changed since T: take what it said then (saved after T: it has no earlier text).
            if memory.updated_at > when and memory.created_at <= when:
                state = state_at(conn, memory.project, memory.sync_id, when)
                if state is None or state.get("deleted_at"):
                    continue
                for name in _HISTORICAL:
                    setattr(memory, name, state[name])
            memory.deleted_at = None  # it was not deleted at that moment
            snapshot.append(memory)
    return _rank(snapshot, query, match, limit, tiebreak=store.config.importance_tiebreak)


def _rank(
    snapshot: list[Observation], query: str, match: str | None, limit: int, *, tiebreak: bool
) -> list[Observation]:
    results: list[Observation] = []
    raw = query.strip().lower()
    if "/" in raw:
        for memory in snapshot:
            if memory.topic_key == raw:
                memory.rank = TOPIC_RANK
                results.append(memory)
        results.sort(key=lambda m: m.updated_at, reverse=True)
        results = results[:limit]
    if match is None or len(results) >= limit or not snapshot:
        return results
    seen = {m.id for m in results}
    index = sqlite3.connect(":memory:")
    try:
        index.execute(
            f"CREATE VIRTUAL TABLE snap USING fts5({', '.join(_TEXT)}, tokenize='porter unicode61')"
        )
        index.executemany(
            f"INSERT INTO snap(rowid, {', '.join(_TEXT)}) VALUES (?{', ?' * len(_TEXT)})",
            [(i, *(getattr(m, c) for c in _TEXT)) for i, m in enumerate(snapshot)],
        )
        hits = index.execute(
            "SELECT rowid, bm25(snap) AS score FROM snap WHERE snap MATCH ?"
            " ORDER BY score, rowid LIMIT ?",
            (match, limit + len(seen) + TIE_EXTRA),
        ).fetchall()
    finally:
        index.close()
    ranked = []
    for rowid, score in hits:
        memory = snapshot[rowid]
        if memory.id not in seen:
            memory.rank = score
            ranked.append(memory)
    if tiebreak:
        ranked = break_ties(ranked)
    return results + ranked[: limit - len(results)]
