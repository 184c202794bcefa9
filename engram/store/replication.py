"""Applying mutations that arrive from other replicas (git chunks, the cloud).

Every record is addressed by ``(project, key)`` (docs/architecture.md, "Identity, the journal and replication"): a record
of project P reads and writes only P's rows, so nobody can reach another project's memories by
naming their ids. Last writer wins per address by ``hlc`` (string order; ties broken by origin
inside the hlc). A payload is written verbatim — no ``now()``, no counter bumps — so every replica
ends with the same bytes. Hard deletes leave a tombstone so an older upsert cannot resurrect the
row. Every received mutation is journaled (so it can be relayed), but never sent back where it
came from.

A record that cannot be applied (malformed, unstorable text, a payload naming another project)
or not yet (more than the allowed drift ahead of this clock) goes to the inbound quarantine
(:mod:`engram.store.quarantine`) with its reason, and the rest of the batch applies. Waiting
records are re-checked on every apply.

Size: over 500 lines on purpose: the apply batch and its rules (last writer wins, tombstones,
the quarantine, Go copies, relations) are the logic of one transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from engram.errors import InvalidMutationError
from engram.record import (
    EPOCH_TEXT,
    check_clock,
    full_state,
    hlc_bound,
    hlc_text,
    is_agent_session,
    unknown_fields,
    validate_record,
)
from engram.store import fts, graph_rows, links, quarantine, revisions, scoring, vector_queue
from engram.store.base import TABLES, StoreBase, drop_tombstone, put_tombstone
from engram.store.identity import insert_stub_session, session_exists, session_tombstoned
from engram.store.journal import (
    ENTITY_TABLES,
    deliver,
    insert_record,
    note_targets,
    now_ms,
    state_text,
)
from engram.store.models import ApplyResult
from engram.store.search_context import ContextRefresh, derive_state
from engram.text import normalized_hash
from engram.times import now_text

if TYPE_CHECKING:
    from engram.store.batch_contexts import Foreseen

STUB_STARTED_AT = EPOCH_TEXT
#: A batch of at least this many records inserts its new memories without their session
#: context and derives the context of their sessions at the end, in a few set-based statements
#: (a chunk of an import: a fifth of its cost went to deriving contexts one row at a time).
BULK_RECORDS = 50
_ROWID = {
    "session": "SELECT rowid, hlc FROM sessions WHERE project = ? AND id = ?",
    "observation": "SELECT id, hlc FROM observations WHERE project = ? AND sync_id = ?",
    "prompt": "SELECT id, hlc FROM user_prompts WHERE project = ? AND sync_id = ?",
    "relation": "SELECT id, hlc FROM memory_relations WHERE project = ? AND sync_id = ?",
}
#: Whether a memory has arrived at an address: its row (whatever its state) or its tombstone.
_ARRIVED = """SELECT 1 FROM observations WHERE project = ?1 AND sync_id = ?2
              UNION ALL SELECT 1 FROM sync_tombstones
              WHERE entity = 'observation' AND project = ?1 AND key = ?2 LIMIT 1"""


class Received(NamedTuple):
    """A mutation's exact JSON text and the object it decodes to, for a caller that decoded
    it already (an import reads every record to judge its scope): decoding it again cost an
    import a tenth of its Python time."""

    text: str
    record: dict[str, Any]


def parse_record(
    item: dict[str, Any] | str | bytes | Received, index: int | None = None
) -> tuple[dict[str, Any], str | None]:
    """``(record, exact_text)`` from a dict or the JSON text of one mutation; raises
    :class:`InvalidMutationError` naming the problem."""
    import orjson

    if isinstance(item, Received):
        text_checked = "\\u0000" not in item.text
        return validate_record(item.record, index, text_checked=text_checked), item.text
    if isinstance(item, dict):
        return validate_record(item, index), None
    try:
        text = item.decode("utf-8") if isinstance(item, bytes) else item
        record = orjson.loads(text)
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        where = f"mutation[{index}]: " if index is not None else ""
        raise InvalidMutationError(f"{where}invalid JSON ({exc})") from None
    return validate_record(record, index, text_checked="\\u0000" not in text), text


class ReplicationMixin(StoreBase):
    def apply_mutations(
        self, records: Iterable[dict[str, Any] | str | bytes | Received], *, source: str
    ) -> ApplyResult:
        """Apply a batch of mutations in one transaction.

        ``source`` names the target they arrived through (``git:<dir>``, ``cloud:<server>``):
        that target is recorded as already holding them. A record that cannot be applied is
        quarantined with its reason (counted in ``ApplyResult.quarantined``) and never fails
        the batch; records waiting in the quarantine whose time has come are applied too.
        """
        if not source or source == "local":
            raise ValueError("source must name the target the mutations arrived through")
        items = list(records)
        result = ApplyResult()
        now = now_ms()
        if not items and not quarantine.has_due(self.db, hlc_bound(now, self.journal.max_drift_ms)):
            return result
        with self.db.write() as conn:
            batch = _ApplyBatch(self, conn, now)
            batch.release_due(result)
            batch.release_waiting(result)
            batch.take_all(items, source, result)
            if batch.memories_arrived:
                # A relation may have waited for a memory this batch brought.
                batch.release_waiting(result)
            batch.finish()
        return result

    def _settle_go_copies(
        self, conn: sqlite3.Connection, rows: Iterable[tuple[str, str, str, dict[str, Any]]]
    ) -> int:
        """Inside the caller's transaction: retire the Go copies among ``rows`` (entity,
        project, key, state) just written here (an import); how many were retired."""
        batch = _ApplyBatch(self, conn, now_ms())
        retired = sum(batch.settle_go_copy(*row) for row in rows)
        batch.finish()
        return retired

    def recheck_quarantine(self, ids: Iterable[int] | None = None) -> ApplyResult:
        """Check inbound-quarantined records again now (all, or those ``ids``): each one that
        has become applicable is applied, the others stay with their (new) reason."""
        result = ApplyResult()
        with self.db.write() as conn:
            batch = _ApplyBatch(self, conn, now_ms())
            batch.release(quarantine.pick(conn, ids), result)
            batch.finish()
        return result


class _ApplyBatch:
    """Applying one batch: every mutation costs a duplicate check, a clock lookup, its journal
    row and its state write; deliveries are recorded together at the end (a journaled record
    needs none: its source holds it, engram/store/journal.py)."""

    def __init__(self, store: ReplicationMixin, conn: sqlite3.Connection, now: int) -> None:
        self.store = store
        self.conn = conn
        self.now_ms = now
        self.max_drift_ms = store.journal.max_drift_ms
        #: Records already held here that arrived (again) through a target: (target, seq).
        self.delivered: list[tuple[str, int]] = []
        #: The targets this batch's journaled records arrived through, and the seqs of its
        #: journaled deletes (whose earlier payloads may now be blanked).
        self.sources: set[str] = set()
        self.deletes: list[int] = []
        self.sessions: set[tuple[str, str]] = set()  # (project, id) known to exist or be gone
        self.index = fts.DeferredIndex(conn)
        self.context = ContextRefresh(conn, self.index, deferred=True)
        self.now = now_text()
        self.newest = ""
        #: Journal seq of every mid looked up or journaled in this batch (None: not held);
        #: every journal row this batch inserts must be noted here.
        self.mids: dict[str, int | None] = {}
        #: A bulk batch (see BULK_RECORDS), and the sessions its new memories joined that the
        #: fresh lane did not foresee (derived set-wise at the end).
        self.bulk = False
        self.fresh_sessions: set[tuple[str, str]] = set()
        #: The contexts the fresh lane's new memories are inserted with (a bulk batch).
        self.foreseen: Foreseen | None = None
        #: Whether any address may hold a tombstone (most stores have none: no lookups then).
        self.tombstones = (
            conn.execute("SELECT EXISTS (SELECT 1 FROM sync_tombstones)").fetchone()[0] == 1
        )
        #: Whether any memory may have links (relations); without any, a new row is scored as
        #: it is inserted instead of by an UPDATE at the end.
        self.related = (
            conn.execute("SELECT EXISTS (SELECT 1 FROM memory_relations)").fetchone()[0] == 1
        )
        #: This replica's origin, once a kept revision asked for it.
        self.origin: str | None = None
        #: Whether this batch created or deleted a memory a waiting relation may name.
        self.memories_arrived = False
        #: Memories written by this batch, and the ends of relations it wrote: scored once at
        #: the end (with the memories related to them: a memory deleted or archived changes
        #: the link count of the memories it is related to, engram/store/links.py).
        self.rescore: set[int] = set()

    # --- the batch -----------------------------------------------------------------------------

    def release_due(self, result: ApplyResult) -> None:
        """Apply the waiting records whose clock is no longer ahead of this one."""
        bound = hlc_bound(self.now_ms, self.max_drift_ms)
        self.release(quarantine.due(self.conn, bound), result)

    def release_waiting(self, result: ApplyResult) -> None:
        """Apply the relations that waited for a memory which is here now."""
        self.release(quarantine.endpoints_arrived(self.conn), result)

    def release(self, rows: list[sqlite3.Row], result: ApplyResult) -> None:
        """Check records taken out of the quarantine again: each is applied (or found stale
        or already known) or goes back with its reason."""
        for row in rows:
            before = result.quarantined_total
            self.take(row["record"], row["source"], result)
            if result.quarantined_total == before:
                quarantine.release(self.conn, row["id"])
                result.released += 1

    def take_all(
        self,
        items: list[dict[str, Any] | str | bytes | Received],
        source: str,
        result: ApplyResult,
    ) -> None:
        """Apply received items in order; which mids are already held is looked up for all of
        them at once."""
        self.bulk = len(items) >= BULK_RECORDS
        parsed: list[tuple[Any, dict[str, Any] | None, str | None, str]] = []
        for item in items:
            try:
                decoded, text = parse_record(item)
            except InvalidMutationError as exc:
                # (quarantined as the text it arrived as)
                held = item.text if isinstance(item, Received) else item
                parsed.append((held, None, None, str(exc)))
                continue
            parsed.append((item, decoded, text, ""))
        self._look_up([r["mid"] for _, r, _, _ in parsed if r is not None])
        lane = None
        if self.bulk:
            # Imported here: `engram search` and `save` never apply a batch, and their start-up
            # imports only what they use (tests/semantic/test_lexical_path.py).
            from engram.store.fresh_lane import FreshLane

            lane = FreshLane(self, source, result)
        fresh = lane.plan([r for _, r, _, _ in parsed]) if lane else [None] * len(parsed)
        if lane is not None:  # before the lane writes anything: it looks the sessions up
            memories, prompts = [], []
            for (_, record, _, _), state in zip(parsed, fresh, strict=True):
                if isinstance(state, dict):  # (a fresh record: its record is valid)
                    assert record is not None
                    if record["entity"] == "observation":
                        memories.append(state)
                    elif record["entity"] == "prompt":
                        prompts.append(state)
            from engram.store.batch_contexts import foresee  # (as FreshLane, above)

            self.foreseen = foresee(self.conn, memories, prompts)
        for (item, record, text, error), state in zip(parsed, fresh, strict=True):
            if lane is not None:
                if state is not None:
                    assert record is not None
                    lane.add(record, text, state)  # (a fresh state or an edit)
                    continue
                lane.flush()  # what the record may see is written first
            if record is None:
                self._hold(quarantine.INVALID, error, source, item, result)
            else:
                self._take(record, text, source, result)
        if lane is not None:
            lane.flush()

    def _look_up(self, mids: list[str]) -> None:
        wanted = [m for m in dict.fromkeys(mids) if m not in self.mids]
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            self.mids.update(dict.fromkeys(part))
            self.mids.update(
                self.conn.execute(
                    f"SELECT mid, seq FROM sync_journal WHERE mid IN ({', '.join('?' * len(part))})",
                    part,
                ).fetchall()
            )

    def take(self, item: dict[str, Any] | str | bytes, source: str, result: ApplyResult) -> None:
        """Apply one received item, or quarantine it with its reason."""
        try:
            record, text = parse_record(item)
        except InvalidMutationError as exc:
            self._hold(quarantine.INVALID, str(exc), source, item, result)
            return
        self._take(record, text, source, result)

    def _take(
        self, record: dict[str, Any], text: str | None, source: str, result: ApplyResult
    ) -> None:
        if record["mid"] not in self.mids:
            self._look_up([record["mid"]])
        known = self.mids[record["mid"]]
        if known is not None:
            self.delivered.append((source, known))
            result.duplicates += 1
            return
        if why := check_clock(record["hlc"], self.now_ms, self.max_drift_ms):
            self._hold(quarantine.CLOCK_SKEW, why, source, text or record, result, record)
            return
        self.apply(record, text, source, result)

    def _hold(
        self,
        reason: str,
        error: str,
        source: str,
        item: Any,
        result: ApplyResult,
        record: dict[str, Any] | None = None,
    ) -> None:
        if record is None:
            record = item if isinstance(item, dict) else _loads_or_none(item)
        quarantine.hold(
            self.conn,
            reason=reason,
            error=error,
            source=source,
            text=quarantine.record_text(item),
            record=record,
        )
        result.hold(reason)

    def finish(self) -> None:
        # The sessions whose new rows' contexts the fresh lane could not vouch for, derived
        # again set-wise (only rows whose context differs are rewritten); before the settles'
        # re-derivations, which skip every session whose rows are right by now.
        unproven, foreseen = set(self.fresh_sessions), self.foreseen
        if foreseen is not None:
            unproven |= foreseen.unproven(self.context.touched)
        if unproven:  # (only bulk batches get here: imported as FreshLane is)
            from engram.store.batch_contexts import rederive_sessions

            rederive_sessions(self.conn, unproven, self.index)
        self.context.flush(
            {s for s in unproven if is_agent_session(s[0])}
            | (foreseen.sessions if foreseen is not None else set())
        )
        self.index.flush()
        if self.rescore:
            scoring.rescore_ids(self.conn, self.rescore, self.now)
            scoring.rescore_linked(self.conn, self.rescore, self.now)
        note_targets(self.conn, sorted(self.sources))
        by_target: dict[str, list[int]] = {}
        for source, seq in self.delivered:
            by_target.setdefault(source, []).append(seq)
        for source, seqs in by_target.items():
            deliver(self.conn, source, seqs, self.now)
        self.store.journal.blank_deleted_payloads(
            self.conn, [*self.deletes, *(seq for _, seq in self.delivered)]
        )
        if self.newest:
            self.store.journal.observe(self.conn, self.newest)

    def _journal(
        self,
        record: dict[str, Any],
        text: str | None,
        source: str,
        state: dict[str, Any] | None = None,
    ) -> None:
        """Journal a received record; ``state``: what applying it wrote to its row, when it
        won. Then, if the record's exact text is what the row rebuilds to, it is stored elided
        like a local write's (engram/store/journal.py): half the bytes an import writes."""
        import orjson

        elide = (
            state is not None
            and record["entity"] in ENTITY_TABLES  # (relations keep their text)
            and (text or orjson.dumps(record).decode()) == state_text(record, state)
        )
        seq = insert_record(
            self.conn,
            record,
            source=source,
            text=text,
            record_delivery=False,
            recorded_at=self.now,
            elide=elide,
        )
        self.mids[record["mid"]] = seq
        self.sources.add(source)
        if record["op"] == "delete":
            self.deletes.append(seq)
        self.newest = max(self.newest, record["hlc"])

    # --- one record ----------------------------------------------------------------------------

    def version(self, entity: str, project: str, key: str) -> tuple[str, str | None, int | None]:
        """The winning clock at an address, where it lives (``row``, ``tombstone`` or None)
        and the row's local id."""
        row = self.conn.execute(_ROWID[entity], (project, key)).fetchone()
        if row is not None:
            return str(row[1]), "row", int(row[0])
        if not self.tombstones:
            return "", None, None
        row = self.conn.execute(
            "SELECT hlc FROM sync_tombstones WHERE entity = ? AND project = ? AND key = ?",
            (entity, project, key),
        ).fetchone()
        return ("", None, None) if row is None else (str(row[0]), "tombstone", None)

    def apply(
        self, record: dict[str, Any], text: str | None, source: str, result: ApplyResult
    ) -> None:
        """Journal a valid record and apply it if it wins at its address."""
        entity, project, key, hlc = (
            record["entity"],
            record["project"],
            record["key"],
            record["hlc"],
        )
        current, where, rowid = self.version(entity, project, key)
        if entity == "relation" and hlc > current and (missing := self._missing_end(record)):
            # Its memory has not arrived yet (docs/graph.md, "Replication"): the relation waits, unjournaled, and
            # applies when the memory does; it never blocks what comes after it.
            self._hold(
                quarantine.WAITING_ENDPOINT,
                f"memory {missing[:100]!r} of project {project!r} has not arrived yet",
                source,
                text or record,
                result,
                record,
            )
            return
        if hlc <= current:
            self._journal(record, text, source)
            result.stale += 1
        else:
            replaced = None
            if entity == "observation" and rowid is not None:
                replaced = revisions.current_state(self.conn, rowid)
            state = self.rewrite(record, where, rowid)
            self._journal(record, text, source, state)
            if replaced is not None:
                self._kept_revision(record, rowid, *replaced, result)
            result.applied += 1
            kind = {"session": "sessions", "observation": "observations", "prompt": "prompts",
                    "relation": "relations"}  # fmt: skip
            setattr(result, kind[entity], getattr(result, kind[entity]) + 1)
            if entity == "observation":
                self.memories_arrived = True  # a waiting relation may name it
        if entity in ("observation", "prompt") and record["op"] == "upsert":
            # Even a stale upsert: an original's first version is the one its Go copy matches.
            result.copies_retired += self.settle_go_copy(entity, project, key, full_state(record))

    def settle_go_copy(
        self, entity: str, project: str, key: str, state: dict[str, Any] | None
    ) -> int:
        """Retire the copy of a memory that came back through the Go tool, when the row at
        ``key`` (``state``: its arriving or imported version) and another one are one memory
        (:mod:`engram.store.go_copies`); 1 when a copy was retired here."""
        if state is None:
            return 0
        # Imported here, not at the top: `engram search` and `save` never apply anything, and
        # their start-up imports only what they use (tests/semantic/test_lexical_path.py).
        from engram.store import go_copies

        pair = go_copies.copy_pair(self.conn, entity, project, key, state)
        record = pair and go_copies.retire_record(self.conn, entity, project, *pair)
        if not record or self.store.journal.has_mid(self.conn, record["mid"]):
            return 0
        # Journaled as this machine's own write, so it reaches every target the copy went to.
        seq = self.store.journal.append_record(self.conn, record, source="local")
        self.mids[record["mid"]] = seq  # (the batch's mid lookups must see it)
        self.newest = max(self.newest, record["hlc"])
        current, where, rowid = self.version(entity, project, record["key"])
        if record["hlc"] <= current:
            return 0
        self.rewrite(record, where, rowid)
        return 1

    def _kept_revision(
        self,
        record: dict[str, Any],
        rowid: int | None,
        old: dict[str, Any],
        old_hlc: str,
        result: ApplyResult,
    ) -> None:
        """The version a winning record replaced becomes a revision (if its text changed); a
        version this machine wrote, replaced by another machine's, is reported as superseded."""
        new = full_state(record)
        if new is None or record["op"] == "delete":
            return  # a delete is no new version (a hard one took the revisions with it)
        new = {**new, "project": record["project"]}
        if not revisions.keep(self.conn, old, old_hlc, new, record["hlc"]):
            return
        if self.origin is None:  # read once per batch (an import keeps many revisions)
            self.origin = self.store.journal.origin
        mine = self.origin
        if revisions.origin_of(old_hlc) == mine and record["origin"] != mine:
            result.superseded.append(
                {"id": rowid, "project": record["project"], "title": old.get("title"),
                 "new_title": new.get("title"), "by": record["origin"]}
            )  # fmt: skip

    def _missing_end(self, record: dict[str, Any]) -> str | None:
        """The endpoint of a relation that is not at its address in the relation's project
        (a memory of another project never counts: a relation links one project's
        memories)."""
        payload = record["payload"]
        for key in (payload["source_id"], payload["target_id"]):
            if self.conn.execute(_ARRIVED, (record["project"], key)).fetchone() is None:
                return str(key)
        return None

    def rewrite(
        self, record: dict[str, Any], where: str | None, rowid: int | None
    ) -> dict[str, Any] | None:
        """Make the record's address hold what the record says (it has won there); returns
        the state written to the row (``None`` when the row was deleted or only marked)."""
        entity, project, key = record["entity"], record["project"], record["key"]
        if where == "tombstone":
            drop_tombstone(self.conn, entity, project, key)
        state = full_state(record)
        if record["op"] == "delete" and state is None:
            self._delete(record, rowid)
        else:
            assert state is not None
            # The address is the record's: its project, whatever the payload claimed (a
            # payload naming another project never validates).
            state = {**state, "project": project}
            if entity == "relation":
                self._write_relation(
                    {**state, "scope": record["scope"]}, record["hlc"], record["payload"]
                )
            else:
                self._write(entity, state, record["hlc"], rowid)
        self.context.settle()  # what this record changed may be in other memories' context
        return state

    def clear(self, entity: str, project: str, key: str) -> None:
        """Remove whatever an address holds (row or tombstone), for a re-derivation."""
        _, where, rowid = self.version(entity, project, key)
        if where == "tombstone":
            drop_tombstone(self.conn, entity, project, key)
        elif rowid is not None:
            self._remove_row(entity, project, key, rowid)
            self.context.settle()

    def _remove_row(self, entity: str, project: str, key: str, rowid: int) -> None:
        if entity == "session":
            self.conn.execute("DELETE FROM sessions WHERE project = ? AND id = ?", (project, key))
            return
        if entity == "relation":
            ends = self.conn.execute(
                "SELECT source_id, target_id FROM memory_relations WHERE id = ?", (rowid,)
            ).fetchone()
            self.conn.execute("DELETE FROM memory_relations WHERE id = ?", (rowid,))
            self.rescore |= links.ids_of(self.conn, project, tuple(ends))
            return
        if entity == "observation":
            self.rescore |= links.linked_ids(self.conn, [rowid])  # they lose a link
        self._noted(entity, rowid)
        self.index.before_change(TABLES[entity], "id", rowid)
        self.conn.execute(f"DELETE FROM {TABLES[entity]} WHERE id = ?", (rowid,))

    def _noted(self, entity: str, rowid: int) -> None:
        """Note a memory or prompt about to change for session context (engram/store/
        search_context.py), settled once the record is applied."""
        if entity == "observation":
            self.context.observation(rowid)
        elif entity == "prompt":
            self.context.prompt(rowid)

    def stub_session(self, session_id: str, project: str) -> None:
        """A mutation may arrive before its session: hold its place (in the record's own
        project) with a stub at the lowest clock, which the real session then overwrites."""
        address = (project, session_id)
        if address in self.sessions:
            return
        self.sessions.add(address)
        if session_exists(self.conn, project, session_id):
            return
        if session_tombstoned(self.conn, project, session_id):
            return
        insert_stub_session(self.conn, project, session_id, STUB_STARTED_AT)

    def _write(self, entity: str, state: dict[str, Any], hlc: str, rowid: int | None) -> None:
        conn = self.conn
        if entity == "session":
            self.sessions.add((state["project"], state["id"]))
            conn.execute(
                """INSERT INTO sessions(id, project, directory, started_at, ended_at, summary, hlc)
                   VALUES (:id, :project, :directory, :started_at, :ended_at, :summary, :hlc)
                   ON CONFLICT(project, id) DO UPDATE SET directory = excluded.directory,
                       started_at = excluded.started_at, ended_at = excluded.ended_at,
                       summary = excluded.summary, hlc = excluded.hlc""",
                {**state, "hlc": hlc},
            )
            return
        self.stub_session(state["session_id"], state["project"])
        if entity == "prompt":
            values = {**state, "hlc": hlc}
            if rowid is not None:
                self._noted("prompt", rowid)
                self.index.before_change("user_prompts", "id", rowid)
                conn.execute(
                    """UPDATE user_prompts SET session_id = :session_id, content = :content,
                           created_at = :created_at, hlc = :hlc WHERE id = :id""",
                    {**values, "id": rowid},
                )
                return
            cursor = conn.execute(
                """INSERT INTO user_prompts(sync_id, session_id, content, project, created_at, hlc)
                   VALUES (:sync_id, :session_id, :content, :project, :created_at, :hlc)""",
                values,
            )
            fts.add(conn, "user_prompts", int(cursor.lastrowid or 0), state)
            self._noted("prompt", int(cursor.lastrowid or 0))  # memories saved after it
            return
        values = {**state, "hlc": hlc, "normalized_hash": normalized_hash(state["content"]),
                  "pinned": int(state["pinned"])}  # fmt: skip
        if rowid is not None:
            self._noted("observation", rowid)
            self.index.before_change("observations", "id", rowid)
            conn.execute(
                """UPDATE observations SET session_id = :session_id, type = :type,
                       title = :title, content = :content, tool_name = :tool_name,
                       scope = :scope, topic_key = :topic_key,
                       normalized_hash = :normalized_hash, revision_count = :revision_count,
                       duplicate_count = :duplicate_count, last_seen_at = :last_seen_at,
                       created_at = :created_at, updated_at = :updated_at,
                       deleted_at = :deleted_at, hlc = :hlc, pinned = :pinned,
                       importance_override = :importance_override, valid_from = :valid_from,
                       valid_to = :valid_to, delete_reason = :delete_reason,
                       superseded_by = :superseded_by, reviewed_at = :reviewed_at
                   WHERE id = :id""",
                {**values, "id": rowid},
            )
            self.rescore.add(rowid)
            return
        live = state.get("deleted_at") is None
        score = None  # scored at the end (finish) when some relation may name it
        if not self.related:
            changed = max(state["updated_at"] or "", state.get("reviewed_at") or "")
            score = scoring.unlinked_score(
                state["content"], state["topic_key"], state["type"], changed, self.now
            )
        if self.bulk:  # context and index at the end (finish)
            values["search_context"] = ""
        else:
            values["search_context"] = derive_state(conn, state)
        cursor = conn.execute(
            """INSERT INTO observations(sync_id, session_id, type, title, content, tool_name,
                   project, scope, topic_key, normalized_hash, revision_count,
                   duplicate_count, last_seen_at, created_at, updated_at, deleted_at,
                   search_context, hlc, pinned, importance_override, valid_from, valid_to,
                   delete_reason, superseded_by, reviewed_at, importance)
               VALUES (:sync_id, :session_id, :type, :title, :content, :tool_name, :project,
                   :scope, :topic_key, :normalized_hash, :revision_count, :duplicate_count,
                   :last_seen_at, :created_at, :updated_at, :deleted_at, :search_context,
                   :hlc, :pinned, :importance_override, :valid_from, :valid_to,
                   :delete_reason, :superseded_by, :reviewed_at, :importance)""",
            {**values, "importance": score},
        )
        rowid = int(cursor.lastrowid or 0)
        if score is None:
            self.rescore.add(rowid)
        if self.bulk:
            self.index.inserted(rowid)
            if live:
                self.fresh_sessions.add((state["session_id"], state["project"]))
            return
        fts.add(conn, "observations", rowid, values)
        self.context.inserted(rowid, state)  # it may arrive out of order

    def _write_relation(
        self, state: dict[str, Any], hlc: str, payload: dict[str, Any] | None
    ) -> None:
        """A relation's full state, verbatim; payload fields this version does not know are
        kept beside it (docs/graph.md, "Replication")."""
        import orjson

        self.related = True

        unknown = unknown_fields("relation", payload or {})
        extra = orjson.dumps(unknown, option=orjson.OPT_SORT_KEYS).decode() if unknown else None
        self.conn.execute(
            """INSERT INTO memory_relations(sync_id, project, scope, source_id, target_id,
                   relation, reason, evidence, confidence, judgment_status, marked_by_actor,
                   marked_by_kind, marked_by_model, session_id, superseded_at,
                   superseded_by_relation_id, created_at, updated_at, extra, hlc)
               VALUES (:sync_id, :project, :scope, :source_id, :target_id, :relation, :reason,
                   :evidence, :confidence, :judgment_status, :marked_by_actor, :marked_by_kind,
                   :marked_by_model, :session_id, :superseded_at, :superseded_by_relation_id,
                   :created_at, :updated_at, :extra, :hlc)
               ON CONFLICT(project, sync_id) DO UPDATE SET scope = excluded.scope,
                   source_id = excluded.source_id,
                   target_id = excluded.target_id, relation = excluded.relation,
                   reason = excluded.reason, evidence = excluded.evidence,
                   confidence = excluded.confidence, judgment_status = excluded.judgment_status,
                   marked_by_actor = excluded.marked_by_actor,
                   marked_by_kind = excluded.marked_by_kind,
                   marked_by_model = excluded.marked_by_model, session_id = excluded.session_id,
                   superseded_at = excluded.superseded_at,
                   superseded_by_relation_id = excluded.superseded_by_relation_id,
                   created_at = excluded.created_at, updated_at = excluded.updated_at,
                   extra = excluded.extra, hlc = excluded.hlc""",
            {**state, "extra": extra, "hlc": hlc},
        )
        self.rescore |= links.ids_of(
            self.conn, state["project"], (state["source_id"], state["target_id"])
        )

    def _delete(self, record: dict[str, Any], rowid: int | None) -> None:
        """A hard delete, or a soft delete that carries only key fields."""
        entity, project, key, hlc = (
            record["entity"],
            record["project"],
            record["key"],
            record["hlc"],
        )
        payload = record["payload"]
        deleted_at = payload.get("deleted_at") or hlc_text(hlc)
        hard = entity != "observation" or bool(payload.get("hard", False))
        if not hard and rowid is not None:
            self._noted("observation", rowid)
            vector_queue.forget_deleted(self.conn, "id", rowid)
            self.conn.execute(
                "UPDATE observations SET deleted_at = ?, updated_at = ?, hlc = ? WHERE id = ?",
                (deleted_at, deleted_at, hlc, rowid),
            )
            graph_rows.forget(self.conn, [rowid])  # the entity graph holds live memories only
            self.rescore.add(rowid)  # and the memories related to it
            return
        if rowid is not None:
            self._remove_row(entity, project, key, rowid)
        if entity == "observation":
            revisions.forget(self.conn, project, key)  # a hard delete: its past goes too
        put_tombstone(self.conn, entity, project, key, hlc, record["scope"], deleted_at)
        self.tombstones = True


def _loads_or_none(item: Any) -> dict[str, Any] | None:
    """The JSON object in a received item, if there is one (to describe a quarantined
    record by its fields)."""
    import orjson

    try:
        value = orjson.loads(item) if isinstance(item, str | bytes) else item
    except (orjson.JSONDecodeError, UnicodeDecodeError, TypeError):
        return None
    return value if isinstance(value, dict) else None
