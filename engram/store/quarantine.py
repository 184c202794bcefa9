"""The quarantines (docs/architecture.md, "Trust boundaries"), as one list people can see and act on.

*Inbound*: records received from elsewhere (a git chunk, a cloud pull) that may not be applied
yet or at all — ``clock_skew`` (more than the allowed drift ahead of this clock; applied by
itself once real time catches up), ``invalid`` (malformed, NUL text, a payload naming another
project …) and ``waiting_endpoint`` (a relation whose memory has not arrived: applied as soon
as it does). They are kept verbatim with their reason and the
target they came through, re-checked on every apply (:mod:`engram.store.replication`), and never
block the records around them.

*Outbound*: journal rows a cloud server rejected (``sync_quarantine``, written by the cloud
client through :meth:`engram.store.journal.Journal.quarantine`): kept out of that target's push
queue until released for a retry.

This module stores, lists, counts, releases and discards both; the CLI's ``engram sync
--quarantine`` and the status commands are thin shells over it.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from engram.store.db import Database
from engram.store.journal import deliver
from engram.times import now_text

CLOCK_SKEW = "clock_skew"
INVALID = "invalid"
WAITING_ENDPOINT = "waiting_endpoint"
#: Reasons that can resolve by themselves, so every apply re-checks them.
SELF_RESOLVING = (CLOCK_SKEW, WAITING_ENDPOINT)
#: An unreadable record is kept for people to look at, not to apply: its first bytes suffice.
MAX_KEPT_INVALID = 64 * 1024


@dataclass(frozen=True, slots=True)
class QuarantinedRecord:
    """One quarantined record, inbound or outbound, as `engram sync --quarantine` lists it."""

    direction: str  # inbound | outbound
    id: int  # inbound: its row id; outbound: the journal seq
    reason: str  # clock_skew | invalid | waiting_endpoint | the server's error code
    error: str
    project: str
    entity: str
    key: str
    origin: str  # who wrote it (the replica's origin)
    source: str  # inbound: the target it came through; outbound: the target that refused it
    mid: str
    hlc: str
    attempts: int
    since: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_text(item: dict[str, Any] | str | bytes) -> str:
    """The text a received item is kept as: the exact text when it is decodable text, else a
    JSON rendering that escapes what SQLite could not store (lone surrogates)."""
    import json

    import orjson

    if isinstance(item, bytes):
        item = item.decode("utf-8", errors="backslashreplace")
    if isinstance(item, str):
        return item.encode("utf-8", errors="backslashreplace").decode("utf-8")
    try:
        return orjson.dumps(item).decode()
    except TypeError:  # not encodable as UTF-8 (lone surrogates) or not JSON at all
        return json.dumps(item, ensure_ascii=True, default=repr)


def _field(record: Any, name: str) -> str:
    value = record.get(name) if isinstance(record, dict) else None
    if not isinstance(value, str):
        return ""
    return value.encode("utf-8", errors="backslashreplace").decode("utf-8")[:256]


def hold(
    conn: sqlite3.Connection,
    *,
    reason: str,
    error: str,
    source: str,
    text: str,
    record: Any = None,
) -> None:
    """Keep a received record aside (in the caller's transaction). The same record received
    again only counts another attempt."""
    if reason == INVALID and len(text) > MAX_KEPT_INVALID:
        text = text[:MAX_KEPT_INVALID]
    fingerprint = hashlib.sha256(text.encode("utf-8")).hexdigest()
    now = now_text()
    conn.execute(
        """INSERT INTO sync_inbound_quarantine(fingerprint, reason, error, source, mid, hlc,
               origin, entity, project, key, record, received_at, checked_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT(fingerprint) DO UPDATE SET attempts = attempts + 1,
               reason = excluded.reason, error = excluded.error,
               checked_at = excluded.checked_at""",
        (
            fingerprint,
            reason,
            error.encode("utf-8", errors="backslashreplace").decode("utf-8")[:2000],
            source,
            _field(record, "mid"),
            _field(record, "hlc"),
            _field(record, "origin"),
            _field(record, "entity"),
            _field(record, "project"),
            _field(record, "key"),
            text,
            now,
            now,
        ),
    )


def due(conn: sqlite3.Connection, bound_hlc: str) -> list[sqlite3.Row]:
    """The waiting records whose time has come (hlc at most ``bound_hlc``), oldest clock
    first, for the caller to check again in its transaction (:func:`release` those that
    applied; holding one again only counts an attempt)."""
    return conn.execute(
        """SELECT id, source, record FROM sync_inbound_quarantine
           WHERE reason = ? AND hlc <= ? ORDER BY hlc, id""",
        (CLOCK_SKEW, bound_hlc),
    ).fetchall()


_WAITING_READY = """
WITH w AS (
    SELECT id, source, record, project, hlc,
           json_extract(record, '$.payload.source_id') AS a,
           json_extract(record, '$.payload.target_id') AS b
    FROM sync_inbound_quarantine WHERE reason = ? AND json_valid(record))
SELECT id, source, record FROM w
WHERE (EXISTS (SELECT 1 FROM observations o WHERE o.project = w.project AND o.sync_id = w.a)
       OR EXISTS (SELECT 1 FROM sync_tombstones t WHERE t.entity = 'observation'
                  AND t.project = w.project AND t.key = w.a))
  AND (EXISTS (SELECT 1 FROM observations o WHERE o.project = w.project AND o.sync_id = w.b)
       OR EXISTS (SELECT 1 FROM sync_tombstones t WHERE t.entity = 'observation'
                  AND t.project = w.project AND t.key = w.b))
ORDER BY hlc, id"""


def endpoints_arrived(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """The relations waiting (``waiting_endpoint``) whose two memories are both here now, in
    their project, oldest clock first (a few index probes per waiting relation)."""
    return conn.execute(_WAITING_READY, (WAITING_ENDPOINT,)).fetchall()


def release(conn: sqlite3.Connection, record_id: int) -> None:
    """A quarantined record was applied (or found already known): forget it."""
    _delete(conn, [record_id])


def pick(conn: sqlite3.Connection, ids: Iterable[int] | None = None) -> list[sqlite3.Row]:
    """Inbound records (all, or those ``ids``) to be checked again."""
    if ids is None:
        rows = conn.execute(
            "SELECT id, source, record FROM sync_inbound_quarantine ORDER BY hlc, id"
        ).fetchall()
    else:
        wanted = sorted({int(i) for i in ids})
        rows = []
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows += conn.execute(
                f"""SELECT id, source, record FROM sync_inbound_quarantine
                    WHERE id IN ({", ".join("?" for _ in part)}) ORDER BY hlc, id""",
                part,
            ).fetchall()
    return rows


def _delete(conn: sqlite3.Connection, ids: list[int]) -> int:
    removed = 0
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        removed += conn.execute(
            f"DELETE FROM sync_inbound_quarantine WHERE id IN ({', '.join('?' for _ in part)})",
            part,
        ).rowcount
    return removed


def has_due(db: Database, bound_hlc: str) -> bool:
    """Whether any waiting record's time has come (one index probe)."""
    return (
        db.one(
            "SELECT 1 FROM sync_inbound_quarantine WHERE reason = ? AND hlc <= ? LIMIT 1",
            (CLOCK_SKEW, bound_hlc),
        )
        is not None
    )


# --- listing, counting, discarding (both directions) ---------------------------------------------


def _selection(direction: str, projects: Iterable[str] | None) -> tuple[str, list[Any]]:
    if projects is None:
        return "1", []
    names = sorted(set(projects))
    if not names:
        return "0", []
    column = "q.project" if direction == "inbound" else "j.project"
    return f"{column} IN ({', '.join('?' for _ in names)})", names


def listing(
    db: Database, *, projects: Iterable[str] | None = None, limit: int | None = None
) -> list[QuarantinedRecord]:
    """Every quarantined record (inbound first, then outbound), optionally of some projects."""
    names = None if projects is None else list(projects)
    where, params = _selection("inbound", names)
    tail = "" if limit is None else f" LIMIT {int(limit)}"
    found = [
        QuarantinedRecord(
            "inbound",
            r["id"],
            r["reason"],
            r["error"],
            r["project"],
            r["entity"],
            r["key"],
            r["origin"],
            r["source"],
            r["mid"],
            r["hlc"],
            r["attempts"],
            r["received_at"],
        )
        for r in db.rows(
            f"SELECT * FROM sync_inbound_quarantine q WHERE {where} ORDER BY q.id{tail}", params
        )
    ]
    where, params = _selection("outbound", names)
    found += [
        QuarantinedRecord(
            "outbound",
            r["seq"],
            r["error_code"],
            r["error"],
            r["project"] or "",
            r["entity"] or "",
            r["key"] or "",
            r["origin"] or "",
            r["target"],
            r["mid"],
            r["hlc"] or "",
            r["attempts"],
            r["quarantined_at"],
        )
        for r in db.rows(
            f"""SELECT q.*, j.project, j.entity, j.key, j.origin, j.hlc
                FROM sync_quarantine q LEFT JOIN sync_journal j ON j.seq = q.seq
                WHERE {where} ORDER BY q.target, q.seq{tail}""",
            params,
        )
    ]
    return found


def counts(db: Database, *, projects: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """``{"inbound": {reason: n}, "outbound": {error_code: n}}`` (empty dicts when clean)."""
    names = None if projects is None else list(projects)
    where, params = _selection("inbound", names)
    inbound = {
        r[0]: r[1]
        for r in db.rows(
            f"SELECT reason, COUNT(*) FROM sync_inbound_quarantine q WHERE {where}"
            " GROUP BY reason ORDER BY reason",
            params,
        )
    }
    where, params = _selection("outbound", names)
    outbound = {
        r[0]: r[1]
        for r in db.rows(
            f"""SELECT q.error_code, COUNT(*) FROM sync_quarantine q
                LEFT JOIN sync_journal j ON j.seq = q.seq
                WHERE {where} GROUP BY q.error_code ORDER BY q.error_code""",
            params,
        )
    }
    return {"inbound": inbound, "outbound": outbound}


def discard(
    db: Database,
    *,
    projects: Iterable[str] | None = None,
    inbound_ids: Iterable[int] | None = None,
    outbound_seqs: Iterable[int] | None = None,
) -> dict[str, int]:
    """Drop quarantined records: every one (of ``projects``), or only the given ids/seqs.

    Discarding an inbound record forgets it (a later copy is checked afresh); discarding an
    outbound one marks the rejecting target as holding it, so it is not pushed again."""
    names = None if projects is None else list(projects)
    picked = inbound_ids is not None or outbound_seqs is not None
    with db.write() as conn:
        if picked:
            ids = sorted({int(i) for i in inbound_ids or ()})
        else:
            where, params = _selection("inbound", names)
            ids = [
                r[0]
                for r in conn.execute(
                    f"SELECT id FROM sync_inbound_quarantine q WHERE {where}", params
                )
            ]
        inbound = _delete(conn, ids)
        if picked:
            wanted = {int(s) for s in outbound_seqs or ()}
            rows = [
                (r[0], r[1])
                for r in conn.execute("SELECT target, seq FROM sync_quarantine")
                if r[1] in wanted
            ]
        else:
            where, params = _selection("outbound", names)
            rows = [
                (r[0], r[1])
                for r in conn.execute(
                    f"""SELECT q.target, q.seq FROM sync_quarantine q
                        LEFT JOIN sync_journal j ON j.seq = q.seq WHERE {where}""",
                    params,
                )
            ]
        now = now_text()
        for target, seq in rows:
            conn.execute("DELETE FROM sync_quarantine WHERE target = ? AND seq = ?", (target, seq))
            deliver(conn, target, (seq,), now)
    return {"inbound": inbound, "outbound": len(rows)}


def release_outbound(
    db: Database,
    *,
    target: str | None = None,
    projects: Iterable[str] | None = None,
    seqs: Iterable[int] | None = None,
) -> int:
    """Put outbound-quarantined rows (of one target, some projects, or only ``seqs``) back in
    their targets' push queues, for a retry."""
    where, params = _selection("outbound", None if projects is None else list(projects))
    clauses, args = [where], list(params)
    if target is not None:
        clauses.append("q.target = ?")
        args.append(target)
    if seqs is not None:
        wanted = sorted({int(s) for s in seqs})
        clauses.append(f"q.seq IN ({', '.join('?' for _ in wanted)})" if wanted else "0")
        args.extend(wanted)
    with db.write() as conn:
        rows = conn.execute(
            f"""SELECT q.target, q.seq FROM sync_quarantine q
                LEFT JOIN sync_journal j ON j.seq = q.seq WHERE {" AND ".join(clauses)}""",
            args,
        ).fetchall()
        for row_target, seq in rows:
            conn.execute(
                "DELETE FROM sync_quarantine WHERE target = ? AND seq = ?", (row_target, seq)
            )
    return len(rows)
