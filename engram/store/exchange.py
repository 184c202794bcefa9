"""JSON export and import (the Go tool's ``0.1.0`` document, and its later ``0.2.0`` that also
carries relations between memories) and the canonical export that proves two replicas
converged.

An export holds relations only when its memories have some; it is then version ``0.2.0`` (a
``relations`` list), else still ``0.1.0``, so tools that only read ``0.1.0`` (the Go tool before
relations) keep reading what has none.

Size: over 500 lines on purpose: export, import and the canonical export share the document's
shapes and the rules that keep an import idempotent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from engram.errors import InvalidMutationError, UnsupportedFormatError, ValidationError
from engram.project import project_name
from engram.record import (
    EPOCH_TEXT,
    FIELDS,
    INTENT_FIELDS,
    JUDGMENT_STATUSES,
    RELATION_FIELDS,
    STATE_FIELDS,
    compact_payload,
    derived_sync_id,
    intent_problem,
    intent_state,
    legacy_record,
    relation_key,
    relation_state,
    validate_record,
)
from engram.store import fts, links, scoring
from engram.store.base import StoreBase
from engram.store.identity import copy_session_into, insert_stub_session
from engram.store.journal import ELIDED, now_ms, state_text
from engram.store.models import ImportResult
from engram.store.search_context import ContextRefresh, derive_state
from engram.text import normalize_scope, normalize_topic_key, normalized_hash, unstorable_reason
from engram.times import now_text

EXPORT_VERSION = "0.1.0"
RELATIONS_VERSION = "0.2.0"
SUPPORTED_VERSIONS = ("0.1.0", "0.2.0")
#: Where a ``0.2.0`` document keeps its relations (the second name is accepted on import).
RELATION_SECTIONS = ("relations", "memory_relations")

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
            validate_export_item(section, i, item)
            _refuse_unstorable(section, i, item)
        out[section] = items
    out["relations"] = _relations_section(data)
    return out


def _relations_section(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The relations of a ``0.2.0`` document, each checked (nothing is written if one is bad)."""
    items: Any = None
    for name in RELATION_SECTIONS:
        if data.get(name) is not None:
            items = data[name]
            break
    if items is None:
        return []
    if data.get("version") == EXPORT_VERSION:
        raise UnsupportedFormatError(
            f"a {EXPORT_VERSION} export carries no relations: a document with relations is "
            f"version {RELATIONS_VERSION}"
        )
    if not isinstance(items, list):
        raise ValidationError("relations must be a list", field="relations")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValidationError(f"relations[{i}] must be an object", field="relations")
        for name in ("source_id", "target_id", "relation"):
            value = item.get(name)
            if not isinstance(value, str) or not value.strip():
                raise ValidationError(f"relations[{i}].{name} is required", field="relations")
        for name in RELATION_FIELDS:
            value = item.get(name)
            if name == "confidence":
                if value is not None and (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not 0 <= value <= 1
                ):
                    raise ValidationError(
                        f"relations[{i}].confidence must be a number from 0 to 1",
                        field="relations",
                    )
            elif value is not None and not isinstance(value, str):
                raise ValidationError(f"relations[{i}].{name} must be a string", field="relations")
            elif isinstance(value, str) and (reason := unstorable_reason(value)):
                raise ValidationError(f"relations[{i}].{name} {reason}", field="relations")
        status = item.get("judgment_status")
        if status is not None and status not in JUDGMENT_STATUSES:
            raise ValidationError(
                f"relations[{i}].judgment_status must be one of {', '.join(JUDGMENT_STATUSES)}",
                field="relations",
            )
    return items


def validate_export_item(section: str, i: int, item: Any) -> None:
    """Check one element of an export's ``sessions``/``observations``/``prompts`` list (also
    used on its own by readers that stream a document one element at a time)."""
    if not isinstance(item, dict):
        raise ValidationError(f"{section}[{i}] must be an object", field=section)
    for name in _REQUIRED[section]:
        value = item.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ValidationError(f"{section}[{i}].{name} is required", field=section)
    if section == "observations":
        for name in INTENT_FIELDS:
            if name in item and (problem := intent_problem(name, item[name])):
                raise ValidationError(f"{section}[{i}].{name} {problem}", field=section)
    for name in _TEXT_FIELDS[section]:
        value = item.get(name)
        if name in ("revision_count", "duplicate_count"):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValidationError(f"{section}[{i}].{name} must be an integer", field=section)
        elif value is not None and not isinstance(value, str):
            raise ValidationError(f"{section}[{i}].{name} must be a string", field=section)


