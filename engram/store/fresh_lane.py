"""The fresh lane of a bulk apply: records that create a row at an empty address, written a
run at a time with a few statements instead of a dozen per record.

In an import's chunk almost every record is the first version of a session, memory or prompt
this store has never seen. For such a record the per-record rules of
:mod:`engram.store.replication` come to one outcome known in advance: its mid is not held, its
clock is within the drift, nothing (row or tombstone) is at its address so it wins there, it is
not one half of a Go copy pair (:mod:`engram.store.go_copies`), and it replaces no earlier text
(no revision). :meth:`FreshLane.plan` finds those records with a few set-wise lookups for the
whole batch; the batch then buffers each run of them and :meth:`FreshLane.flush` writes the run
with one ``executemany`` per table — rows, stub sessions, prompt index entries, journal rows —
before any other record is taken (which goes through the per-record path as before). So the
journal, the rows and every later record see exactly what applying the batch one record at a
time in its order would have written; only the statements differ.

A record qualifies when, in the batch, it is the first at its address and the first with its
mid (a later record at the same address or with the same mid then sees it written), it is an
upsert of a session, memory or prompt, and, for memories and prompts, its Go-derived key is not
its own key and names no row or batch record (else the copy rule must look).
"""

from __future__ import annotations

import operator
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engram.record import STATE_FIELDS, full_state, hlc_bound, is_hard_delete, verbatim_state
from engram.store import edit_lane, scoring
from engram.store.go_copies import derived_key
from engram.store.identity import STUB_HLC
from engram.store.journal import ELIDED, elides_verbatim, state_text
from engram.text import normalized_hash

if TYPE_CHECKING:
    from engram.store.models import ApplyResult
    from engram.store.replication import _ApplyBatch

#: The lookup tables of each entity this lane writes: (table, key column).
_ADDRESS = {
    "session": ("sessions", "id"),
    "observation": ("observations", "sync_id"),
    "prompt": ("user_prompts", "sync_id"),
}
_KINDS = {"session": "sessions", "observation": "observations", "prompt": "prompts"}
_PART = 500
#: How a record takes a lane: the state a fresh record writes, or an edit's plan.
Planned = dict[str, Any] | edit_lane.Edit

_INSERT_SESSION = """INSERT INTO sessions(id, project, directory, started_at, ended_at, summary,
                         hlc)
                     VALUES (?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT(project, id) DO UPDATE SET directory = excluded.directory,
                         started_at = excluded.started_at, ended_at = excluded.ended_at,
                         summary = excluded.summary, hlc = excluded.hlc"""
_INSERT_PROMPT = """INSERT INTO user_prompts(sync_id, session_id, content, project, created_at,
                        hlc) VALUES (?, ?, ?, ?, ?, ?)"""
#: A new memory's row: its replicated state (:func:`full_state`'s fields), then what this store
#: derives from it.
_MEMORY_STATE = operator.itemgetter(*STATE_FIELDS["observation"])
_INSERT_OBSERVATION = f"""INSERT INTO observations({", ".join(STATE_FIELDS["observation"])},
                              normalized_hash, search_context, hlc, importance)
                          VALUES ({", ".join("?" * (len(STATE_FIELDS["observation"]) + 4))})"""
