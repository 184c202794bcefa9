"""What every part of the store shares: the database, the journal, the configuration, and the
helpers that read an entity's replicated state and journal it inside a write transaction."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Protocol

from engram.record import KEY_FIELD, STATE_FIELDS, compact_payload, moved_key
from engram.settings import Config
from engram.store import fts
from engram.store.db import Database
from engram.store.journal import ENTITY_TABLES, Journal

if TYPE_CHECKING:
    from collections.abc import Iterable

    from engram.store.access import AccessLog
    from engram.store.models import Observation, Prompt, Session

#: Every replicated entity's table (relations are journaled with their text: see
#: _journal_state; the others elided, engram/store/journal.py).
TABLES = {**ENTITY_TABLES, "relation": "memory_relations"}
_STATE_SQL = {
    entity: f"SELECT {', '.join(STATE_FIELDS[entity])} FROM {TABLES[entity]} "
    f"WHERE project = ? AND {KEY_FIELD[entity]} = ?"
    for entity in STATE_FIELDS
}
#: What journaling a row's state needs to know of it: its clock, scope and deletion.
_HEAD_SQL = {
    "session": "SELECT hlc, 'project', NULL FROM sessions WHERE project = ? AND id = ?",
    "observation": "SELECT hlc, scope, deleted_at FROM observations WHERE project = ? AND sync_id = ?",
    "prompt": "SELECT hlc, 'project', NULL FROM user_prompts WHERE project = ? AND sync_id = ?",
}


def put_tombstone(
    conn: sqlite3.Connection,
    entity: str,
    project: str,
    key: str,
    hlc: str,
    scope: str,
    deleted_at: str | None,
) -> None:
    """Remember that ``(project, key)`` was hard-deleted at ``hlc`` (older upserts lose)."""
    conn.execute(
        """INSERT INTO sync_tombstones(entity, project, key, hlc, scope, deleted_at)
           VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT(entity, project, key) DO UPDATE SET hlc = excluded.hlc,
               scope = excluded.scope, deleted_at = excluded.deleted_at""",
        (entity, project, key, hlc, scope, deleted_at),
    )


def drop_tombstone(conn: sqlite3.Connection, entity: str, project: str, key: str) -> None:
    """A newer write revives ``(project, key)``."""
    conn.execute(
        "DELETE FROM sync_tombstones WHERE entity = ? AND project = ? AND key = ?",
        (entity, project, key),
    )


def default_session_id(project: str) -> str:
    """The session a save without one joins: ``manual-save-<project>``."""
    return f"manual-save-{project}" if project else "manual-save"


class StoreParts(Protocol):
    """What the store's mixins need from each other: each method is defined by one mixin and
    called by others, and :class:`engram.store.Store` has them all. Type checkers read every
    mixin against this (through :class:`StoreBase`) instead of each call silencing them."""

    db: Database
    journal: Journal
    config: Config
    access: AccessLog

    def _write_project(self, project: str, session_id: str | None) -> str: ...

    def _ensure_session(
        self, conn: sqlite3.Connection, session_id: str, project: str, directory: str = ""
    ) -> bool: ...

    def _delete_session_rows(
        self, conn: sqlite3.Connection, old: dict[str, Any]
    ) -> tuple[int, int]: ...

    def _settle_go_copies(
        self, conn: sqlite3.Connection, rows: Iterable[tuple[str, str, str, dict[str, Any]]]
    ) -> int: ...

    @staticmethod
    def _missing(conn: sqlite3.Connection, oid: int, verb: str) -> Exception: ...

    def get_observation(
        self, observation_id: Any, *, include_deleted: bool = False, record_access: bool = False
    ) -> Observation: ...

    def update_observation(
        self,
        observation_id: Any,
        *,
        title: str | None = None,
        content: str | None = None,
        type: str | None = None,
        project: str | None = None,
        scope: str | None = None,
        topic_key: str | None = None,
        tool_name: str | None = None,
        allow_secrets: bool = False,
        warnings: list[str] | None = None,
        importance: float | str | None = None,
        pinned: bool | None = None,
        valid_from: str | None = None,
        valid_to: str | None = None,
    ) -> Observation: ...

    def delete_observation(
        self, observation_id: Any, *, hard: bool = False, reason: str | None = None
    ) -> Observation: ...

    def pinned_observations(
        self, project: str | None = None, *, scope: str | None = None, limit: Any = 20
    ) -> list[Observation]: ...

    def annotate_results(
        self, results: list[Observation], *, check_conflicts: bool = False
    ) -> list[Observation]: ...

    def _observation_filters(
        self,
        project: str | None,
        scope: str | None,
        type: str | None,
        since: str | None,
        until: str | None,
        alias: str = "o",
        *,
        include_deleted: bool = False,
    ) -> tuple[list[str], list[Any]]: ...

    def get_session(self, session_id: str, *, project: str | None = None) -> Session: ...

    def recent_sessions(
        self,
        project: str | None = None,
        limit: int = 5,
        *,
        since: str | None = None,
        until: str | None = None,
        offset: int = 0,
    ) -> list[Session]: ...

    def recent_prompts(
        self, project: str | None = None, limit: int = 20, *, offset: int = 0
    ) -> list[Prompt]: ...

    def recent_observations(
        self,
        project: str | None = None,
        scope: str | None = None,
        limit: int = 20,
        *,
        type: str | None = None,
        since: str | None = None,
        until: str | None = None,
        offset: int = 0,
    ) -> list[Observation]: ...


class StoreBase(StoreParts):
    db: Database
    journal: Journal
    config: Config
    access: AccessLog
    known_projects: set[str]

    # --- replicated state -------------------------------------------------------------------

    @staticmethod
    def _state(
        conn: sqlite3.Connection, entity: str, project: str, key: str
    ) -> dict[str, Any] | None:
        """The replicated fields of ``(project, key)``, in payload order (``None`` if there is
        no row)."""
        row = conn.execute(_STATE_SQL[entity], (project, key)).fetchone()
        if row is None:
            return None
        state = dict(zip(STATE_FIELDS[entity], tuple(row), strict=True))
        if entity == "observation":
            state["pinned"] = bool(state["pinned"])  # stored as 0/1, replicated as a boolean
        if entity == "relation":
            # Fields a newer version wrote travel on with this replica's edits (docs/graph.md,
            # "Replication"); known fields always win over a stale copy.
            extra = conn.execute(
                "SELECT extra, scope FROM memory_relations WHERE project = ? AND sync_id = ?",
                (project, key),
            ).fetchone()
            if extra[0]:
                import orjson  # (relations only: a plain save or search never loads it)

                unknown = orjson.loads(extra[0])
                state.update((k, v) for k, v in unknown.items() if k not in state)
            state["scope"] = extra[1]
        return state

    # --- journaling local writes ------------------------------------------------------------

    def _journal_state(
        self,
        conn: sqlite3.Connection,
        entity: str,
        project: str,
        key: str,
        hlc: str,
        origin: str,
        *,
        scope: str | None = None,
        deleted: bool = False,
    ) -> int:
        """Journal the entity's state after a local write (its row, now stamped ``hlc``): an
        upsert, or for a soft-deleted observation a delete that still carries the full state.
        Sessions, memories and prompts are stored elided (engram/store/journal.py: the row is
        the payload); relations, whose payload also carries fields a newer version wrote (the
        row's ``extra``), keep their text.

        ``scope`` (with ``deleted``): what the caller just wrote, which saves reading it back."""
        if entity not in ENTITY_TABLES:
            return self._journal_text(conn, entity, project, key, hlc, origin)
        if scope is None:
            row = conn.execute(_HEAD_SQL[entity], (project, key)).fetchone()
            assert row is not None, f"{entity} {project}/{key} vanished inside its own write"
            assert row[0] == hlc, f"{entity} {project}/{key} is not stamped with its record's hlc"
            scope, deleted = row[1], row[2] is not None
        return self.journal.append_current(
            conn,
            hlc=hlc,
            origin=origin,
            entity=entity,
            key=key,
            op="delete" if entity == "observation" and deleted else "upsert",
            project=project,
            scope=scope,
        )

    def _journal_text(
        self,
        conn: sqlite3.Connection,
        entity: str,
        project: str,
        key: str,
        hlc: str,
        origin: str,
    ) -> int:
        """Journal the entity's state after a local write with its full text."""
        state = self._state(conn, entity, project, key)
        assert state is not None, f"{entity} {project}/{key} vanished inside its own write"
        op = "upsert"
        if entity == "observation" and state["deleted_at"] is not None:
            op = "delete"
            state = {**state, "hard": False}
        scope = state.get("scope", "project")
        if entity == "relation":
            # A relation's scope is the record's, not a payload field (the Go tool's
            # relation payload has none).
            state = {k: v for k, v in state.items() if k != "scope"}
        state = compact_payload(entity, state)
        return self.journal.append(
            conn,
            hlc=hlc,
            origin=origin,
            entity=entity,
            key=key,
            op=op,
            project=state["project"],
            scope=scope,
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
            put_tombstone(
                conn,
                entity,
                old["project"],
                old[key_field],
                hlc,
                old.get("scope", "project"),
                deleted_at,
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

    def _journal_exit(self, conn: sqlite3.Connection, old: dict[str, Any], now: str) -> None:
        """A memory leaves the scope it was shared in (project → personal): targets of the old
        selection get a soft delete, ordered before the upsert of its new state (same key)."""
        hlc, origin = self.journal.tick(conn)
        state = {**compact_payload("observation", old), "deleted_at": now, "updated_at": now,
                 "hard": False}  # fmt: skip
        self.journal.append(
            conn,
            hlc=hlc,
            origin=origin,
            entity="observation",
            key=old["sync_id"],
            op="delete",
            project=old["project"],
            scope=old["scope"],
            payload=state,
        )

    def _move(
        self,
        conn: sqlite3.Connection,
        entity: str,
        rowid: int,
        old: dict[str, Any],
        new_project: str,
        now: str,
    ) -> str:
        """Move a memory or prompt to ``new_project`` (docs/architecture.md, "Identity, the journal and replication"): a hard delete of its key in
        the old project (journaled, tombstoned) and the local row re-keyed to the derived key
        in the new one, so every replica makes the same move. The caller has taken the row out
        of the full-text index, then sets its other fields, re-indexes it and journals its new
        state under the returned key. The local integer id stays."""
        table = TABLES[entity]
        new_key = moved_key(entity, old["sync_id"], new_project)
        hlc, origin = self.journal.tick(conn)
        self._journal_hard_delete(conn, entity, old, now, hlc, origin)
        # The same memory moved there before (and was revived here since): this move's
        # version replaces that row, as its upsert replaces it on every replica.
        other = conn.execute(
            f"SELECT id FROM {table} WHERE project = ? AND sync_id = ?", (new_project, new_key)
        ).fetchone()
        if other is not None and other[0] != rowid:
            fts.remove(conn, table, "id", other[0])
            conn.execute(f"DELETE FROM {table} WHERE id = ?", (other[0],))
        drop_tombstone(conn, entity, new_project, new_key)
        conn.execute(
            f"UPDATE {table} SET project = ?, sync_id = ? WHERE id = ?",
            (new_project, new_key, rowid),
        )
        if entity == "observation":
            from engram.store import revisions  # (it imports this module)

            revisions.move(conn, old["project"], old["sync_id"], new_project, new_key)
        # Its session must exist in the new project too (with the old one's directory).
        directory = conn.execute(
            "SELECT directory FROM sessions WHERE project = ? AND id = ?",
            (old["project"], old["session_id"]),
        ).fetchone()
        self._ensure_session(
            conn, old["session_id"], new_project, directory[0] if directory else ""
        )
        return new_key
