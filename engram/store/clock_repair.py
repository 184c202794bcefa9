"""Repairing a poisoned clock (docs/architecture.md, "Trust boundaries").

Before the clock bound existed, one record stamped far in the future (``9999999999999.…``) was
applied like any other: it won last-writer-wins against every later real edit, dragged this
store's clock there, and the clock's next ticks rolled over to 14-digit wall times that every
receiver refuses. A store in that state repairs itself — on open when its persisted clock is
beyond now + the allowed drift, and on demand with ``engram doctor`` — without losing a memory:

* the clock is reset to the largest sane value the journal holds (ticks then follow real time);
* records received from elsewhere whose clock is beyond now + drift leave the journal for the
  inbound quarantine (``clock_skew``), where they wait until real time catches up;
* local writes stamped with such a clock (this machine's honest edits after the poisoning) are
  journaled again under fresh, valid clocks, so they still win and still travel;
* every address those records touched is re-derived from its remaining journal mutations (the
  best sane one wins), so no row keeps state that only an insane record justified.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import orjson

from engram.record import (
    build_record,
    full_state,
    hlc_bound,
    is_hard_delete,
    is_valid_hlc,
    new_mid,
    parse_hlc,
)
from engram.store import quarantine
from engram.store.identity import insert_stub_session
from engram.store.journal import entries, now_ms, record_text
from engram.store.replication import STUB_STARTED_AT, _ApplyBatch

if TYPE_CHECKING:
    from engram.store.store import Store

_HLC_LENGTH = 36  # 13 + 1 + 5 + 1 + 16: a valid hlc, compared as a string
_LOOSE_HLC = re.compile(r"^(\d+)\.(\d+)\.")
_TABLES = (
    ("session", "sessions", "id"),
    ("observation", "observations", "sync_id"),
    ("prompt", "user_prompts", "sync_id"),
    ("relation", "memory_relations", "sync_id"),
)
Address = tuple[str, str, str]  # (entity, project, key)


@dataclass(slots=True)
class ClockRepair:
    """What a repair found and did (all zero when the clock was sane)."""

    clock_was_ms: int = 0
    clock_now_ms: int = 0
    bound_ms: int = 0
    quarantined: int = 0  # received records moved to the inbound quarantine (clock_skew)
    rejournaled: int = 0  # addresses whose local writes were journaled again, fresh clocks
    rederived: int = 0  # addresses re-derived from their best sane journal mutation
    emptied: int = 0  # addresses that only an insane received record filled

    @property
    def repaired(self) -> bool:
        return bool(self.quarantined or self.rejournaled or self.rederived or self.emptied) or (
            self.clock_was_ms != self.clock_now_ms
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "repaired": self.repaired}


def clock_poisoned(store: Store) -> bool:
    """Whether the persisted clock is beyond now + the allowed drift (cheap: one row)."""
    return store.journal.clock_poisoned()


def _order(hlc: str) -> tuple[int, int]:
    """Clock order that also ranks the invalid 14-digit values a poisoned clock produced."""
    match = _LOOSE_HLC.match(hlc)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def repair(store: Store) -> ClockRepair:
    """Find every record and row stamped beyond now + drift (or with an invalid clock) and
    repair as described in the module docstring, in one transaction."""
    now = now_ms()
    drift = store.journal.max_drift_ms
    bound = hlc_bound(now, drift)
    report = ClockRepair(bound_ms=now + drift)
    with store.db.write() as conn:
        report.clock_was_ms = int(
            conn.execute("SELECT wall_ms FROM sync_clock WHERE id = 1").fetchone()[0]
        )
        insane = conn.execute(
            """SELECT * FROM sync_journal WHERE hlc > ? OR length(hlc) != ?""",
            (bound, _HLC_LENGTH),
        ).fetchall()
        addresses: set[Address] = {(r["entity"], r["project"], r["key"]) for r in insane}
        unjournaled: dict[Address, str] = {}  # address → "row" | "tombstone"
        for entity, table, key in (*_TABLES, ("tombstone", "sync_tombstones", "key")):
            kind = "entity" if entity == "tombstone" else f"'{entity}'"
            for row in conn.execute(
                f"""SELECT {kind}, project, {key} FROM {table}
                    WHERE hlc != '' AND (hlc > ? OR length(hlc) != ?)""",
                (bound, _HLC_LENGTH),
            ):
                address = (row[0], row[1], row[2])
                if address not in addresses:
                    unjournaled[address] = "tombstone" if entity == "tombstone" else "row"
        if not insane and not unjournaled and report.clock_was_ms <= now + drift:
            report.clock_now_ms = report.clock_was_ms
            return report
        local: dict[Address, list[dict[str, Any]]] = defaultdict(list)
        received: set[Address] = set()
        for row in insane:
            address = (row["entity"], row["project"], row["key"])
            text = record_text(conn, row)  # before the row changes (elided records need it)
            _forget_journal_row(conn, row["seq"])
            if text is None:  # an elided record a newer write superseded: nothing to keep
                continue
            if row["source"] == "local":
                local[address].append(orjson.loads(text))
                continue
            received.add(address)
            record = orjson.loads(text)
            valid = is_valid_hlc(row["hlc"])
            quarantine.hold(
                conn,
                reason=quarantine.CLOCK_SKEW if valid else quarantine.INVALID,
                error=f"hlc {row['hlc']} is beyond this clock + the allowed drift (applied "
                "before the clock bound existed; moved here by the clock repair)",
                source=row["source"],
                text=text,
                record=record,
            )
            report.quarantined += 1
        _reset_clock(conn, bound)
        batch = _ApplyBatch(store, conn, now)
        for address in sorted(addresses | set(unjournaled)):
            if address in unjournaled:
                _restamp(store, conn, address, unjournaled[address])
                report.rejournaled += 1
                continue
            records = [orjson.loads(e.record) for e in entries(conn, conn.execute(
                """SELECT * FROM sync_journal WHERE entity = ? AND project = ? AND key = ?
                   ORDER BY hlc""",
                address,
            ))]  # fmt: skip
            sane = bool(records)
            if local.get(address):
                # This machine's own latest write there, journaled again under a fresh clock
                # (after every sane record, so it still wins as it did).
                top = max(local[address], key=lambda r: _order(r["hlc"]))
                hlc, origin = store.journal.tick(conn)
                fresh = build_record(
                    mid=new_mid(),
                    hlc=hlc,
                    origin=origin,
                    entity=top["entity"],
                    key=top["key"],
                    op=top["op"],
                    project=top["project"],
                    scope=top["scope"],
                    payload=top["payload"],
                )
                store.journal.append_record(conn, fresh, source="local")
                records.append(fresh)
                report.rejournaled += 1
            elif sane:
                report.rederived += 1
            elif address in received:
                report.emptied += 1
            _rederive(batch, address, records)
        _restub_sessions(conn, addresses)
        batch.finish()
        report.clock_now_ms = int(
            conn.execute("SELECT wall_ms FROM sync_clock WHERE id = 1").fetchone()[0]
        )
    return report


def _forget_journal_row(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM sync_journal WHERE seq = ?", (seq,))
    conn.execute("DELETE FROM sync_delivery WHERE seq = ?", (seq,))
    conn.execute("DELETE FROM sync_quarantine WHERE seq = ?", (seq,))


def _reset_clock(conn: sqlite3.Connection, bound: str) -> None:
    """The largest sane clock value the journal holds (ticks take the max with real time)."""
    best = conn.execute(
        "SELECT MAX(hlc) FROM sync_journal WHERE length(hlc) = ? AND hlc <= ?",
        (_HLC_LENGTH, bound),
    ).fetchone()[0]
    wall, counter = parse_hlc(best)[:2] if best else (0, 0)
    conn.execute("UPDATE sync_clock SET wall_ms = ?, counter = ? WHERE id = 1", (wall, counter))


def _rederive(batch: _ApplyBatch, address: Address, records: list[dict[str, Any]]) -> None:
    """Make the address hold what its records (in clock order) decide, as last-writer-wins
    would have: replayed from the last record that sets a whole state (an upsert, a soft
    delete carrying the state, a hard delete), over the row in place so its local id stays."""
    start = 0
    for i, record in enumerate(records):
        if full_state(record) is not None or is_hard_delete(record):
            start = i
    if not records or (full_state(records[start]) is None and not is_hard_delete(records[start])):
        batch.clear(*address)  # nothing sets a whole state: start from nothing
    for record in records[start:]:
        _, where, rowid = batch.version(*address)
        batch.rewrite(record, where, rowid)


def _restamp(store: Store, conn: sqlite3.Connection, address: Address, kind: str) -> None:
    """A row or tombstone with an insane clock but no journal row at all (written straight
    into the database): keep it, under a fresh clock, journaled when it is a row."""
    entity, project, key = address
    hlc, origin = store.journal.tick(conn)
    if kind == "row":
        table, column = next((t, c) for e, t, c in _TABLES if e == entity)
        conn.execute(
            f"UPDATE {table} SET hlc = ? WHERE project = ? AND {column} = ?", (hlc, project, key)
        )
        store._journal_state(conn, entity, project, key, hlc, origin)
        return
    conn.execute(
        "UPDATE sync_tombstones SET hlc = ? WHERE entity = ? AND project = ? AND key = ?",
        (hlc, *address),
    )


def _restub_sessions(conn: sqlite3.Connection, addresses: set[Address]) -> None:
    """A session emptied by the repair that memories or prompts still name gets its stub."""
    for entity, project, key in sorted(addresses):
        if entity != "session":
            continue
        named = conn.execute(
            """SELECT 1 FROM observations WHERE project = ?1 AND session_id = ?2
               UNION ALL SELECT 1 FROM user_prompts WHERE project = ?1 AND session_id = ?2
               LIMIT 1""",
            (project, key),
        ).fetchone()
        gone = conn.execute(
            "SELECT 1 FROM sync_tombstones WHERE entity = 'session' AND project = ? AND key = ?",
            (project, key),
        ).fetchone()
        if named and not gone:
            insert_stub_session(conn, project, key, STUB_STARTED_AT)