_INSERT_JOURNAL = """INSERT INTO sync_journal(mid, hlc, origin, entity, key, op, project, scope,
                         record, source, recorded_at)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
_JOURNAL_HEADER = operator.itemgetter(
    "mid", "hlc", "origin", "entity", "key", "op", "project", "scope"
)
_INSERT_STUB = """INSERT OR IGNORE INTO sessions(id, project, directory, started_at, hlc)
                  VALUES (?, ?, '', ?, ?)"""


class FreshLane:
    """Buffers the fresh records of one bulk batch and writes each run of them set-wise."""

    def __init__(self, batch: _ApplyBatch, source: str, result: ApplyResult) -> None:
        self.batch = batch
        self.conn = batch.conn
        self.source = source
        self.result = result
        #: The run waiting to be written: (record, exact text or None, how it takes its lane).
        self._run: list[tuple[dict[str, Any], str | None, Planned]] = []
        #: The memories the run writes, ``(project, key)``.
        self._written: set[tuple[str, str]] = set()
        #: The states :func:`verbatim_state` gave (their records' payloads), by ``id`` (each
        #: held here, so that no other object can take its id while the batch runs).
        self._verbatim: dict[int, dict[str, Any]] = {}
        #: Each new memory's score (when no relation may name it), at the batch's instant.
        self._score = scoring.unlinked_scorer(batch.now)

    # --- which records qualify -------------------------------------------------------------

    def plan(self, records: Sequence[dict[str, Any] | None]) -> list[Planned | None]:
        """For each record (``None``: invalid), how it takes a lane — the state it writes when
        it takes the fresh lane, an :class:`~engram.store.edit_lane.Edit` for the edit lane —
        else ``None``. Every address, mid, derived key and held row is looked up once here."""
        batch = self.batch
        count = len(records)
        plans: list[Planned | None] = [None] * count
        states: list[dict[str, Any] | None] = [None] * count
        derived: list[str | None] = [None] * count
        addresses: list[tuple[str, str, str] | None] = [None] * count
        seen_mids: set[str] = set()
        seen: set[tuple[str, str, str]] = set()  # every address a record of the batch names
        repeated: set[tuple[str, str, str]] = set()  # those that more than one record names
        # Per record: 0 no lane, 1 the fresh lane if its address is free, 2 also the edit lane
        # if a memory is there, 3 only the edit lane (a soft delete), 4 the edit lane after
        # the batch's earlier records at its address (if each of those took a lane).
        lane: list[int] = [0] * count
        edited: list[tuple[str, str]] = []  # (project, key) of the records lanes 2-4 may take
        wanted: dict[tuple[str, str], set[str]] = defaultdict(set)
        # (Validated records: an hlc at or below the bound is within the drift, check_clock's
        # rule as one string comparison.)
        bound = hlc_bound(batch.now_ms, batch.max_drift_ms)
        held_mids = batch.mids
        verbatim = self._verbatim
        for i, record in enumerate(records):
            if record is None:
                continue
            entity, project, key, mid = (
                record["entity"], record["project"], record["key"], record["mid"]
            )  # fmt: skip
            addresses[i] = address = (entity, project, key)
            again = address in seen
            if again:
                repeated.add(address)
            else:
                seen.add(address)
            if (
                mid in seen_mids
                or held_mids.get(mid) is not None
                or entity not in _ADDRESS
                or record["hlc"] > bound
            ):
                seen_mids.add(mid)
                continue
            seen_mids.add(mid)
            if record["op"] == "upsert":
                if again:
                    if entity != "observation":
                        continue
                    lane[i] = 4
                else:
                    lane[i] = 2 if entity == "observation" else 1
            elif is_hard_delete(record):
                continue
            else:
                lane[i] = 4 if again else 3
            # (None: a soft delete of key fields only.) Its project is the record's: a payload
            # naming another one never validates, and one naming none gets the record's.
            state = states[i] = verbatim_state(record)
            if state is None:
                state = states[i] = full_state(record)
            else:  # (its journal row's elision check is the record's own text: _journal)
                verbatim[id(state)] = state
            keys = wanted[(entity, project)]
            keys.add(key)
            if state is not None and entity != "session":
                keys.add(copy_key := derived_key(entity, state))
                derived[i] = copy_key
            if lane[i] > 1:
                edited.append((project, key))
        taken = self._taken(wanted)
        held = self._held(edited, taken)
        # A Go-derived key that names a row, a tombstone or any address of the batch.
        named = seen | taken
        #: The clock of each address named more than once after the batch's records so far,
        #: while each of them took a lane (so that nothing but the lanes wrote there).
        clocks: dict[tuple[str, str, str], str] = {}
        for i, place in enumerate(addresses):
            if place is None:
                continue
            way = lane[i]
            other = derived[i]
            if not way or (other is not None and (
                other == place[2] or (place[0], place[1], other) in named
            )):  # fmt: skip
                if place in repeated:
                    clocks.pop(place, None)  # one by one (the Go copy rule must look, say)
                continue
            planned: Planned | None = None
            if way == 4:
                clock = clocks.get(place)
                if clock is not None:
                    record = records[i]
                    assert record is not None
                    planned = edit_lane.plan(record, edit_lane.Held(0, clock, None), states[i])
            elif place not in taken:
                if way < 3:
                    planned = states[i]
            elif way > 1 and edit_lane.qualifies(found := held.get((place[1], place[2]))):
                assert found is not None
                record = records[i]
                assert record is not None
                planned = edit_lane.plan(record, found, states[i])
            if planned is None or (
                planned.__class__ is edit_lane.Edit and not edit_lane.qualifies(planned.held)
            ):
                if place in repeated:
                    clocks.pop(place, None)
                continue
            plans[i] = planned
            if place in repeated:  # (only a later record at the address reads its clock)
                # An edit that loses leaves the row's clock, not its own, for the next record.
                held_hlc = planned.held.hlc if isinstance(planned, edit_lane.Edit) else ""
                record = records[i]
                assert record is not None
                clocks[place] = max(clocks.get(place, ""), held_hlc, record["hlc"])
        return plans

    def _held(
        self, edited: list[tuple[str, str]], taken: set[tuple[str, str, str]]
    ) -> dict[tuple[str, str], edit_lane.Held]:
        """The rows (as they are before the batch) of the memories the edit lane may take
        (``edited``: their project and key)."""
        keys: dict[str, list[str]] = defaultdict(list)
        for project, key in edited:
            if ("observation", project, key) in taken:
                keys[project].append(key)
        held: dict[tuple[str, str], edit_lane.Held] = {}
        for project, wanted in keys.items():
            rows = edit_lane.held_rows(self.conn, project, sorted(wanted))
            held.update(((project, key), row) for key, row in rows.items())
        return held

    def _taken(self, wanted: dict[tuple[str, str], set[str]]) -> set[tuple[str, str, str]]:
        """The addresses among ``wanted`` that hold a row, or a tombstone."""
        taken: set[tuple[str, str, str]] = set()
        for (entity, project), keys in wanted.items():
            table, column = _ADDRESS[entity]
            found = self._present(table, column, "", project, keys)
            if self.batch.tombstones:
                found |= self._present("sync_tombstones", "key", entity, project, keys)
            taken.update((entity, project, key) for key in found)
        return taken

    def _present(
        self, table: str, column: str, entity: str, project: str, keys: set[str]
    ) -> set[str]:
        """Which of ``keys`` have a row in ``table`` for ``project`` (tombstones: of
        ``entity``). Joined from the keys so that each is looked up through the address's
        unique index (see :func:`engram.sync.git.scope.personal_sql`)."""
        found: set[str] = set()
        ordered = sorted(keys)
        which = "AND t.entity = ?" if entity else ""
        for start in range(0, len(ordered), _PART):
            part = ordered[start : start + _PART]
            values = ", ".join("(?)" for _ in part)
            rows = self.conn.execute(
                f"""WITH wanted(key) AS (VALUES {values})
                    SELECT t.{column} FROM wanted CROSS JOIN {table} t
                      ON t.{column} = wanted.key AND t.project = ? {which}""",
                [*part, project, *([entity] if entity else [])],
            )
            found.update(row[0] for row in rows)
        return found

    # --- writing a run ---------------------------------------------------------------------

    def add(self, record: dict[str, Any], text: str | None, planned: Planned) -> None:
        """Buffer a record that takes a lane (as :meth:`plan` planned it)."""
        if record["entity"] == "observation":
            address = (record["project"], record["key"])
            if isinstance(planned, edit_lane.Edit) and address in self._written:
                # A memory the run writes is edited in the next run: the run's journal rows
                # are written last, and the row's state at the earlier record must be kept
                # (the journal's kept-state trigger) when the edit moves the row on.
                self.flush()
            self._written.add(address)
        self._run.append((record, text, planned))

    def flush(self) -> None:
        """Write the buffered run: what applying its records one by one would write."""
        run, self._run = self._run, []
        self._written.clear()
        if not run:
            return
        batch, conn = self.batch, self.conn
        # The run's records by what they write, in one pass (its order kept in each).
        sessions: list[tuple[dict[str, Any], dict[str, Any]]] = []
        prompts: list[tuple[dict[str, Any], dict[str, Any]]] = []
        memories: list[tuple[dict[str, Any], dict[str, Any]]] = []
        edits: list[tuple[dict[str, Any], edit_lane.Edit]] = []
        named: list[dict[str, Any]] = []  # the states that name a session
        for record, _, planned in run:
            if isinstance(planned, dict):
                entity = record["entity"]
                if entity == "observation":
                    memories.append((record, planned))
                    named.append(planned)
                elif entity == "prompt":
                    prompts.append((record, planned))
                    named.append(planned)
                else:
                    sessions.append((record, planned))
            else:
                edits.append((record, planned))
                if planned.wins and planned.state is not None:
                    named.append(planned.state)
        if sessions:
            conn.executemany(
                _INSERT_SESSION,
                [(s["id"], s["project"], s["directory"], s["started_at"], s["ended_at"],
                  s["summary"], r["hlc"]) for r, s in sessions],
            )  # fmt: skip
            batch.sessions.update((s["project"], s["id"]) for _, s in sessions)
        self._stub_sessions(named)
        if prompts:
            self._prompts(prompts)
        if memories:
            self._memories(memories)
        if edits:
            edit_lane.write(batch, edits, self.result)
        self._journal(run)

    def _stub_sessions(self, states: list[dict[str, Any]]) -> None:
        """A stub for every session a run's memory or prompt names that is not here (and was
        not deleted here): :meth:`_ApplyBatch.stub_session`, for the run at once."""
        batch = self.batch
        missing = {(s["project"], s["session_id"]) for s in states} - batch.sessions
        if not missing:
            return
        present: set[tuple[str, str]] = set()
        # A session that is here needs no lookup: the stub's INSERT OR IGNORE leaves it as
        # it is. Only a tombstone (a session deleted here) must be looked for, when any may be.
        if batch.tombstones:
            by_project: dict[str, set[str]] = defaultdict(set)
            for project, session in missing:
                by_project[project].add(session)
            for project, ids in by_project.items():
                found = self._present("sync_tombstones", "key", "session", project, ids)
                present.update((project, session) for session in found)
        from engram.store.replication import STUB_STARTED_AT

        self.conn.executemany(
            _INSERT_STUB,
            [(session, project, STUB_STARTED_AT, STUB_HLC)
             for project, session in sorted(missing - present)],
        )  # fmt: skip
        batch.sessions |= missing

    def _inserted_ids(self, cursor: sqlite3.Cursor, count: int) -> range:
        """The rowids ``cursor``'s ``executemany`` of ``count`` inserts gave (AUTOINCREMENT hands
        out consecutive ids inside one write transaction)."""
        # Never short (every address was free), but a short count would misfile every id.
        if cursor.rowcount != count:
            raise RuntimeError(f"inserted {cursor.rowcount} rows of {count}")
        last = int(self.conn.execute("SELECT last_insert_rowid()").fetchone()[0])
        return range(last - count + 1, last + 1)

    def _prompts(self, prompts: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        conn, batch = self.conn, self.batch
        cursor = conn.executemany(
            _INSERT_PROMPT,
            [(s["sync_id"], s["session_id"], s["content"], s["project"], s["created_at"],
              r["hlc"]) for r, s in prompts],
        )  # fmt: skip
        # Indexed at the batch's end, in rowid order with the rest (fts.DeferredIndex).
        # The memories a prompt leads to took it into their context when the batch foresaw
        # them (batch.foreseen); a session held before is derived again at the batch's end.
        batch.index.inserted_prompts(self._inserted_ids(cursor, len(prompts)))
        if batch.foreseen is None:  # nothing foreseen: the batch's end derives the sessions
            batch.fresh_sessions.update((s["session_id"], s["project"]) for _, s in prompts)

    def _memories(self, memories: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """Insert the run's new memories, each with the session context the batch foresaw
        (checked at the batch's end where it may not hold: ``Foreseen``)."""
        conn, batch = self.conn, self.batch
        if batch.foreseen is None:  # nothing foreseen: the batch's end derives the sessions
            batch.fresh_sessions.update((s["session_id"], s["project"]) for _, s in memories)
        contexts = batch.foreseen.contexts if batch.foreseen is not None else {}
        none: dict[str, str] = {}
        score = self._score if not batch.related else None
        rows = []
        for record, s in memories:
            content = s["content"]
            rows.append(
                (*_MEMORY_STATE(s),  # (the pin, a bool, is bound as the 0 or 1 it is stored as)
                 normalized_hash(content),
                 contexts.get(s["project"], none).get(s["sync_id"], ""),
                 record["hlc"],
                 # scored at the batch's end when some relation may name it
                 None if score is None else score(
                     content, s["topic_key"], s["type"],
                     max(s["updated_at"] or "", s["reviewed_at"] or ""),
                 ))
            )  # fmt: skip
        cursor = conn.executemany(_INSERT_OBSERVATION, rows)
        ids = self._inserted_ids(cursor, len(memories))
        inserted = batch.index.inserted  # indexed with its context at the batch's end
        for rowid in ids:
            inserted(rowid)
        if score is None:
            batch.rescore.update(ids)
        batch.memories_arrived = True  # a waiting relation may name one

    def _journal(self, run: list[tuple[dict[str, Any], str | None, Planned]]) -> None:
        """Journal the run in its order, each record that won elided when its exact text is
        what its row rebuilds to (as :meth:`_ApplyBatch._journal` does one at a time)."""
        import orjson

        batch, result = self.batch, self.result
        tail = (self.source, batch.now)
        verbatim = self._verbatim
        rows = []
        won: list[bool] = []
        state: dict[str, Any] | None
        for record, text, planned in run:
            if isinstance(planned, dict):
                state, wins = planned, True
            else:
                state, wins = (planned.state, True) if planned.wins else (None, False)
            if state is not None and (
                elides_verbatim(record, text, state)
                if verbatim.get(id(state)) is state
                else state_text(record, state)
                == (text if text is not None else orjson.dumps(record).decode())
            ):
                stored = ELIDED
            else:
                stored = text if text is not None else orjson.dumps(record).decode()
            won.append(wins)
            rows.append((*_JOURNAL_HEADER(record), stored, *tail))
        cursor = self.conn.executemany(_INSERT_JOURNAL, rows)
        seqs = self._inserted_ids(cursor, len(run))
        # (Each row: mid, hlc, origin, entity, key, op, ...)
        batch.mids.update(zip([row[0] for row in rows], seqs, strict=True))
        # (A delete's source holds it: no delivery row.)
        batch.deletes.extend(seq for seq, row in zip(seqs, rows, strict=True) if row[5] == "delete")
        applied = Counter(row[3] for row, wins in zip(rows, won, strict=True) if wins)
        for entity, count in applied.items():
            kind = _KINDS[entity]
            setattr(result, kind, getattr(result, kind) + count)
        result.stale += len(run) - sum(applied.values())
        batch.newest = max(batch.newest, max(row[1] for row in rows))
        batch.sources.add(self.source)
        result.applied += sum(applied.values())
