"""Delete for good on the team server: a hard delete leaves no text in the mutation log, the read
model or its full-text index (issue 14; tombstones and mids stay).

* **At push time** (:func:`blank_before`, called by :func:`engram_cloud.sync_log.push` in the
  push transaction): every earlier record of a hard-deleted key — upserts and soft deletes carry
  the full state — has its ``title``, ``content`` and ``summary`` replaced by ``[deleted]`` in
  ``cloud_mutations.record``. The record stays a valid record with the same mid, hlc and
  ``record_hash`` (so a client's retry of the original is still *accepted*, never a conflict),
  and the read model already dropped the row when it applied the delete.
* **``engram cloud purge``** (:func:`purge`): the same blanking for every hard delete in the log
  (records pushed before this version), the texts of those keys inside chunks stored by the
  older chunk routes, then ``VACUUM FULL`` of the tables that held them, so no dead tuple, TOAST
  chunk or GIN index entry keeps the old bytes in the database's files. ``VACUUM FULL`` locks
  each table while it rewrites it (pushes and pulls wait), so this is an admin command.

PostgreSQL's own write-ahead log and backups keep what they recorded until they are recycled;
git history and client machines are each purged by their own means.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, and_, select, text, update

from engram.record import is_hard_delete
from engram_cloud import models

BLANKED = "[deleted]"  # the same marker the local journal uses
TEXT_FIELDS = ("title", "content", "summary")
VACUUMED = (
    models.mutations,
    models.chunks,
    models.observations,
    models.prompts,
    models.sessions,
)

Key = tuple[str, str, str]  # (project, entity, key)


def _blanked(payload: dict[str, Any]) -> bool:
    """Blank a payload's texts in place; whether anything changed."""
    changed = False
    for name in TEXT_FIELDS:
        value = payload.get(name)
        if isinstance(value, str) and value and value != BLANKED:
            payload[name] = BLANKED
            changed = True
    return changed


def blank_before(conn: Connection, records: Iterable[dict[str, Any]]) -> int:
    """For each hard delete among ``records``, blank the texts of the key's earlier records in
    the log (in the caller's transaction); returns how many records changed."""
    m = models.mutations
    changed = 0
    for record in records:
        if not is_hard_delete(record):
            continue
        rows = conn.execute(
            select(m.c.seq, m.c.record).where(
                and_(
                    m.c.project == record["project"],
                    m.c.entity == record["entity"],
                    m.c.key == record["key"],
                    m.c.hlc < record["hlc"],
                )
            )
        ).all()
        for seq, raw in rows:
            older = orjson.loads(raw)
            payload = older.get("payload")
            if isinstance(payload, dict) and _blanked(payload):
                conn.execute(
                    update(m).where(m.c.seq == seq).values(record=orjson.dumps(older).decode())
                )
                changed += 1
    return changed


def _hard_deletes(conn: Connection, project: str | None) -> list[dict[str, Any]]:
    """The newest hard delete of every key in the log (of one project, or all)."""
    m = models.mutations
    query = select(m.c.record).where(m.c.op == "delete").order_by(m.c.seq)
    if project is not None:
        query = query.where(m.c.project == project)
    newest: dict[Key, dict[str, Any]] = {}
    for (raw,) in conn.execute(query):
        record = orjson.loads(raw)
        if is_hard_delete(record):
            key = (record["project"], record["entity"], record["key"])
            if key not in newest or record["hlc"] > newest[key]["hlc"]:
                newest[key] = record
    return list(newest.values())


def _blank_chunks(conn: Connection, deleted: Sequence[dict[str, Any]]) -> int:
    """Blank hard-deleted memories, prompts and session summaries inside stored chunks."""
    by_project: dict[str, dict[str, set[str]]] = {}
    for record in deleted:
        by_project.setdefault(record["project"], {}).setdefault(record["entity"], set()).add(
            record["key"]
        )
    c = models.chunks
    sections = {"session": ("sessions", "id"), "observation": ("observations", "sync_id"),
                "prompt": ("prompts", "sync_id")}  # fmt: skip
    changed = 0
    for project, keys in by_project.items():
        for chunk_id, payload in conn.execute(
            select(c.c.id, c.c.payload).where(c.c.project == project)
        ):
            document = orjson.loads(payload)
            touched = False
            for entity, (section, key_name) in sections.items():
                for item in document.get(section) or []:
                    if isinstance(item, dict) and item.get(key_name) in keys.get(entity, ()):
                        touched = _blanked(item) or touched
            for item in document.get("mutations") or []:
                if not isinstance(item, dict):
                    continue
                item_entity = item.get("entity")
                item_key = item.get("key") or item.get("entity_key")
                if not isinstance(item_entity, str) or item_key not in keys.get(item_entity, ()):
                    continue
                inner = item.get("payload")
                if isinstance(inner, dict):
                    touched = _blanked(inner) or touched
                elif isinstance(inner, str):  # the Go tool's chunks carry the payload as text
                    try:
                        parsed = orjson.loads(inner)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(parsed, dict) and _blanked(parsed):
                        item["payload"] = orjson.dumps(parsed).decode()
                        touched = True
            if touched:
                conn.execute(
                    update(c)
                    .where(c.c.id == chunk_id)
                    .values(payload=orjson.dumps(document).decode())
                )
                changed += 1
    return changed


@dataclass(slots=True)
class PurgeReport:
    hard_deletes: int = 0
    records_blanked: int = 0
    chunks_blanked: int = 0
    tables_vacuumed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "hard_deletes": self.hard_deletes,
            "records_blanked": self.records_blanked,
            "chunks_blanked": self.chunks_blanked,
            "tables_vacuumed": self.tables_vacuumed,
            "seconds": round(self.seconds, 3),
        }


def purge(
    engine: Engine,
    project: str | None = None,
    *,
    vacuum: bool = True,
    progress: Callable[[str], None] | None = None,
) -> PurgeReport:
    """Blank every hard-deleted key's earlier texts (log and chunks), then ``VACUUM FULL`` the
    tables, so their files hold no byte of it. Pushes wait while the log is rewritten."""
    from engram_cloud.sync_log import PUSH_LOCK

    say = progress or (lambda message: None)
    started = time.perf_counter()
    report = PurgeReport()
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PUSH_LOCK})
        say("finding hard deletes in the mutation log")
        deleted = _hard_deletes(conn, project)
        report.hard_deletes = len(deleted)
        say(f"blanking the earlier records of {len(deleted)} hard-deleted keys")
        report.records_blanked = blank_before(conn, deleted)
        report.chunks_blanked = _blank_chunks(conn, deleted)
    if vacuum:
        # VACUUM cannot run in a transaction block: autocommit, one table at a time.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in VACUUMED:
                say(f"rewriting {table.name} (VACUUM FULL)")
                conn.execute(text(f"VACUUM (FULL, ANALYZE) {table.name}"))
                report.tables_vacuumed.append(table.name)
    report.seconds = time.perf_counter() - started
    return report
