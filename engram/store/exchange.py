"""JSON export and import (the reference's ``0.1.0`` document) and the canonical export that
proves two replicas converged."""

from __future__ import annotations

import secrets
import sqlite3
from typing import Any

import orjson

from engram.errors import UnsupportedFormatError, ValidationError
from engram.project import project_name
from engram.store.base import StoreBase
from engram.store.models import ImportResult
from engram.store.mutation import EPOCH_TEXT, FIELDS, legacy_record
from engram.store.observations import session_context
from engram.text import normalize_scope, normalize_topic_key, normalized_hash
from engram.times import now_text

EXPORT_VERSION = "0.1.0"
SUPPORTED_VERSIONS = ("0.1.0",)

_REQUIRED = {
    "sessions": ("id",),
    "observations": ("session_id", "title", "content"),
    "prompts": ("session_id", "content"),
}
_TEXT_FIELDS = {
    "sessions": ("id", "project", "directory", "started_at", "ended_at", "summary"),
    "observations": FIELDS["observation"],
    "prompts": FIELDS["prompt"],
}


def _rows(conn: sqlite3.Connection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(sql, params)]


def validate_export(data: Any) -> dict[str, list[dict[str, Any]]]:
    """Check an export document completely before anything is written.

    Returns its three lists (Go writes empty lists as ``null``). Raises a clear error naming the
    first bad item.
    """
    if not isinstance(data, dict):
        raise UnsupportedFormatError("an export must be a JSON object")
    version = data.get("version")
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFormatError(
            f"unsupported export version {version!r} (supported: {', '.join(SUPPORTED_VERSIONS)})"
        )
    out: dict[str, list[dict[str, Any]]] = {}
    for section in ("sessions", "observations", "prompts"):
        items = data.get(section)
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ValidationError(f"{section} must be a list", field=section)
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise ValidationError(f"{section}[{i}] must be an object", field=section)
            for name in _REQUIRED[section]:
                value = item.get(name)
                if not isinstance(value, str) or not value.strip():
                    raise ValidationError(f"{section}[{i}].{name} is required", field=section)
            for name in _TEXT_FIELDS[section]:
                value = item.get(name)
                if name in ("revision_count", "duplicate_count"):
                    if value is not None and (
                        not isinstance(value, int) or isinstance(value, bool)
                    ):
                        raise ValidationError(
                            f"{section}[{i}].{name} must be an integer", field=section
                        )
                elif value is not None and not isinstance(value, str):
                    raise ValidationError(f"{section}[{i}].{name} must be a string", field=section)
        out[section] = items
    return out


