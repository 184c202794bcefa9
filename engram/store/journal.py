"""The replication journal: the hybrid logical clock, appending mutations inside the write's
own transaction, and the per-target delivery bookkeeping that sync transports use.

Every local write appends its mutation here in the same transaction as the write (invariant 1).
Transports ask for what a target does not hold yet (:meth:`Journal.pending`) and mark rows
delivered only once the target durably has them (invariant 4). A record received through a
target is held by it without a delivery row: its ``source`` says so (:data:`HELD_BY_SOURCE`),
unless that target turned out not to hold what we believed (``sync_targets.resend_through``).

A local write's record is stored *elided* (:data:`ELIDED`): its payload is the entity's row at
the record's ``hlc``, so the journal does not keep a second copy of every memory; the record's
text is rebuilt from the row when a transport reads it (always the same bytes: a row's
replicated fields only ever change together with its ``hlc``). Transports read in batches
(:meth:`Journal.pending`), each elided record's state coming with it in the one query;
a single row is rebuilt by :func:`elided_text` (one lookup each). A record received from
elsewhere is stored elided too when its exact text is what its row rebuilds to, else verbatim.

When the row moves on (a newer write from here or elsewhere, a move to another project) or goes
(a hard delete), triggers keep its state for the elided records written at it, in the
``sync_kept_*`` tables (:func:`engram.store.schema.kept_states_sql`), and the record is rebuilt
from that copy: the journal still holds every state it replicated, as it did with every text
stored, while the current state of every memory is stored once.

(``orjson`` is imported where records are encoded or decoded: loading it costs a few
milliseconds, and a plain ``engram save`` or ``search`` process never needs it.)

Size: over 500 lines on purpose: the clock, appending, delivery and the outbound quarantine
share the invariants above, which are easier to check read together in one class.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from engram.platform import machine_id
from engram.record import (
    DEFAULT_MAX_CLOCK_DRIFT_MS,
    FIELDS,
    INTENT_DEFAULTS,
    KEY_FIELD,
    MAX_WALL_MS,
    STATE_FIELDS,
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
#: The ``record`` of a local mutation whose payload is its entity's row at the record's hlc.
ELIDED = ""
#: The table of each entity (the replicated rows elided records are rebuilt from).
ENTITY_TABLES = {"session": "sessions", "observation": "observations", "prompt": "user_prompts"}
_STATE_AT = {
    entity: f"SELECT {', '.join(STATE_FIELDS[entity])} FROM {table} "
    f"WHERE project = ? AND {KEY_FIELD[entity]} = ? AND hlc = ?"
    for entity, table in ENTITY_TABLES.items()
}
#: Where the state of an elided record is kept once its row moved on (see the module docstring).
KEPT_TABLES = {entity: f"sync_kept_{table}" for entity, table in ENTITY_TABLES.items()}
_KEPT_AT = {
    entity: f"SELECT {', '.join(STATE_FIELDS[entity])} FROM {KEPT_TABLES[entity]} WHERE seq = ?"
    for entity in ENTITY_TABLES
}
_INTENT_ITEMS = tuple(INTENT_DEFAULTS.items())
#: How many of an observation's state values are its payload fields (the intent fields follow).
_OBSERVATION_PAYLOAD = len(FIELDS["observation"])
_INTENT_AT_DEFAULT = tuple(INTENT_DEFAULTS.values())
#: A record's keys in their order (:func:`engram.record.build_record`).
_ENVELOPE = ("mid", "hlc", "origin", "entity", "key", "op", "project", "scope", "payload")
#: The fields a hard delete blanks in earlier records (:meth:`Journal.blank_deleted_payloads`).
BLANKED_FIELDS = ("title", "content", "summary")


def sendable(alias: str = "j") -> str:
    """SQL condition on journal rows ``alias``: the record can be sent (it has its text, or it
    is elided and its state is still there: its row at its hlc, or the kept copy). Only an
    elided record whose state is nowhere (a journal written before states were kept) is not."""
    current = " ".join(
        f"WHEN '{entity}' THEN EXISTS (SELECT 1 FROM {table} e WHERE e.project = {alias}.project"
        f" AND e.{KEY_FIELD[entity]} = {alias}.key AND e.hlc = {alias}.hlc)"
        f" OR EXISTS (SELECT 1 FROM {KEPT_TABLES[entity]} k WHERE k.seq = {alias}.seq)"
        for entity, table in ENTITY_TABLES.items()
    )
    return f"({alias}.record != '' OR CASE {alias}.entity {current} ELSE 0 END)"


def _with_states(alias: str = "j") -> tuple[str, str, str, dict[str, slice]]:
    """What reads each elided journal row ``alias``'s state in the query that selects the row
    (one probe per row in SQLite, instead of a statement per record from Python): the state
    columns (each entity's :data:`STATE_FIELDS`, from its row at the record's hlc, else from
    the kept copy, as :func:`elided_text` reads them), the joins, the condition that the
    record can be sent (:func:`sendable`'s), and where each entity's columns sit in a result
    row that starts with :data:`_ENTRY_COLUMNS`."""
    columns: list[str] = []
    joins: list[str] = []
    found: list[str] = []
    at: dict[str, slice] = {}
    start = len(_ENTRY_COLUMNS)
    for entity, table in ENTITY_TABLES.items():
        row, kept, key = f"{entity[0]}_row", f"{entity[0]}_kept", KEY_FIELD[entity]
        elided = f"{alias}.record = '' AND {alias}.entity = '{entity}'"
        joins.append(
            f"LEFT JOIN {table} {row} ON {elided} AND {row}.project = {alias}.project"
            f" AND {row}.{key} = {alias}.key AND {row}.hlc = {alias}.hlc"
        )
        joins.append(
            f"LEFT JOIN {KEPT_TABLES[entity]} {kept} ON {elided} AND {row}.{key} IS NULL"
            f" AND {kept}.seq = {alias}.seq"
        )
        fields = STATE_FIELDS[entity]
        columns += [f"IIF({row}.{key} IS NULL, {kept}.{name}, {row}.{name})" for name in fields]
        found.append(f"{row}.{key} IS NOT NULL OR {kept}.seq IS NOT NULL")
        at[entity] = slice(start, start + len(fields))
        start += len(fields)
    sendable_here = f"({alias}.record != '' OR {' OR '.join(found)})"
    return ", ".join(columns), " ".join(joins), sendable_here, at


#: A journal row as :class:`JournalEntry` takes it, then the origin (rebuilding needs it).
_ENTRY_COLUMNS = ("seq", "mid", "hlc", "entity", "key", "op", "project", "scope", "record",
                  "source", "origin")  # fmt: skip
_STATE_COLUMNS, _STATE_JOINS, _SENDABLE_WITH_STATE, _STATE_AT_COLUMN = _with_states()


def _entries_with_states(rows: Iterable[tuple[Any, ...]]) -> list[JournalEntry]:
    """The entries of rows selected with :data:`_STATE_COLUMNS` (only sendable ones), elided
    records rebuilt from the state that came with them."""
    found = []
    for row in rows:
        seq, mid, hlc, entity, key, op, project, scope, record, source, origin = row[:11]
        if record == ELIDED:
            record = _text_at(mid, hlc, origin, entity, key, row[_STATE_AT_COLUMN[entity]])
        found.append(JournalEntry(seq, mid, hlc, entity, key, op, project, scope, record, source))
    return found


def elided_text(conn: sqlite3.Connection, row: sqlite3.Row) -> str | None:
    """The record text of an elided journal row, rebuilt from its entity's row, or from the
    state kept when that row moved on (``None`` when neither is there)."""
    entity = row["entity"]
    found = conn.execute(_STATE_AT[entity], (row["project"], row["key"], row["hlc"])).fetchone()
    if found is None:
        found = conn.execute(_KEPT_AT[entity], (row["seq"],)).fetchone()
        if found is None:
            return None
    return _text_at(row["mid"], row["hlc"], row["origin"], entity, row["key"], tuple(found))


def state_text(header: Any, state: dict[str, Any]) -> str:
    """The text of the record ``header`` (its mid, hlc, origin, entity and key) whose payload
    is the entity state ``state`` (its row's replicated fields): an upsert, or for a
    soft-deleted observation a delete. Intent fields at their default are left out
    (:func:`engram.record.compact_payload`), as every local write's payload leaves them."""
    entity = header["entity"]
    values = tuple(state[name] for name in FIELDS[entity])
    if entity == "observation":  # (a state may leave the intent fields out)
        values += tuple(state.get(name, default) for name, default in _INTENT_ITEMS)
    return _text_at(header["mid"], header["hlc"], header["origin"], entity, header["key"], values)


def _text_at(
    mid: str, hlc: str, origin: str, entity: str, key: str, values: tuple[Any, ...]
) -> str:
    """:func:`state_text` of a state given as its values in :data:`STATE_FIELDS` order (what
    a row or a kept copy reads as)."""
    import orjson

    payload: dict[str, Any] = dict(zip(FIELDS[entity], values, strict=False))  # (intent: below)
    op = "upsert"
    if entity == "observation":
        # The intent fields not at their default (:func:`engram.record.compact_payload`), in
        # their order, then ``hard`` for a soft delete.
        intent = values[_OBSERVATION_PAYLOAD:]
        if intent != _INTENT_AT_DEFAULT:  # (most memories: nothing to add)
            for (name, default), value in zip(_INTENT_ITEMS, intent, strict=True):
                if name == "pinned":
                    value = bool(value)  # stored as 0/1, replicated as a boolean
                if value != default:
                    payload[name] = value
        if payload["deleted_at"] is not None:
            op = "delete"
            payload["hard"] = False
    record = build_record(
        mid=mid,
        hlc=hlc,
        origin=origin,
        entity=entity,
        key=key,
        op=op,
        project=payload["project"],
        scope=payload.get("scope", "project"),
        payload=payload,
    )
    return orjson.dumps(record).decode()


def elides_verbatim(record: dict[str, Any], text: str | None, state: dict[str, Any]) -> bool:
    """``(text or the record as orjson writes it) == state_text(record, state)`` for a
    ``state`` that :func:`engram.record.verbatim_state` gave for ``record`` (its payload as
    it is): the rebuilt record is then ``record`` itself whenever its envelope says what its
    payload says — its keys in their order, an upsert of a live state, the payload's project
    and scope — so only the record's own text needs writing out. Anything else is built
    (tests/store/test_record_state.py holds the answers equal over adversarial records)."""
    import orjson

    payload = record["payload"]
    project, scope = record["project"], record["scope"]
    if (
        tuple(record) == _ENVELOPE
        and record["op"] == "upsert"
        and payload.get("deleted_at") is None  # (a deleted state rebuilds as a delete)
        and project.__class__ is str
        and project == payload["project"]
        and scope.__class__ is str
        and scope == payload.get("scope", "project")
    ):
        return text is None or orjson.dumps(record) == text.encode()
    stored = text if text is not None else orjson.dumps(record).decode()
    return stored == state_text(record, state)


def record_text(conn: sqlite3.Connection, row: sqlite3.Row) -> str | None:
    """A journal row's record text (rebuilt when elided; ``None`` when its state is nowhere)."""
    text = row["record"]
    return text if text != ELIDED else elided_text(conn, row)


def _hostname() -> str:
    """This machine's host name, as ``socket.gethostname()`` gives it (which is the kernel's
    node name where ``os.uname`` exists: importing ``socket`` is kept off every start-up)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


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
    raw = f"{_hostname()}\0{machine}\0{db_path.resolve()}\0{inode}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


class JournalEntry(NamedTuple):
    """One journal row as sync transports see it (a named tuple: an export builds one per
    record, and a frozen dataclass's ``__init__`` cost 4x as much)."""

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
        import orjson

        record: dict[str, Any] = orjson.loads(self.record)
        return record

    @classmethod
    def from_row(cls, row: sqlite3.Row, text: str | None = None) -> JournalEntry:
        """The entry of a journal row (``text``: its record text, when the row is elided)."""
        return cls(
            row["seq"],
            row["mid"],
            row["hlc"],
            row["entity"],
            row["key"],
            row["op"],
            row["project"],
            row["scope"],
            row["record"] if text is None else text,
            row["source"],
        )


def entries(conn: sqlite3.Connection, rows: Iterable[sqlite3.Row]) -> list[JournalEntry]:
    """The entries of these journal rows, elided records rebuilt (any whose state is nowhere left out)."""
    found = []
    for row in rows:
        if row["record"] != ELIDED:
            found.append(JournalEntry.from_row(row))
        elif (text := elided_text(conn, row)) is not None:
            found.append(JournalEntry.from_row(row, text))
    return found


def insert_record(
    conn: sqlite3.Connection,
    record: dict[str, Any],
    *,
    source: str,
    text: str | None = None,
    record_delivery: bool = True,
    recorded_at: str | None = None,
    elide: bool = False,
) -> int:
    """Insert one journal row (the one statement every journaling path uses, migrations
    included); a record that arrived through a target is marked as held by it. ``elide``: a
    local record whose payload is its entity's row at its hlc is stored without its text."""
    if elide:
        stored = ELIDED
    elif text is not None:
        stored = text
    else:
        import orjson

        stored = orjson.dumps(record).decode()
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
            stored,
            source,
            recorded_at or now_text(),
        ),
    )
    seq = int(cursor.lastrowid or 0)
    if source != "local" and record_delivery:
        # Arrived through a target: it holds the record (its source says so), never send it
        # back; the target is listed among the known ones.
        note_targets(conn, (source,))
    return seq


def note_targets(conn: sqlite3.Connection, targets: Iterable[str]) -> None:
    """List the targets records arrived through (:meth:`Journal.targets`, purge's holders)."""
    conn.executemany(
        "INSERT OR IGNORE INTO sync_targets(target) VALUES (?)", [(t,) for t in targets]
    )


def resend_through(conn: sqlite3.Connection, target: str) -> int:
    """The newest seq received through ``target`` that does not count as held by it (0: every
    row received through it is held by it)."""
    row = conn.execute(
        "SELECT resend_through FROM sync_targets WHERE target = ?", (target,)
    ).fetchone()
    return int(row[0]) if row is not None else 0


def deliver(conn: sqlite3.Connection, target: str, seqs: Iterable[int], at: str) -> int:
    """Record that ``target`` holds the journal rows ``seqs`` (rows that arrived through it
    and count as held by it get no delivery row: they need none). How many rows were added."""
    row = conn.execute(
        "SELECT resend_through FROM sync_targets WHERE target = ?", (target,)
    ).fetchone()
    before = conn.total_changes
    if row is None:  # nothing ever arrived through it (an export-only target): no row is its own
        conn.executemany(
            "INSERT OR IGNORE INTO sync_delivery(target, seq, delivered_at) VALUES (?, ?, ?)",
            [(target, int(s), at) for s in seqs],
        )
    else:
        conn.executemany(
            """INSERT OR IGNORE INTO sync_delivery(target, seq, delivered_at)
               SELECT ?1, ?2, ?3 WHERE NOT EXISTS (
                   SELECT 1 FROM sync_journal WHERE seq = ?2 AND source = ?1 AND seq > ?4)""",
            [(target, int(s), at, int(row[0])) for s in seqs],
        )
    return conn.total_changes - before


def _blank_kept(conn: sqlite3.Connection, entity: str, project: str, key: str, hlc: str) -> int:
    """Blank the kept states of the elided records of ``(project, key)`` older than ``hlc``
    (see :meth:`Journal.blank_deleted_payloads`); how many were blanked."""
    names = [n for n in BLANKED_FIELDS if n in STATE_FIELDS[entity]]
    sets = ", ".join(f"{n} = CASE WHEN COALESCE({n}, '') = '' THEN {n} ELSE ? END" for n in names)
    unblanked = " OR ".join(f"COALESCE({n}, '') NOT IN ('', ?)" for n in names)
    return conn.execute(
        f"""UPDATE {KEPT_TABLES[entity]} SET {sets}
            WHERE seq IN (SELECT seq FROM sync_journal WHERE entity = ? AND project = ?
                            AND key = ? AND hlc < ? AND record = '')
              AND ({unblanked})""",
        [*([BLANKED] * len(names)), entity, project, key, hlc, *([BLANKED] * len(names))],
    ).rowcount


def now_ms() -> int:
    """This machine's wall clock in milliseconds (the one place the store reads it)."""
    return time.time_ns() // 1_000_000


#: Journal rows ``j`` held by the target they arrived through, without a delivery row: bound
#: to the target and its :func:`resend_through` (as ``?``, in that order).
HELD_BY_SOURCE = "(j.source = ? AND j.seq > ?)"
#: The journal rows ``j`` a target neither holds nor rejected (bound to :func:`not_yet_delivered_args`):
#: what :meth:`Journal.pending` and :meth:`Journal.count_pending` select. The source test comes
#: first: it reads the row at hand, the others probe an index.
NOT_YET_DELIVERED = f"""NOT {HELD_BY_SOURCE}
    AND NOT EXISTS (SELECT 1 FROM sync_delivery d WHERE d.target = ? AND d.seq = j.seq)
    AND NOT EXISTS (SELECT 1 FROM sync_quarantine q WHERE q.target = ? AND q.seq = j.seq)"""


def not_yet_delivered_args(conn: sqlite3.Connection, target: str) -> list[Any]:
    """The values :data:`NOT_YET_DELIVERED` is bound to for ``target``."""
    return [target, resend_through(conn, target), target, target]


def held_by(conn: sqlite3.Connection, target: str) -> tuple[str, list[Any]]:
    """SQL condition on journal rows ``j``, and its values: ``target`` holds the row (a delivery
    row, or the row arrived through it)."""
    return (
        f"({HELD_BY_SOURCE} OR EXISTS (SELECT 1 FROM sync_delivery d"
        " WHERE d.target = ? AND d.seq = j.seq))",
        [target, resend_through(conn, target), target],
    )


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

    def clock_poisoned(self) -> bool:
        """Whether the persisted clock is beyond now + the allowed drift (cheap: one row)."""
        return self.clock_wall_ms() > now_ms() + self.max_drift_ms

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

    def append_current(
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
    ) -> int:
        """Journal a local write whose payload is the entity's row as it now is, at ``hlc``
        (the row must carry that hlc): stored elided, rebuilt from the row when read (see the
        module docstring). Returns the journal seq."""
        header = {"mid": new_mid(), "hlc": hlc, "origin": origin, "entity": entity, "key": key,
                  "op": op, "project": project, "scope": scope}  # fmt: skip
        return insert_record(conn, header, source="local", elide=True)

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
        columns = ", ".join(f"j.{name}" for name in _ENTRY_COLUMNS)
        sql = f"""SELECT {columns}, {_STATE_COLUMNS} FROM sync_journal j {_STATE_JOINS}
                  WHERE j.seq > ? AND {where} AND {NOT_YET_DELIVERED} AND {_SENDABLE_WITH_STATE}
                  ORDER BY j.seq"""
        with self.db.read() as conn:
            args: list[Any] = [after_seq, *params, *not_yet_delivered_args(conn, target)]
            if limit is not None:
                sql += " LIMIT ?"
                args.append(limit)
            cursor = conn.cursor()
            cursor.row_factory = None  # (plain tuples: the entries are built by position)
            return _entries_with_states(cursor.execute(sql, args).fetchall())

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
        with self.db.read() as conn:
            return int(
                conn.execute(
                    f"""SELECT COUNT(*) FROM sync_journal j
                        WHERE {where} AND {NOT_YET_DELIVERED} AND {sendable("j")}""",
                    [*params, *not_yet_delivered_args(conn, target)],
                ).fetchone()[0]
                or 0
            )

    def targets(self, conn: sqlite3.Connection | None = None) -> list[str]:
        """Every target (``git:<dir>``, ``cloud:<server>``) this replica has delivered to,
        received from or quarantined rows for, sorted: the sync destinations it knows about.

        The delivery table is skip-scanned (one index probe per target), so this stays cheap
        however many rows the targets hold."""
        sql = """WITH RECURSIVE t(target) AS (
                   SELECT MIN(target) FROM sync_delivery
                   UNION ALL
                   SELECT (SELECT MIN(target) FROM sync_delivery WHERE target > t.target)
                   FROM t WHERE t.target IS NOT NULL)
                 SELECT target FROM t WHERE target IS NOT NULL
                 UNION SELECT target FROM sync_targets
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
        """Drop what this store believes ``target`` holds (delivery marks, chunk ids, and the
        rows received through it: they are sent to it again), so a transport can rebuild it
        from what the target really has (e.g. a sync directory whose chunk files changed under
        it)."""
        with self.db.write() as conn:
            conn.execute("DELETE FROM sync_delivery WHERE target = ?", (target,))
            conn.execute("DELETE FROM sync_chunks WHERE target_key = ?", (target,))
            newest = conn.execute("SELECT MAX(seq) FROM sync_journal").fetchone()[0]
            self._resend(conn, target, int(newest or 0))

    def forget_delivered(self, target: str, seqs: Iterable[int]) -> int:
        """Make the rows ``seqs`` pending again for ``target`` (it turned out not to hold them).
        How many delivery rows were dropped. A row that arrived through ``target`` has none:
        every row received through it up to the newest such one is sent again (more than
        asked, never less: the target takes what it holds as duplicates)."""
        wanted = sorted({int(s) for s in seqs})
        removed = 0
        with self.db.write() as conn:
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                marks = ", ".join("?" for _ in part)
                removed += conn.execute(
                    f"DELETE FROM sync_delivery WHERE target = ? AND seq IN ({marks})",
                    [target, *part],
                ).rowcount
                received = conn.execute(
                    f"SELECT MAX(seq) FROM sync_journal WHERE source = ? AND seq IN ({marks})",
                    [target, *part],
                ).fetchone()[0]
                if received is not None:
                    self._resend(conn, target, int(received))
        return removed

    @staticmethod
    def _resend(conn: sqlite3.Connection, target: str, through: int) -> None:
        """Rows received through ``target`` up to ``through`` no longer count as held by it."""
        conn.execute(
            """INSERT INTO sync_targets(target, resend_through) VALUES (?, ?)
               ON CONFLICT(target) DO UPDATE
               SET resend_through = MAX(resend_through, excluded.resend_through)""",
            (target, through),
        )

    def mark_delivered(self, target: str, seqs: Iterable[int]) -> int:
        """Record that ``target`` durably holds these journal rows. Returns how many were new."""
        wanted = [int(s) for s in seqs]
        if not wanted:
            return 0
        with self.db.write() as conn:
            added = deliver(conn, target, wanted, now_text())
            conn.execute(
                "DELETE FROM sync_quarantine WHERE target = ? AND seq IN "
                f"({', '.join(str(s) for s in wanted)})",
                (target,),
            )
            self.blank_deleted_payloads(conn, wanted)
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
        """The journal row ``seq`` (``None`` if there is none, or it is elided and its state is nowhere)."""
        with self.db.read() as conn:
            found = entries(conn, conn.execute("SELECT * FROM sync_journal WHERE seq = ?", (seq,)))
        return found[0] if found else None

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
        import orjson

        wanted = sorted({int(s) for s in seqs})
        if not wanted:
            return 0
        targets = set(self.targets(conn))
        blanked = 0
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            deletes = conn.execute(
                f"""SELECT j.seq, j.entity, j.project, j.key, j.hlc, j.source FROM sync_journal j
                    JOIN sync_tombstones t ON t.entity = j.entity AND t.project = j.project
                                          AND t.key = j.key AND t.hlc = j.hlc
                    WHERE j.seq IN ({", ".join("?" for _ in part)}) AND j.op = 'delete'""",
                part,
            ).fetchall()
            for seq, entity, project, key, hlc, source in deletes:
                holders = {
                    r[0]
                    for r in conn.execute("SELECT target FROM sync_delivery WHERE seq = ?", (seq,))
                }
                if source != "local" and seq > resend_through(conn, source):
                    holders.add(source)  # it arrived through there
                if not targets <= holders:
                    continue
                # Every earlier record of the key: upserts, and soft deletes or selection exits,
                # which carry the full state too. Elided ones: in the state kept for them.
                blanked += _blank_kept(conn, entity, project, key, hlc)
                older = conn.execute(
                    """SELECT seq, record FROM sync_journal
                       WHERE entity = ? AND project = ? AND key = ? AND hlc < ?
                         AND record != ''""",
                    (entity, project, key, hlc),
                ).fetchall()
                for older_seq, text in older:
                    record = orjson.loads(text)
                    payload = record["payload"]
                    texts = [n for n in BLANKED_FIELDS if payload.get(n)]
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
