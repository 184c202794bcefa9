"""The replication journal: the hybrid logical clock, appending mutations inside the write's
own transaction, and the per-target delivery bookkeeping that sync transports use.

Every local write appends its mutation here in the same transaction as the write (invariant 1).
Transports ask for what a target does not hold yet (:meth:`Journal.pending`) and mark rows
delivered only once the target durably has them (invariant 4).

Size: over 500 lines on purpose: the clock, appending, delivery and the outbound quarantine
share the invariants above, which are easier to check read together in one class.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from engram.platform import machine_id
from engram.record import (
    DEFAULT_MAX_CLOCK_DRIFT_MS,
    MAX_WALL_MS,
    build_record,
    check_clock,
    format_hlc,
    new_mid,
    new_origin,
    parse_hlc,
)
from engram.store.db import Database
from engram.times import now_text

MAX_COUNTER = 99_999
#: What a deleted memory's text becomes in older journal entries (still a valid record).
BLANKED = "[deleted]"


def machine_fingerprint(db_path: Path) -> str:
    """What identifies this copy of the database on this machine.

    A copy or restore gets a new inode, a move a new path, another machine another id: any of
    them mints a new origin so two copies never write under the same one.
    """
    machine = machine_id()
    try:
        stat = os.stat(db_path)
        inode = f"{stat.st_dev}:{stat.st_ino}"
    except OSError:
        inode = ""
    raw = f"{socket.gethostname()}\0{machine}\0{db_path.resolve()}\0{inode}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journal row as sync transports see it."""

    seq: int
    mid: str
    hlc: str
    entity: str
    key: str
    op: str
    project: str
    scope: str
    record: str  # the exact JSON text of the mutation record
    source: str

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = orjson.loads(self.record)
        return record

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JournalEntry:
        return cls(
            row["seq"],
            row["mid"],
            row["hlc"],
            row["entity"],
            row["key"],
            row["op"],
            row["project"],
            row["scope"],
            row["record"],
            row["source"],
        )