def _refuse_unstorable(section: str, i: int, item: dict[str, Any]) -> None:
    """An export imported as a whole is refused whole for text no store can keep (nothing is
    written). Chunk readers, which apply record by record, leave such a row to the record
    validation, which quarantines (locally) or rejects (the server) that row alone."""
    for name in _TEXT_FIELDS[section]:
        value = item.get(name)
        if isinstance(value, str) and (reason := unstorable_reason(value)):
            raise ValidationError(f"{section}[{i}].{name} {reason}", field=section)


def _exported(row: dict[str, Any]) -> dict[str, Any]:
    """An observation as the export document holds it: the reference's fields, plus the
    intent fields that are set (a pin, an importance override…), so a backup keeps them."""
    state = {k: row[k] for k in STATE_FIELDS["observation"]}
    state["pinned"] = bool(state["pinned"])
    return {"id": row["id"], **compact_payload("observation", state)}


class ExchangeMixin(StoreBase):
    # --- export -----------------------------------------------------------------------------

    def export_data(self, project: str | None = None) -> dict[str, Any]:
        """Every session, observation (soft-deleted ones included) and prompt, optionally of
        one project, in the Go tool's ``0.1.0`` shape."""
        with self.db.read() as conn:
            if project:
                name = project_name(project)
                observations = _rows(
                    conn, "SELECT * FROM observations WHERE project = ? ORDER BY id", [name]
                )
                prompts = _rows(
                    conn, "SELECT * FROM user_prompts WHERE project = ? ORDER BY id", [name]
                )
                sessions = _rows(
                    conn,
                    "SELECT * FROM sessions WHERE project = ? ORDER BY started_at, id",
                    [name],
                )
            else:
                sessions = _rows(conn, "SELECT * FROM sessions ORDER BY started_at, id", [])
                observations = _rows(conn, "SELECT * FROM observations ORDER BY id", [])
                prompts = _rows(conn, "SELECT * FROM user_prompts ORDER BY id", [])
            where, params = ("WHERE project = ?", [project_name(project)]) if project else ("", [])
            relations = _rows(conn, f"SELECT * FROM memory_relations {where} ORDER BY id", params)
        keep_session = ("id", "project", "directory", "started_at", "ended_at", "summary")
        keep_prompt = ("id", "sync_id", "session_id", "content", "project", "created_at")
        document: dict[str, Any] = {
            "version": RELATIONS_VERSION if relations else EXPORT_VERSION,
            "exported_at": now_text(),
            "sessions": [{k: s[k] for k in keep_session} for s in sessions],
            "observations": [_exported(o) for o in observations],
            "prompts": [{k: p[k] for k in keep_prompt} for p in prompts],
        }
        if relations:
            document["relations"] = [
                {"id": r["id"], **{k: r[k] for k in RELATION_FIELDS}, "scope": r["scope"]}
                for r in relations
            ]
        return document

    # --- import -----------------------------------------------------------------------------

    def import_data(
        self, data: Any, *, progress: Callable[[int, int], None] | None = None
    ) -> ImportResult:
        """Import an export document in one transaction; rows whose ``sync_id`` (or session id)
        already exists are skipped, so importing twice changes nothing.

        Each imported row gets its deterministic legacy journal entry (docs/architecture.md, "Identity, the journal and replication"), so every
        machine importing the same file produces the same mutations. ``progress(done, total)``
        is called every 1,000 rows.
        """
        sections = validate_export(data)
        result = ImportResult()
        total = sum(len(v) for v in sections.values())
        with self.db.write() as conn:
            run = ImportRun(conn, now_ms())
            # Prompts before observations: a memory's session context includes its prompt.
            for section, importer in (("sessions", run.session), ("prompts", run.prompt),
                                      ("observations", run.observation),
                                      ("relations", run.relation)):  # fmt: skip
                for item in sections[section]:
                    importer(item, result)
                    run.done += 1
                    if progress is not None and run.done % 1000 == 0:
                        progress(run.done, total)
            run.flush_journal()
            scoring.rescore_ids(conn, run.scored)
            scoring.rescore_linked(conn, run.scored)  # memories here before, now related
            if run.newest:
                self.journal.observe(conn, run.newest)
            # A row of a Go export may be a memory of ours that went through the Go tool.
            result.copies_retired = self._settle_go_copies(conn, run.imported)
        if progress is not None:
            progress(total, total)
        return result

    # --- canonical export -------------------------------------------------------------------

    def canonical_export(
        self, *, projects: list[str] | None = None, include_personal: bool = True
    ) -> bytes:
        """Every entity keyed by its replicated id, sorted, without local ids or local-only
        state, tombstones included. Two stores converged exactly when these bytes are equal."""
        import orjson

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
                ("relation", "memory_relations", "sync_id"),
            ):
                local = ("scope", "extra") if entity == "relation" else ()
                cols = ", ".join((*STATE_FIELDS[entity], *local, "hlc"))
                rows = _rows(conn, f"SELECT {cols} FROM {table} ORDER BY {key}, project", [])
                if entity == "observation":
                    for row in rows:
                        row["pinned"] = bool(row["pinned"])
                document[f"{entity}s"] = [r for r in rows if keep(r)]
            tombstones = _rows(
                conn,
                "SELECT entity, key, hlc, project, scope, deleted_at FROM sync_tombstones"
                " ORDER BY entity, key, project",
                [],
            )
            document["tombstones"] = [t for t in tombstones if keep(t)]
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)


