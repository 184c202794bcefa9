"""The read model: the winning state of every session, observation, prompt and relation per
project,
applied from accepted mutations in the same transaction as the log insert, and rebuildable from
the log (records the log holds back — ``held``, see :mod:`engram_cloud.clocks` — are skipped).

The rules are the local store's (docs/architecture.md, "Identity, the journal and replication"), per ``(project, entity, key)``:
the greatest ``hlc`` wins (string order; ties go to the existing state), records are
applied in log order; payloads are written
verbatim through :func:`engram.record.full_state`; a hard delete removes the row and
leaves a tombstone that older upserts cannot beat; a newer upsert revives; a soft delete that
carries the full state is an upsert with ``deleted_at``; one that carries only keys marks the
existing row. Observations and prompts may arrive before their session: a stub session (empty
directory, clock ``''``) holds its place until the real one arrives.

Callers must hold the push lock (:data:`engram_cloud.sync_log.PUSH_LOCK`), which serializes
every writer, so reading the current clocks and then writing is race-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, and_, delete, func, select, text, update

from engram.record import (
    EPOCH_TEXT,
    KEY_FIELD,
    STATE_FIELDS,
    full_state,
    hlc_text,
    is_hard_delete,
)
from engram_cloud import bulk, models

ROW, TOMB, MARK = "row", "tomb", "mark"  # final states: write a row, a tombstone, mark deleted
# The replicated fields the read-model tables hold besides their key and project (for
# observations, the intent fields too: pin, importance override, validity…).
_FIELDS = {
    entity: tuple(f for f in STATE_FIELDS[entity] if f not in (KEY_FIELD[entity], "project"))
    for entity in STATE_FIELDS
}


@dataclass(slots=True)
class _State:
    kind: str  # row | tomb | mark (mark = soft-delete an existing database row)
    hlc: str
    contributor: str = ""
    values: dict[str, Any] | None = None  # row values (kind row)
    deleted_at: str | None = None  # kind tomb / mark
    from_db: bool = False  # the state was read from the database, not produced by this batch


@dataclass(slots=True)
class ApplyStats:
    applied: int = 0
    stale: int = 0
    by_entity: dict[str, int] = field(default_factory=dict)

    def add(self, other: ApplyStats) -> None:
        self.applied += other.applied
        self.stale += other.stale
        for name, count in other.by_entity.items():
            self.by_entity[name] = self.by_entity.get(name, 0) + count


Key = tuple[str, str, str]  # (project, entity, key)


def _current(conn: Connection, keys: set[Key]) -> dict[Key, _State]:
    """The clock and kind of what the database holds for each key."""
    found: dict[Key, _State] = {}
    for entity, table in models.ENTITY_TABLES.items():
        key_name = models.ENTITY_KEY[entity]
        pairs = sorted((p, k) for p, e, k in keys if e == entity)
        if not pairs:
            continue
        match = ("project", key_name)
        for project, key, hlc in bulk.select_matching(conn, table, match, pairs, (*match, "hlc")):
            found[(project, entity, key)] = _State(ROW, hlc, from_db=True)
    names = ("project", "entity", "key")
    for project, entity, key, hlc in bulk.select_matching(
        conn, models.tombstones, names, sorted(keys), (*names, "hlc")
    ):
        found[(project, entity, key)] = _State(TOMB, hlc, from_db=True)
    return found


def _next_state(record: dict[str, Any], current: _State | None, contributor: str) -> _State:
    """The state after applying ``record`` (which beats ``current``) on top of it."""
    hlc, payload = record["hlc"], record["payload"]
    if is_hard_delete(record):
        return _State(TOMB, hlc, contributor, deleted_at=payload.get("deleted_at") or hlc_text(hlc))
    state = full_state(record)
    if state is not None:
        values = {name: state[name] for name in _FIELDS[record["entity"]]}
        if record["entity"] == "relation":
            values["scope"] = record["scope"]  # a relation's scope is its record's
        return _State(ROW, hlc, contributor, values=values)
    # A soft delete that carries only keys marks the row it deletes, or leaves a tombstone.
    deleted_at = payload.get("deleted_at") or hlc_text(hlc)
    if current is not None and current.kind == ROW and current.values is not None:
        values = {**current.values, "deleted_at": deleted_at, "updated_at": deleted_at}
        return _State(ROW, hlc, contributor, values=values)
    if current is not None and current.kind in (ROW, MARK):
        return _State(MARK, hlc, contributor, deleted_at=deleted_at)
    return _State(TOMB, hlc, contributor, deleted_at=deleted_at)


def apply(conn: Connection, items: Sequence[tuple[dict[str, Any], str]]) -> ApplyStats:
    """Apply validated records (each with its contributor) to the read model."""
    stats = ApplyStats()
    if not items:
        return stats
    keys = {(r["project"], r["entity"], r["key"]) for r, _ in items}
    states = _current(conn, keys)
    before = {k: s.kind for k, s in states.items()}
    # In log order, each record either loses to what is there or becomes the new state: the
    # same as applying them one by one, so a rebuild in any batch size gives the same tables.
    stubs: set[tuple[str, str]] = set()
    for record, contributor in items:
        key = (record["project"], record["entity"], record["key"])
        current = states.get(key)
        if current is not None and record["hlc"] <= current.hlc:
            stats.stale += 1
            continue
        state = _next_state(record, current, contributor)
        states[key] = state
        if record["entity"] in ("observation", "prompt") and state.kind == ROW and state.values:
            stubs.add((record["project"], state.values["session_id"]))
        stats.applied += 1
        stats.by_entity[record["entity"]] = stats.by_entity.get(record["entity"], 0) + 1
    changed = {k: s for k, s in states.items() if not s.from_db}
    _write(conn, changed, before)
    _stub_sessions(conn, stubs)
    return stats


def _write(conn: Connection, changed: dict[Key, _State], before: dict[Key, str]) -> None:
    tomb_keys = ("project", "entity", "key")
    revived = [k for k, s in changed.items() if s.kind != TOMB and before.get(k) == TOMB]
    bulk.delete_matching(conn, models.tombstones, tomb_keys, revived)
    for entity in ("session", "observation", "prompt", "relation"):
        table = models.ENTITY_TABLES[entity]
        key_name = models.ENTITY_KEY[entity]
        rows = [
            {"project": p, key_name: k, **s.values, "hlc": s.hlc, "contributor": s.contributor}
            for (p, e, k), s in changed.items()
            if e == entity and s.kind == ROW and s.values is not None
        ]
        bulk.insert(conn, table, rows, conflict=("project", key_name), touch="applied_at")
        gone = [(p, k) for (p, e, k), s in changed.items() if e == entity and s.kind == TOMB]
        bulk.delete_matching(conn, table, ("project", key_name), gone)
        for (p, e, k), s in changed.items():
            if e == entity and s.kind == MARK:
                conn.execute(
                    update(table)
                    .where(and_(table.c.project == p, table.c[key_name] == k))
                    .values(
                        deleted_at=s.deleted_at,
                        updated_at=s.deleted_at,
                        hlc=s.hlc,
                        contributor=s.contributor,
                        applied_at=func.now(),
                    )
                )
    tombs = [
        {"project": p, "entity": e, "key": k, "hlc": s.hlc, "deleted_at": s.deleted_at}
        for (p, e, k), s in changed.items()
        if s.kind == TOMB
    ]
    bulk.insert(conn, models.tombstones, tombs, conflict=tomb_keys)


def _stub_sessions(conn: Connection, sessions: set[tuple[str, str]]) -> None:
    """Placeholder sessions for applied observations and prompts whose session is not here
    (and was not deleted)."""
    if not sessions:
        return
    wanted = sorted(sessions)
    conn.execute(
        text(
            """INSERT INTO cloud_sessions (project, id, directory, started_at, hlc)
               SELECT w.project, w.id, '', :epoch, ''
               FROM unnest(CAST(:projects AS text[]), CAST(:ids AS text[])) AS w(project, id)
               WHERE NOT EXISTS (
                   SELECT 1 FROM cloud_tombstones t
                   WHERE t.project = w.project AND t.entity = 'session' AND t.key = w.id)
               ORDER BY w.project, w.id
               ON CONFLICT (project, id) DO NOTHING"""
        ),
        {"epoch": EPOCH_TEXT, "projects": [p for p, _ in wanted], "ids": [i for _, i in wanted]},
    )


# --- rebuild -----------------------------------------------------------------------------------


def clear(conn: Connection, project: str | None = None) -> None:
    """Empty the read model (of one project, or entirely)."""
    for table in models.READ_MODEL_TABLES:
        stmt = delete(table)
        if project is not None:
            stmt = stmt.where(table.c.project == project)
        conn.execute(stmt)


def rebuild(
    conn: Connection,
    project: str | None = None,
    *,
    batch: int = 2000,
    progress: Callable[[str], None] | None = None,
) -> ApplyStats:
    """Recompute the read model from the mutation log (in the caller's transaction, which must
    hold the push lock so nothing is pushed meanwhile); ``progress`` hears every ~20 000."""
    clear(conn, project)
    m = models.mutations
    stats = ApplyStats()
    last = done = 0
    while True:
        query = select(m.c.seq, m.c.record, m.c.created_by).where(
            m.c.seq > last, m.c.held.is_(None)
        )
        if project is not None:
            query = query.where(m.c.project == project)
        rows = conn.execute(query.order_by(m.c.seq).limit(batch)).all()
        if not rows:
            return stats
        stats.add(apply(conn, [(orjson.loads(r.record), r.created_by) for r in rows]))
        done += len(rows)
        if progress is not None and done // 20_000 != (done - len(rows)) // 20_000:
            progress(f"  {done} mutations replayed…")
        last = rows[-1].seq
