"""What every part of the store shares: the database, the journal, the configuration, and the
helpers that read an entity's replicated state and journal it inside a write transaction."""

from __future__ import annotations

import sqlite3
from typing import Any

from engram.config import Config
from engram.record import FIELDS, KEY_FIELD
from engram.store.db import Database
from engram.store.journal import Journal

TABLES = {"session": "sessions", "observation": "observations", "prompt": "user_prompts"}
_STATE_SQL = {
    entity: f"SELECT {', '.join(FIELDS[entity])} FROM {TABLES[entity]} "
    f"WHERE {KEY_FIELD[entity]} = ?"
    for entity in FIELDS
}


def default_session_id(project: str) -> str:
    """The session a save without one joins: ``manual-save-<project>``."""
    return f"manual-save-{project}" if project else "manual-save"


class StoreBase:
    db: Database
    journal: Journal
    config: Config

    # --- replicated state -------------------------------------------------------------------

    @staticmethod
    def _state(conn: sqlite3.Connection, entity: str, key: str) -> dict[str, Any] | None:
        """The entity's replicated fields, in payload order (``None`` if there is no row)."""
        row = conn.execute(_STATE_SQL[entity], (key,)).fetchone()
        return None if row is None else dict(zip(FIELDS[entity], tuple(row), strict=True))

    @staticmethod
    def _current_hlc(conn: sqlite3.Connection, entity: str, key: str) -> str:
        """The clock of the entity's winning mutation ('' when unknown, e.g. a stub session)."""
        row = conn.execute(
            f"SELECT hlc FROM {TABLES[entity]} WHERE {KEY_FIELD[entity]} = ?", (key,)
        ).fetchone()
        if row is not None:
            return str(row[0])
        row = conn.execute(
            "SELECT hlc FROM sync_tombstones WHERE entity = ? AND key = ?", (entity, key)
        ).fetchone()
        return "" if row is None else str(row[0])

    # --- journaling local writes ------------------------------------------------------------

    def _journal_state(
        self, conn: sqlite3.Connection, entity: str, key: str, hlc: str, origin: str
    ) -> int:
        """Journal the entity's state after a local write: an upsert, or for a soft-deleted
        observation a delete that still carries the full state."""
        state = self._state(conn, entity, key)
        assert state is not None, f"{entity} {key} vanished inside its own write"
        op = "upsert"
        if entity == "observation" and state["deleted_at"] is not None:
            op = "delete"
            state = {**state, "hard": False}
        return self.journal.append(
            conn,
            hlc=hlc,
            origin=origin,
            entity=entity,
            key=key,
            op=op,
            project=state["project"],
            scope=state.get("scope", "project"),
            payload=state,
        )

    def _journal_hard_delete(
        self,
        conn: sqlite3.Connection,
        entity: str,
        old: dict[str, Any],
        deleted_at: str,
        hlc: str,
        origin: str,
        *,
        tombstone: bool = True,
    ) -> int:
        """Journal a hard delete of ``old`` (its last state); keep a tombstone unless this is
        only a selection exit of a row that stays here."""
        key_field = KEY_FIELD[entity]
        payload: dict[str, Any] = {key_field: old[key_field]}
        if "session_id" in old:
            payload["session_id"] = old["session_id"]
        payload.update(project=old["project"], deleted_at=deleted_at, hard=True)
        if tombstone:
            conn.execute(
                """INSERT INTO sync_tombstones(entity, key, hlc, project, scope, deleted_at)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT(entity, key) DO UPDATE SET hlc = excluded.hlc,
                       project = excluded.project, scope = excluded.scope,
                       deleted_at = excluded.deleted_at""",
                (
                    entity,
                    old[key_field],
                    hlc,
                    old["project"],
                    old.get("scope", "project"),
                    deleted_at,
                ),
            )
        seq = self.journal.append(
            conn,
            hlc=hlc,
            origin=origin,
            entity=entity,
            key=old[key_field],
            op="delete",
            project=old["project"],
            scope=old.get("scope", "project"),
            payload=payload,
        )
        if tombstone:
            self.journal.blank_deleted_payloads(conn, [seq])
        return seq

    def _journal_exit(
        self, conn: sqlite3.Connection, entity: str, old: dict[str, Any], now: str
    ) -> None:
        """A row leaves the selection it was shared in (scope → personal, project changed):
        targets of the old selection get a delete, ordered before the move's upsert."""
        hlc, origin = self.journal.tick(conn)
        if entity == "observation":
            state = {**old, "deleted_at": now, "updated_at": now, "hard": False}
            self.journal.append(
                conn,
                hlc=hlc,
                origin=origin,
                entity=entity,
                key=old["sync_id"],
                op="delete",
                project=old["project"],
                scope=old["scope"],
                payload=state,
            )
        else:
            self._journal_hard_delete(conn, entity, old, now, hlc, origin, tombstone=False)