class ImportRun:
    """One import transaction: keys already present are loaded once, journal rows are written
    in one batch at the end, and each row costs one insert plus its session-context lookups."""

    def __init__(self, conn: sqlite3.Connection, now_ms: int) -> None:
        self.conn = conn
        self.context = ContextRefresh(conn)
        self.now_ms = now_ms
        self.done = 0
        self.newest = ""
        self.records: list[tuple[Any, ...]] = []
        #: (entity, project, key, state) of every memory and prompt inserted
        self.imported: list[tuple[str, str, str, dict[str, Any]]] = []
        self.sessions = {(r[0], r[1]) for r in conn.execute("SELECT project, id FROM sessions")}
        self.observations = {
            (r[0], r[1]) for r in conn.execute("SELECT project, sync_id FROM observations")
        }
        self.prompts = {
            (r[0], r[1]) for r in conn.execute("SELECT project, sync_id FROM user_prompts")
        }
        self.tombstones = {
            (r[0], r[1], r[2])
            for r in conn.execute("SELECT entity, project, key FROM sync_tombstones")
        }
        self.relations = {
            (r[0], r[1]) for r in conn.execute("SELECT project, sync_id FROM memory_relations")
        }
        self.now = now_text()
        self.scored: list[int] = []  # imported memories, scored at the end

    def _skip(
        self,
        entity: str,
        project: str,
        key: str,
        present: set[tuple[str, str]],
        result: ImportResult,
    ) -> bool:
        """Rows already at their address (or deleted there) are left alone."""
        if (project, key) in present or (entity, project, key) in self.tombstones:
            result.skipped += 1
            return True
        present.add((project, key))
        return False

    def _journal(self, entity: str, op: str, state: dict[str, Any], updated_at: str) -> str:
        import orjson

        # A row dated in the future is stamped no later than now (docs/architecture.md, "Trust boundaries").
        record = legacy_record(
            entity=entity, op=op, payload=state if op == "upsert" else {**state, "hard": False},
            updated_at=updated_at, project=state["project"], scope=state.get("scope", "project"),
            not_after_ms=self.now_ms,
        )  # fmt: skip
        text = orjson.dumps(record).decode()
        if text == state_text(record, state):  # the row written next is the payload: elided
            text = ELIDED
        self.records.append(
            (record["mid"], record["hlc"], record["origin"], entity, record["key"], op,
             record["project"], record["scope"], text, self.now)
        )  # fmt: skip
        self.newest = max(self.newest, record["hlc"])
        return str(record["hlc"])

    def flush_journal(self) -> None:
        self.conn.executemany(
            """INSERT OR IGNORE INTO sync_journal(mid, hlc, origin, entity, key, op, project,
                   scope, record, source, recorded_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'local', ?)""",
            self.records,
        )
        self.records.clear()

    def _stub_session(self, session_id: str, project: str) -> None:
        """A row's session lives in the row's project: a copy of a same-id session of another
        project (older documents), else a stub."""
        address = (project, session_id)
        if address in self.sessions or ("session", *address) in self.tombstones:
            return
        if not copy_session_into(self.conn, project, session_id):
            insert_stub_session(self.conn, project, session_id, EPOCH_TEXT)
        self.sessions.add(address)

    def session(self, item: dict[str, Any], result: ImportResult) -> None:
        sid = item["id"].strip()
        project = project_name(item.get("project"))
        if self._skip("session", project, sid, self.sessions, result):
            return
        state = {
            "id": sid, "project": project,
            "directory": item.get("directory") or "",
            "started_at": item.get("started_at") or EPOCH_TEXT,
            "ended_at": item.get("ended_at"), "summary": item.get("summary"),
        }  # fmt: skip
        hlc = self._journal("session", "upsert", state, state["ended_at"] or state["started_at"])
        self.conn.execute(
            """INSERT INTO sessions(id, project, directory, started_at, ended_at, summary, hlc)
               VALUES (:id, :project, :directory, :started_at, :ended_at, :summary, :hlc)""",
            {**state, "hlc": hlc},
        )
        result.sessions_imported += 1

    def observation(self, item: dict[str, Any], result: ImportResult) -> None:
        project = project_name(item.get("project"))
        created = item.get("created_at") or EPOCH_TEXT
        sync_id = (item.get("sync_id") or "").strip() or derived_sync_id(
            "observation", project=project, session_id=item["session_id"].strip(),
            created_at=created, title=item["title"], content=item["content"],
        )  # fmt: skip
        if self._skip("observation", project, sync_id, self.observations, result):
            return
        state = {
            "sync_id": sync_id, "session_id": item["session_id"].strip(),
            "type": (item.get("type") or "").strip() or "manual",
            "title": item["title"], "content": item["content"],
            "tool_name": item.get("tool_name"), "project": project,
            "scope": normalize_scope(item.get("scope")),
            "topic_key": normalize_topic_key(item.get("topic_key")),
            "revision_count": max(1, item.get("revision_count") or 1),
            "duplicate_count": max(1, item.get("duplicate_count") or 1),
            "last_seen_at": item.get("last_seen_at"), "created_at": created,
            "updated_at": item.get("updated_at") or created, "deleted_at": item.get("deleted_at"),
            **intent_state(item),
        }  # fmt: skip
        self._stub_session(state["session_id"], state["project"])
        op = "delete" if state["deleted_at"] else "upsert"
        hlc = self._journal("observation", op, compact_payload("observation", state),
                            state["updated_at"])  # fmt: skip
        context = derive_state(self.conn, state)
        score = None  # scored at the end when a relation here may name it
        if not self.relations:  # (the document's relations come later and rescore their ends)
            changed = max(state["updated_at"] or "", state["reviewed_at"] or "")
            score = scoring.unlinked_score(
                state["content"], state["topic_key"], state["type"], changed, self.now
            )
        cursor = self.conn.execute(
            """INSERT INTO observations(sync_id, session_id, type, title, content, tool_name,
                   project, scope, topic_key, normalized_hash, revision_count, duplicate_count,
                   last_seen_at, created_at, updated_at, deleted_at, search_context, hlc,
                   pinned, importance_override, valid_from, valid_to, delete_reason,
                   superseded_by, reviewed_at, importance)
               VALUES (:sync_id, :session_id, :type, :title, :content, :tool_name, :project,
                   :scope, :topic_key, :normalized_hash, :revision_count, :duplicate_count,
                   :last_seen_at, :created_at, :updated_at, :deleted_at, :search_context, :hlc,
                   :pinned, :importance_override, :valid_from, :valid_to, :delete_reason,
                   :superseded_by, :reviewed_at, :importance)""",
            {**state, "hlc": hlc, "normalized_hash": normalized_hash(state["content"]),
             "search_context": context, "pinned": int(state["pinned"]), "importance": score},
        )  # fmt: skip
        rowid = int(cursor.lastrowid or 0)
        fts.add(self.conn, "observations", rowid, {**state, "search_context": context})
        self.imported.append(("observation", project, sync_id, state))
        self.context.inserted(rowid, state)  # may arrive out of order
        self.context.settle()
        if score is None:
            self.scored.append(rowid)
        result.observations_imported += 1

    def prompt(self, item: dict[str, Any], result: ImportResult) -> None:
        project = project_name(item.get("project"))
        sync_id = (item.get("sync_id") or "").strip() or derived_sync_id(
            "prompt", project=project, session_id=item["session_id"].strip(),
            created_at=item.get("created_at") or EPOCH_TEXT, content=item["content"],
        )  # fmt: skip
        if self._skip("prompt", project, sync_id, self.prompts, result):
            return
        state = {
            "sync_id": sync_id, "session_id": item["session_id"].strip(),
            "content": item["content"], "project": project,
            "created_at": item.get("created_at") or EPOCH_TEXT,
        }  # fmt: skip
        self._stub_session(state["session_id"], state["project"])
        hlc = self._journal("prompt", "upsert", state, state["created_at"])
        cursor = self.conn.execute(
            """INSERT INTO user_prompts(sync_id, session_id, content, project, created_at, hlc)
               VALUES (:sync_id, :session_id, :content, :project, :created_at, :hlc)""",
            {**state, "hlc": hlc},
        )
        fts.add(self.conn, "user_prompts", int(cursor.lastrowid or 0), state)
        self.imported.append(("prompt", project, sync_id, state))
        self.context.prompt(int(cursor.lastrowid or 0))  # memories here may be saved after it
        self.context.settle()
        result.prompts_imported += 1

    def relation(self, item: dict[str, Any], result: ImportResult) -> None:
        """A relation of a ``0.2.0`` document, in the project of its memories (named by the
        item, else found from its source memory). One whose memories are not both in that
        project — missing, or in two projects — is skipped: a relation never links two
        projects."""
        import orjson

        source, target = item["source_id"].strip(), item["target_id"].strip()
        project = project_name(item["project"]) if item.get("project") else None
        if project is None:
            homes = [p for p, k in self.observations if k == source]
            project = homes[0] if len(homes) == 1 else None
        if (
            project is None
            or source == target
            or (project, source) not in self.observations
            or (project, target) not in self.observations
        ):
            result.skipped += 1
            return
        sync_id = (item.get("sync_id") or "").strip() or relation_key(project, source, target)
        if (project, sync_id) in self.relations:
            result.skipped += 1
            return
        self.relations.add((project, sync_id))
        scope = "personal" if item.get("scope") == "personal" else "project"
        payload = {
            **{k: item.get(k) for k in RELATION_FIELDS},
            "sync_id": sync_id,
            "source_id": source,
            "target_id": target,
            "relation": item["relation"].strip(),
            "project": project,
        }
        payload["relation"] = payload["relation"].lower()
        state = relation_state({"project": project, "payload": payload})
        record = legacy_record(
            entity="relation", op="upsert", payload=state, updated_at=state["updated_at"],
            project=project, scope=scope, not_after_ms=self.now_ms,
        )  # fmt: skip
        try:
            validate_record(record)  # what every replica will check when it arrives
        except InvalidMutationError:
            self.relations.discard((project, sync_id))
            result.skipped += 1
            return
        self.records.append(
            (record["mid"], record["hlc"], record["origin"], "relation", sync_id, "upsert",
             project, scope, orjson.dumps(record).decode(), self.now)
        )  # fmt: skip
        self.newest = max(self.newest, record["hlc"])
        self.conn.execute(
            """INSERT INTO memory_relations(sync_id, project, scope, source_id, target_id,
                   relation, reason, evidence, confidence, judgment_status, marked_by_actor,
                   marked_by_kind, marked_by_model, session_id, superseded_at,
                   superseded_by_relation_id, created_at, updated_at, hlc)
               VALUES (:sync_id, :project, :scope, :source_id, :target_id, :relation, :reason,
                   :evidence, :confidence, :judgment_status, :marked_by_actor, :marked_by_kind,
                   :marked_by_model, :session_id, :superseded_at, :superseded_by_relation_id,
                   :created_at, :updated_at, :hlc)""",
            {**state, "scope": scope, "hlc": record["hlc"]},
        )
        self.scored.extend(links.ids_of(self.conn, project, (source, target)))  # a link each
        result.relations_imported += 1