def insert_record(
    conn: sqlite3.Connection,
    record: dict[str, Any],
    *,
    source: str,
    text: str | None = None,
    record_delivery: bool = True,
    recorded_at: str | None = None,
) -> int:
    """Insert one journal row (the one statement every journaling path uses, migrations
    included); a record that arrived through a target is marked as held by it."""
    cursor = conn.execute(
        """INSERT INTO sync_journal(mid, hlc, origin, entity, key, op, project, scope,
                                    record, source, recorded_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            record["mid"],
            record["hlc"],
            record["origin"],
            record["entity"],
            record["key"],
            record["op"],
            record["project"],
            record["scope"],
            text if text is not None else orjson.dumps(record).decode(),
            source,
            recorded_at or now_text(),
        ),
    )
    seq = int(cursor.lastrowid or 0)
    if source != "local" and record_delivery:
        # Arrived through a target: that target already holds it, never send it back.
        conn.execute(
            "INSERT OR IGNORE INTO sync_delivery(target, seq, delivered_at) VALUES (?, ?, ?)",
            (source, seq, now_text()),
        )
    return seq


def now_ms() -> int:
    """This machine's wall clock in milliseconds (the one place the store reads it)."""
    return time.time_ns() // 1_000_000


#: The journal rows ``j`` a target (bound twice, as ``?``) neither holds nor rejected: what
#: :meth:`Journal.pending` and :meth:`Journal.count_pending` select.
NOT_YET_DELIVERED = """NOT EXISTS (SELECT 1 FROM sync_delivery d WHERE d.target = ? AND d.seq = j.seq)
    AND NOT EXISTS (SELECT 1 FROM sync_quarantine q WHERE q.target = ? AND q.seq = j.seq)"""

class Journal:
    """Clock and journal of one store (one database file)."""

    def __init__(self, db: Database, max_drift_ms: int = DEFAULT_MAX_CLOCK_DRIFT_MS) -> None:
        self.db = db
        #: How far ahead of real time a clock value may be (docs/architecture.md, "Trust boundaries").
        self.max_drift_ms = max_drift_ms

    # --- identity and clock -----------------------------------------------------------------

    def ensure_identity(self, conn: sqlite3.Connection) -> str:
        """Create the clock row, or mint a new origin if this database file was copied."""
        fingerprint = machine_fingerprint(self.db.path)
        row = conn.execute("SELECT origin, machine_fingerprint FROM sync_clock").fetchone()
        if row is None:
            origin = new_origin()
            conn.execute(
                "INSERT INTO sync_clock(id, origin, machine_fingerprint) VALUES (1, ?, ?)",
                (origin, fingerprint),
            )
            return origin
        if row["machine_fingerprint"] != fingerprint:
            origin = new_origin()
            conn.execute(
                "UPDATE sync_clock SET origin = ?, machine_fingerprint = ? WHERE id = 1",
                (origin, fingerprint),
            )
            return origin
        return str(row["origin"])

    def identity_matches(self) -> bool:
        row = self.db.one("SELECT machine_fingerprint FROM sync_clock")
        return row is not None and row[0] == machine_fingerprint(self.db.path)

    @property
    def origin(self) -> str:
        return str(self.db.scalar("SELECT origin FROM sync_clock WHERE id = 1"))

    def tick(self, conn: sqlite3.Connection) -> tuple[str, str]:
        """The next hlc of this replica (inside the caller's write transaction) and its origin.

        Always a valid hlc: a persisted clock beyond now + drift (poisoned by a version without
        the clock bound; the store repairs its rows on the next open) restarts from now, so the
        13 digits never roll over."""
        wall, counter, origin = conn.execute(
            "SELECT wall_ms, counter, origin FROM sync_clock WHERE id = 1"
        ).fetchone()
        now = now_ms()
        if wall > now + self.max_drift_ms or wall > MAX_WALL_MS:
            wall, counter = now, -1
        if now > wall:
            wall, counter = now, 0
        else:
            counter += 1
            if counter > MAX_COUNTER:
                wall, counter = wall + 1, 0
        if wall > MAX_WALL_MS:  # only reachable with the drift bound switched off
            wall, counter = now, 0
        conn.execute("UPDATE sync_clock SET wall_ms = ?, counter = ? WHERE id = 1", (wall, counter))
        return format_hlc(wall, counter, origin), origin

    def clock_wall_ms(self) -> int:
        """The persisted clock's wall time (for the poisoned-clock check on open)."""
        return int(self.db.scalar("SELECT wall_ms FROM sync_clock WHERE id = 1") or 0)

    def observe(self, conn: sqlite3.Connection, hlc: str) -> None:
        """Advance the clock past an hlc applied from elsewhere, never beyond now + drift."""
        if check_clock(hlc, now_ms(), self.max_drift_ms) is not None:
            return
        remote_wall, remote_counter, _ = parse_hlc(hlc)
        conn.execute(
            """UPDATE sync_clock SET
                 counter = CASE WHEN ?1 > wall_ms THEN ?2
                                WHEN ?1 = wall_ms AND ?2 > counter THEN ?2 ELSE counter END,
                 wall_ms = MAX(wall_ms, ?1)
               WHERE id = 1""",
            (remote_wall, remote_counter),
        )

    # --- appending --------------------------------------------------------------------------

    def append(
        self,
        conn: sqlite3.Connection,
        *,
        hlc: str,
        origin: str,
        entity: str,
        key: str,
        op: str,
        project: str,
        scope: str,
        payload: dict[str, Any],
    ) -> int:
        """Journal a local write (in the write's transaction); returns the journal seq."""
        record = build_record(
            mid=new_mid(),
            hlc=hlc,
            origin=origin,
            entity=entity,
            key=key,
            op=op,
            project=project,
            scope=scope,
            payload=payload,
        )
        return self.append_record(conn, record, source="local")

    def append_record(
        self,
        conn: sqlite3.Connection,
        record: dict[str, Any],
        *,
        source: str,
        text: str | None = None,
        record_delivery: bool = True,
        recorded_at: str | None = None,
    ) -> int:
        """Journal a record; ``text`` keeps the exact bytes received from elsewhere.

        ``recorded_at`` lets a batch stamp all its rows with one time (formatting the clock
        per row is measurable in bulk applies)."""
        return insert_record(
            conn,
            record,
            source=source,
            text=text,
            record_delivery=record_delivery,
            recorded_at=recorded_at,
        )

    def has_mid(self, conn: sqlite3.Connection, mid: str) -> bool:
        return (
            conn.execute("SELECT 1 FROM sync_journal WHERE mid = ?", (mid,)).fetchone() is not None
        )

    # --- what targets hold ------------------------------------------------------------------

    @staticmethod
    def _selection(projects: Iterable[str] | None, include_personal: bool) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if projects is not None:
            names = sorted(set(projects))
            clauses.append(f"j.project IN ({', '.join('?' for _ in names)})" if names else "0")
            params.extend(names)
        if not include_personal:
            clauses.append("j.scope != 'personal'")
        return (" AND ".join(clauses) or "1"), params

    def pending(
        self,
        target: str,
        *,
        projects: Iterable[str] | None = None,
        include_personal: bool = False,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> list[JournalEntry]:
        """Journal rows of the selection that ``target`` does not hold yet, oldest first.

        ``projects=None`` selects every project; personal-scope rows only when asked.
        """
        where, params = self._selection(projects, include_personal)
        sql = f"""SELECT j.* FROM sync_journal j
                  WHERE j.seq > ? AND {where} AND {NOT_YET_DELIVERED}
                  ORDER BY j.seq"""
        args: list[Any] = [after_seq, *params, target, target]
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [JournalEntry.from_row(r) for r in self.db.rows(sql, args)]

    def iter_pending(
        self,
        target: str,
        *,
        projects: Iterable[str] | None = None,
        include_personal: bool = False,
        batch: int = 5000,
    ) -> Iterator[list[JournalEntry]]:
        """:meth:`pending` in batches, so memory stays flat on large journals."""
        projects = None if projects is None else list(projects)
        after = 0
        while True:
            rows = self.pending(
                target,
                projects=projects,
                include_personal=include_personal,
                after_seq=after,
                limit=batch,
            )
            if not rows:
                return
            yield rows
            after = rows[-1].seq

    def count_pending(
        self,
        target: str,
        *,
        projects: Iterable[str] | None = None,
        include_personal: bool = False,
    ) -> int:
        where, params = self._selection(projects, include_personal)
        return int(
            self.db.scalar(
                f"SELECT COUNT(*) FROM sync_journal j WHERE {where} AND {NOT_YET_DELIVERED}",
                [*params, target, target],
            )
            or 0
        )

    def targets(self, conn: sqlite3.Connection | None = None) -> list[str]:
        """Every target (``git:<dir>``, ``cloud:<server>``) this replica has delivered to or
        quarantined rows for, sorted: the sync destinations it knows about.

        The delivery table is skip-scanned (one index probe per target), so this stays cheap
        however many rows the targets hold."""
        sql = """WITH RECURSIVE t(target) AS (
                   SELECT MIN(target) FROM sync_delivery
                   UNION ALL
                   SELECT (SELECT MIN(target) FROM sync_delivery WHERE target > t.target)
                   FROM t WHERE t.target IS NOT NULL)
                 SELECT target FROM t WHERE target IS NOT NULL
                 UNION SELECT DISTINCT target FROM sync_quarantine ORDER BY 1"""
        rows = conn.execute(sql).fetchall() if conn is not None else self.db.rows(sql)
        return [r[0] for r in rows]

    def pending_sessions(
        self,
        target: str,
        *,
        projects: Iterable[str],
        include_personal: bool = False,
    ) -> list[JournalEntry]:
        """Session rows outside ``projects`` that a project-scoped export must carry: none.

        Before identity was per project, a memory of project P could name a session recorded
        under another project, whose row then had to travel with P. Now a memory's session is
        always ``(its project, session_id)``, inside the selection (schema migration 7 copied
        the sessions older memories named into their projects). Kept so transports can still
        ask."""
        del target, projects, include_personal
        return []

    # --- chunks a target holds --------------------------------------------------------------

    def chunk_ids(self, target: str) -> set[str]:
        """Ids of the chunks of ``target`` already applied here (or written from here)."""
        rows = self.db.rows("SELECT chunk_id FROM sync_chunks WHERE target_key = ?", (target,))
        return {r[0] for r in rows}

    def record_chunk(self, target: str, chunk_id: str) -> None:
        """Remember that chunk ``chunk_id`` of ``target`` is held here (joins an open write)."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO sync_chunks(target_key, chunk_id, imported_at)"
                " VALUES (?, ?, ?)",
                (target, chunk_id, now_text()),
            )

    def forget_target(self, target: str) -> None:
        """Drop what this store believes ``target`` holds (delivery marks and chunk ids), so a
        transport can rebuild it from what the target really has (e.g. a sync directory whose
        chunk files changed under it)."""
        with self.db.write() as conn:
            conn.execute("DELETE FROM sync_delivery WHERE target = ?", (target,))
            conn.execute("DELETE FROM sync_chunks WHERE target_key = ?", (target,))

    def mark_delivered(self, target: str, seqs: Iterable[int]) -> int:
        """Record that ``target`` durably holds these journal rows. Returns how many were new."""
        now = now_text()
        rows = [(target, int(s), now) for s in seqs]
        if not rows:
            return 0
        with self.db.write() as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO sync_delivery(target, seq, delivered_at) VALUES (?, ?, ?)",
                rows,
            )
            conn.execute(
                "DELETE FROM sync_quarantine WHERE target = ? AND seq IN "
                f"({', '.join(str(r[1]) for r in rows)})",
                (target,),
            )
            added = conn.total_changes - before
            self.blank_deleted_payloads(conn, (r[1] for r in rows))
            return added

    def seqs_for_mids(self, mids: Iterable[str]) -> dict[str, int]:
        """Local seq of each known mid (for acknowledging exactly what a server confirmed)."""
        wanted = list(dict.fromkeys(mids))
        found: dict[str, int] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows = self.db.rows(
                f"SELECT mid, seq FROM sync_journal WHERE mid IN ({', '.join('?' for _ in part)})",
                part,
            )
            found.update({r["mid"]: r["seq"] for r in rows})
        return found

    def entry(self, seq: int) -> JournalEntry | None:
        row = self.db.one("SELECT * FROM sync_journal WHERE seq = ?", (seq,))
        return None if row is None else JournalEntry.from_row(row)

    def quarantine(self, target: str, seq: int, mid: str, error_code: str, error: str) -> None:
        """Keep a row a target rejected out of its push queue, visible in status."""
        with self.db.write() as conn:
            conn.execute(
                """INSERT INTO sync_quarantine(target, seq, mid, error_code, error, quarantined_at)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT(target, seq) DO UPDATE SET attempts = attempts + 1,
                       error_code = excluded.error_code, error = excluded.error,
                       quarantined_at = excluded.quarantined_at""",
                (target, seq, mid, error_code, error, now_text()),
            )

    def quarantined(self, target: str) -> list[sqlite3.Row]:
        return self.db.rows(
            "SELECT * FROM sync_quarantine WHERE target = ? ORDER BY seq", (target,)
        )

    def blank_deleted_payloads(self, conn: sqlite3.Connection, seqs: Iterable[int]) -> int:
        """Once every known target holds a hard delete (at once when there are no targets),
        replace the title, content and summary of that key's earlier records in the journal
        (upserts, soft deletes) by ``[deleted]``, so deleted text does not linger on this
        machine; ``engram purge`` then clears the old bytes from the files. Git history keeps
        what was already pushed. Only real deletes count: a row that merely left a selection
        keeps its text."""
        wanted = sorted({int(s) for s in seqs})
        if not wanted:
            return 0
        targets = self.targets(conn)
        blanked = 0
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            deletes = conn.execute(
                f"""SELECT j.seq, j.entity, j.project, j.key, j.hlc FROM sync_journal j
                    JOIN sync_tombstones t ON t.entity = j.entity AND t.project = j.project
                                          AND t.key = j.key AND t.hlc = j.hlc
                    WHERE j.seq IN ({", ".join("?" for _ in part)}) AND j.op = 'delete'""",
                part,
            ).fetchall()
            for seq, entity, project, key, hlc in deletes:
                held = conn.execute(
                    "SELECT COUNT(*) FROM sync_delivery WHERE seq = ?", (seq,)
                ).fetchone()[0]
                if held < len(targets):
                    continue
                # Every earlier record of the key: upserts, and soft deletes or selection exits,
                # which carry the full state too.
                older = conn.execute(
                    """SELECT seq, record FROM sync_journal
                       WHERE entity = ? AND project = ? AND key = ? AND hlc < ?""",
                    (entity, project, key, hlc),
                ).fetchall()
                for older_seq, text in older:
                    record = orjson.loads(text)
                    payload = record["payload"]
                    texts = [n for n in ("title", "content", "summary") if payload.get(n)]
                    if all(payload[n] == BLANKED for n in texts):
                        continue
                    for name in texts:
                        payload[name] = BLANKED
                    conn.execute(
                        "UPDATE sync_journal SET record = ? WHERE seq = ?",
                        (orjson.dumps(record).decode(), older_seq),
                    )
                    blanked += 1
        if blanked:  # the old bytes now wait in the WAL and free pages: engram/store/purge.py
            conn.execute("UPDATE store_purge SET blanked = 1 WHERE id = 1")
        return blanked