class ExchangeMixin(StoreBase):
    # --- export -----------------------------------------------------------------------------

    def export_data(self, project: str | None = None) -> dict[str, Any]:
        """Every session, observation (soft-deleted ones included) and prompt, optionally of
        one project, in the reference's ``0.1.0`` shape."""
        with self.db.read() as conn:
            if project:
                name = project_name(project)
                observations = _rows(
                    conn, "SELECT * FROM observations WHERE project = ? ORDER BY id", [name]
                )
                prompts = _rows(
                    conn, "SELECT * FROM user_prompts WHERE project = ? ORDER BY id", [name]
                )
                session_ids = {o["session_id"] for o in observations} | {
                    p["session_id"] for p in prompts
                }
                sessions = [
                    s
                    for s in _rows(conn, "SELECT * FROM sessions ORDER BY started_at, id", [])
                    if s["project"] == name or s["id"] in session_ids
                ]
            else:
                sessions = _rows(conn, "SELECT * FROM sessions ORDER BY started_at, id", [])
                observations = _rows(conn, "SELECT * FROM observations ORDER BY id", [])
                prompts = _rows(conn, "SELECT * FROM user_prompts ORDER BY id", [])
        keep_session = ("id", "project", "directory", "started_at", "ended_at", "summary")
        keep_prompt = ("id", "sync_id", "session_id", "content", "project", "created_at")
        return {
            "version": EXPORT_VERSION,
            "exported_at": now_text(),
            "sessions": [{k: s[k] for k in keep_session} for s in sessions],
            "observations": [
                {"id": o["id"], **{k: o[k] for k in FIELDS["observation"]}} for o in observations
            ],
            "prompts": [{k: p[k] for k in keep_prompt} for p in prompts],
        }

    # --- import -----------------------------------------------------------------------------

    def import_data(self, data: Any) -> ImportResult:
        """Import an export document in one transaction; rows whose ``sync_id`` (or session id)
        already exists are skipped, so importing twice changes nothing."""
        sections = validate_export(data)
        result = ImportResult()
        newest = ""
        with self.db.write() as conn:
            for item in sections["sessions"]:
                newest = max(newest, self._import_session(conn, item, result))
            for item in sections["observations"]:
                newest = max(newest, self._import_observation(conn, item, result))
            for item in sections["prompts"]:
                newest = max(newest, self._import_prompt(conn, item, result))
            if newest:
                self.journal.observe(conn, newest)
        return result

    def _journal_legacy(
        self,
        conn: sqlite3.Connection,
        entity: str,
        op: str,
        state: dict[str, Any],
        updated_at: str,
        hlc_column: str,
    ) -> str:
        record = legacy_record(
            entity=entity,
            op=op,
            payload=state if op == "upsert" else {**state, "hard": False},
            updated_at=updated_at,
            project=state["project"],
            scope=state.get("scope", "project"),
        )
        if not self.journal.has_mid(conn, record["mid"]):
            self.journal.append_record(conn, record, source="local")
        conn.execute(hlc_column, (record["hlc"], record["key"]))
        return record["hlc"]

    def _tombstoned(self, conn: sqlite3.Connection, entity: str, key: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM sync_tombstones WHERE entity = ? AND key = ?", (entity, key)
            ).fetchone()
            is not None
        )

    def _import_session(self, conn, item: dict[str, Any], result: ImportResult) -> str:
        sid = item["id"].strip()
        if conn.execute(
            "SELECT 1 FROM sessions WHERE id = ?", (sid,)
        ).fetchone() or self._tombstoned(conn, "session", sid):
            result.skipped += 1
            return ""
        state = {
            "id": sid,
            "project": project_name(item.get("project")),
            "directory": item.get("directory") or "",
            "started_at": item.get("started_at") or EPOCH_TEXT,
            "ended_at": item.get("ended_at"),
            "summary": item.get("summary"),
        }
        conn.execute(
            """INSERT INTO sessions(id, project, directory, started_at, ended_at, summary)
               VALUES (:id, :project, :directory, :started_at, :ended_at, :summary)""",
            state,
        )
        result.sessions_imported += 1
        return self._journal_legacy(
            conn,
            "session",
            "upsert",
            state,
            state["ended_at"] or state["started_at"],
            "UPDATE sessions SET hlc = ? WHERE id = ?",
        )

    def _import_stub_session(self, conn, session_id: str, project: str) -> None:
        if not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
            conn.execute(
                "INSERT INTO sessions(id, project, directory, started_at, hlc)"
                " VALUES (?, ?, '', ?, '')",
                (session_id, project, EPOCH_TEXT),
            )

    def _import_observation(self, conn, item: dict[str, Any], result: ImportResult) -> str:
        sync_id = (item.get("sync_id") or "").strip() or "obs-" + secrets.token_hex(8)
        if conn.execute(
            "SELECT 1 FROM observations WHERE sync_id = ?", (sync_id,)
        ).fetchone() or self._tombstoned(conn, "observation", sync_id):
            result.skipped += 1
            return ""
        created = item.get("created_at") or EPOCH_TEXT
        state = {
            "sync_id": sync_id,
            "session_id": item["session_id"].strip(),
            "type": (item.get("type") or "").strip() or "manual",
            "title": item["title"],
            "content": item["content"],
            "tool_name": item.get("tool_name"),
            "project": project_name(item.get("project")),
            "scope": normalize_scope(item.get("scope")),
            "topic_key": normalize_topic_key(item.get("topic_key")),
            "revision_count": max(1, item.get("revision_count") or 1),
            "duplicate_count": max(1, item.get("duplicate_count") or 1),
            "last_seen_at": item.get("last_seen_at"),
            "created_at": created,
            "updated_at": item.get("updated_at") or created,
            "deleted_at": item.get("deleted_at"),
        }
        self._import_stub_session(conn, state["session_id"], state["project"])
        conn.execute(
            """INSERT INTO observations(sync_id, session_id, type, title, content, tool_name,
                   project, scope, topic_key, normalized_hash, revision_count, duplicate_count,
                   last_seen_at, created_at, updated_at, deleted_at, search_context)
               VALUES (:sync_id, :session_id, :type, :title, :content, :tool_name, :project,
                   :scope, :topic_key, :normalized_hash, :revision_count, :duplicate_count,
                   :last_seen_at, :created_at, :updated_at, :deleted_at, :search_context)""",
            {
                **state,
                "normalized_hash": normalized_hash(state["content"]),
                "search_context": session_context(conn, state["session_id"], created),
            },
        )
        result.observations_imported += 1
        op = "delete" if state["deleted_at"] else "upsert"
        return self._journal_legacy(
            conn,
            "observation",
            op,
            state,
            state["updated_at"],
            "UPDATE observations SET hlc = ? WHERE sync_id = ?",
        )

    def _import_prompt(self, conn, item: dict[str, Any], result: ImportResult) -> str:
        sync_id = (item.get("sync_id") or "").strip() or "prompt-" + secrets.token_hex(8)
        if conn.execute(
            "SELECT 1 FROM user_prompts WHERE sync_id = ?", (sync_id,)
        ).fetchone() or self._tombstoned(conn, "prompt", sync_id):
            result.skipped += 1
            return ""
        state = {
            "sync_id": sync_id,
            "session_id": item["session_id"].strip(),
            "content": item["content"],
            "project": project_name(item.get("project")),
            "created_at": item.get("created_at") or EPOCH_TEXT,
        }
        self._import_stub_session(conn, state["session_id"], state["project"])
        conn.execute(
            """INSERT INTO user_prompts(sync_id, session_id, content, project, created_at)
               VALUES (:sync_id, :session_id, :content, :project, :created_at)""",
            state,
        )
        result.prompts_imported += 1
        return self._journal_legacy(
            conn,
            "prompt",
            "upsert",
            state,
            state["created_at"],
            "UPDATE user_prompts SET hlc = ? WHERE sync_id = ?",
        )

    # --- canonical export -------------------------------------------------------------------

    def canonical_export(
        self, *, projects: list[str] | None = None, include_personal: bool = True
    ) -> bytes:
        """Every entity keyed by its replicated id, sorted, without local ids or local-only
        state, tombstones included. Two stores converged exactly when these bytes are equal."""
        names = None if projects is None else sorted({project_name(p) for p in projects})

        def keep(row: dict[str, Any]) -> bool:
            if names is not None and row.get("project", "") not in names:
                return False
            return include_personal or row.get("scope", "project") != "personal"

        with self.db.read() as conn:
            document: dict[str, Any] = {}
            for entity, table, key in (
                ("session", "sessions", "id"),
                ("observation", "observations", "sync_id"),
                ("prompt", "user_prompts", "sync_id"),
            ):
                cols = ", ".join((*FIELDS[entity], "hlc"))
                rows = _rows(conn, f"SELECT {cols} FROM {table} ORDER BY {key}", [])
                document[f"{entity}s"] = [r for r in rows if keep(r)]
            tombstones = _rows(
                conn,
                "SELECT entity, key, hlc, project, deleted_at FROM sync_tombstones ORDER BY entity, key",
                [],
            )
            document["tombstones"] = [t for t in tombstones if keep(t)]
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
