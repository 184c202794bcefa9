"""Applying mutations that arrive from other replicas (git chunks, the cloud).

Last writer wins per entity by ``hlc`` (string order; ties broken by origin inside the hlc). A
payload is written verbatim — no ``now()``, no counter bumps — so every replica ends with the same
bytes. Hard deletes leave a tombstone so an older upsert cannot resurrect the row. Every received
mutation is journaled (so it can be relayed), but never sent back where it came from.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

import orjson

from engram.errors import InvalidMutationError
from engram.record import EPOCH_TEXT, KEY_FIELD, full_state, hlc_text, validate_record
from engram.store import fts, vectors
from engram.store.base import TABLES, StoreBase
from engram.store.models import ApplyResult
from engram.store.observations import session_context
from engram.text import normalized_hash
from engram.times import now_text

STUB_STARTED_AT = EPOCH_TEXT


def parse_record(item: dict[str, Any] | str | bytes, index: int | None = None):
    """``(record, exact_text)`` from a dict or the JSON text of one mutation."""
    if isinstance(item, dict):
        return validate_record(item, index), None
    text = item.decode("utf-8") if isinstance(item, bytes) else item
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        where = f"mutation[{index}]: " if index is not None else ""
        raise InvalidMutationError(f"{where}invalid JSON ({exc})") from None
    return validate_record(record, index), text


class ReplicationMixin(StoreBase):
    def apply_mutations(
        self, records: Iterable[dict[str, Any] | str | bytes], *, source: str
    ) -> ApplyResult:
        """Apply a batch of mutations in one transaction (all or nothing).

        ``source`` names the target they arrived through (``git:<dir>``, ``cloud:<server>``):
        that target is recorded as already holding them. Raises
        :class:`~engram.errors.InvalidMutationError` before writing anything if any record is
        malformed.
        """
        if not source or source == "local":
            raise ValueError("source must name the target the mutations arrived through")
        parsed = [parse_record(item, i) for i, item in enumerate(records)]
        result = ApplyResult()
        if not parsed:
            return result
        newest = max(record["hlc"] for record, _ in parsed)
        with self.db.write() as conn:
            batch = _ApplyBatch(self, conn, source)
            for record, text in parsed:
                batch.apply(record, text, result)
            batch.finish()
            self.journal.observe(conn, newest)
        return result


class _ApplyBatch:
    """Applying one batch: every mutation costs a duplicate check, a clock lookup, its journal
    row and its state write; deliveries are recorded together at the end."""

    def __init__(self, store: ReplicationMixin, conn: sqlite3.Connection, source: str) -> None:
        self.store = store
        self.conn = conn
        self.source = source
        self.delivered: list[int] = []
        self.sessions: set[str] = set()  # session ids known to exist (or be tombstoned)
        self.index = fts.DeferredIndex(conn)
        self.now = now_text()

    def finish(self) -> None:
        self.index.flush()
        self.conn.executemany(
            "INSERT OR IGNORE INTO sync_delivery(target, seq, delivered_at) VALUES (?, ?, ?)",
            [(self.source, seq, self.now) for seq in self.delivered],
        )
        self.store.journal.blank_deleted_payloads(self.conn, self.delivered)

    def _journal(self, record: dict[str, Any], text: str | None) -> None:
        seq = self.store.journal.append_record(
            self.conn,
            record,
            source=self.source,
            text=text,
            record_delivery=False,
            recorded_at=self.now,
        )
        self.delivered.append(seq)

    def _version(self, entity: str, key: str) -> tuple[str, str | None]:
        """The winning clock of an entity and where it lives: ``row``, ``tombstone`` or None."""
        row = self.conn.execute(
            f"SELECT hlc FROM {TABLES[entity]} WHERE {KEY_FIELD[entity]} = ?", (key,)
        ).fetchone()
        if row is not None:
            return str(row[0]), "row"
        row = self.conn.execute(
            "SELECT hlc FROM sync_tombstones WHERE entity = ? AND key = ?", (entity, key)
        ).fetchone()
        return ("", None) if row is None else (str(row[0]), "tombstone")

    def apply(self, record: dict[str, Any], text: str | None, result: ApplyResult) -> None:
        known = self.conn.execute(
            "SELECT seq FROM sync_journal WHERE mid = ?", (record["mid"],)
        ).fetchone()
        if known is not None:
            self.delivered.append(int(known[0]))
            result.duplicates += 1
            return
        entity, key, hlc = record["entity"], record["key"], record["hlc"]
        current, where = self._version(entity, key)
        self._journal(record, text)
        if hlc <= current:
            result.stale += 1
            return
        if where == "tombstone":
            self.conn.execute(
                "DELETE FROM sync_tombstones WHERE entity = ? AND key = ?", (entity, key)
            )
        state = full_state(record)
        if record["op"] == "delete" and state is None:
            self._delete(record, exists=where == "row")
        else:
            assert state is not None
            self._write(entity, state, hlc, exists=where == "row")
        result.applied += 1
        attr = {"session": "sessions", "observation": "observations", "prompt": "prompts"}[entity]
        setattr(result, attr, getattr(result, attr) + 1)

    def _stub_session(self, session_id: str, project: str) -> None:
        """A mutation may arrive before its session: hold its place with a stub at the lowest
        clock, which the real session then overwrites."""
        if session_id in self.sessions:
            return
        self.sessions.add(session_id)
        if self.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
            return
        if self.conn.execute(
            "SELECT 1 FROM sync_tombstones WHERE entity = 'session' AND key = ?", (session_id,)
        ).fetchone():
            return
        self.conn.execute(
            "INSERT INTO sessions(id, project, directory, started_at, hlc) VALUES (?, ?, '', ?, '')",
            (session_id, project, STUB_STARTED_AT),
        )

    def _write(self, entity: str, state: dict[str, Any], hlc: str, *, exists: bool) -> None:
        conn = self.conn
        if entity == "session":
            self.sessions.add(state["id"])
            conn.execute(
                """INSERT INTO sessions(id, project, directory, started_at, ended_at, summary, hlc)
                   VALUES (:id, :project, :directory, :started_at, :ended_at, :summary, :hlc)
                   ON CONFLICT(id) DO UPDATE SET project = excluded.project,
                       directory = excluded.directory, started_at = excluded.started_at,
                       ended_at = excluded.ended_at, summary = excluded.summary,
                       hlc = excluded.hlc""",
                {**state, "hlc": hlc},
            )
            return
        self._stub_session(state["session_id"], state["project"])
        if entity == "prompt":
            if exists:
                self.index.before_change("user_prompts", "sync_id", state["sync_id"])
            cursor = conn.execute(
                """INSERT INTO user_prompts(sync_id, session_id, content, project, created_at, hlc)
                   VALUES (:sync_id, :session_id, :content, :project, :created_at, :hlc)
                   ON CONFLICT(sync_id) DO UPDATE SET session_id = excluded.session_id,
                       content = excluded.content, project = excluded.project,
                       created_at = excluded.created_at, hlc = excluded.hlc""",
                {**state, "hlc": hlc},
            )
            if not exists:
                fts.add(conn, "user_prompts", int(cursor.lastrowid or 0), state)
            return
        values = {**state, "hlc": hlc, "normalized_hash": normalized_hash(state["content"])}
        if exists:
            self.index.before_change("observations", "sync_id", state["sync_id"])
            conn.execute(
                """UPDATE observations SET session_id = :session_id, type = :type,
                       title = :title, content = :content, tool_name = :tool_name,
                       project = :project, scope = :scope, topic_key = :topic_key,
                       normalized_hash = :normalized_hash, revision_count = :revision_count,
                       duplicate_count = :duplicate_count, last_seen_at = :last_seen_at,
                       created_at = :created_at, updated_at = :updated_at,
                       deleted_at = :deleted_at, hlc = :hlc
                   WHERE sync_id = :sync_id""",
                values,
            )
            return
        values["search_context"] = session_context(conn, state["session_id"], state["created_at"])
        cursor = conn.execute(
            """INSERT INTO observations(sync_id, session_id, type, title, content, tool_name,
                   project, scope, topic_key, normalized_hash, revision_count,
                   duplicate_count, last_seen_at, created_at, updated_at, deleted_at,
                   search_context, hlc)
               VALUES (:sync_id, :session_id, :type, :title, :content, :tool_name, :project,
                   :scope, :topic_key, :normalized_hash, :revision_count, :duplicate_count,
                   :last_seen_at, :created_at, :updated_at, :deleted_at, :search_context,
                   :hlc)""",
            values,
        )
        fts.add(conn, "observations", int(cursor.lastrowid or 0), values)

    def _delete(self, record: dict[str, Any], *, exists: bool) -> None:
        """A hard delete, or a soft delete that carries only key fields."""
        entity, key, hlc = record["entity"], record["key"], record["hlc"]
        payload = record["payload"]
        deleted_at = payload.get("deleted_at") or hlc_text(hlc)
        hard = entity != "observation" or bool(payload.get("hard", False))
        if not hard and exists:
            vectors.forget_deleted(self.conn, "sync_id", key)
            self.conn.execute(
                "UPDATE observations SET deleted_at = ?, updated_at = ?, hlc = ? WHERE sync_id = ?",
                (deleted_at, deleted_at, hlc, key),
            )
            return
        if exists:
            if entity != "session":
                self.index.before_change(TABLES[entity], "sync_id", key)
            self.conn.execute(f"DELETE FROM {TABLES[entity]} WHERE {KEY_FIELD[entity]} = ?", (key,))
        self.conn.execute(
            """INSERT INTO sync_tombstones(entity, key, hlc, project, scope, deleted_at)
               VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT(entity, key) DO UPDATE SET hlc = excluded.hlc,
                   project = excluded.project, scope = excluded.scope,
                   deleted_at = excluded.deleted_at""",
            (
                entity,
                key,
                hlc,
                payload.get("project") or record["project"],
                record["scope"],
                deleted_at,
            ),
        )
