"""Chunks in the older single-object format (the Go tool's ``{"sessions", "observations",
"prompts", "mutations"}`` document) turned into mutation records.

Every row becomes the deterministic legacy record of docs/architecture.md, "Identity, the journal and replication" (origin zero, hlc from the row's
``updated_at``, mid from key/time/op), built with the same rules as ``engram import`` of a
``0.1.0`` export, so every machine importing the same chunk — or the same rows by another
route — produces the same mutations. Explicit ``mutations`` entries (later Go versions) win
over the typed row of the same entity, as in the Go tool.

**Whose project.** The Go tool names a project after the clone's directory, so a git import
gives every row the *repository's* project instead (docs/architecture.md, "Trust boundaries"):
pass ``project``. A row whose own (normalized) project differs is *moved* there as
``engram projects merge`` moves a memory: a memory or prompt takes the derived key
:func:`engram.record.moved_key` of its own key and the repository's project — the very key
``engram projects merge`` gives the same row when it comes from an upgraded Go database or an
``engram import`` of a Go export, so those routes meet in one memory (sessions keep their id,
as in a merge) — and a mid that also covers the project
(``legacy_mid(key + "\\0" + project, updated_at, op)``). Every machine that binds the
repository to the same project derives the same record.

**Bounded memory.** A document can hold a whole database. :class:`GoConverter` takes its
elements one at a time (see :func:`engram.sync.git.stream.document_items`) and spools them into
a private temporary SQLite file (deleted when closed), which does the "last row wins / explicit
mutation wins" bookkeeping on disk; records then come out one at a time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from engram.errors import ValidationError
from engram.project import project_name
from engram.record import (
    EPOCH_TEXT,
    KEY_FIELD,
    LEGACY_ORIGIN,
    build_record,
    derived_sync_id,
    legacy_hlc,
    legacy_mid,
    moved_key,
    relation_state,
)
from engram.store.exchange import validate_export_item
from engram.sync.git.chunk import BadChunkError
from engram.text import normalize_scope, normalize_topic_key

#: Entities of newer Go versions that this Engram does not replicate yet: skipped, counted.
#: (Relations were one; they are converted now, see :meth:`GoConverter._relation`.)
UNSUPPORTED_ENTITIES: tuple[str, ...] = ()
_ENTITY = {"sessions": "session", "observations": "observation", "prompts": "prompt"}
#: Where an element's record goes in the output: its section, then its place in it.
# Prompts before observations: a memory is indexed with the prompt that led to it (session
# context), so one that arrives after its memories would make the store re-derive them all.
_SECTION_RANK = {"sessions": 0, "prompts": 1, "observations": 2, "mutations": 3}
_POSITION_BITS = 40
_SPOOL = """
CREATE TABLE typed (entity TEXT, key TEXT, pos INTEGER, item BLOB, PRIMARY KEY (entity, key));
CREATE TABLE explicit (seq INTEGER PRIMARY KEY, item BLOB);
CREATE TABLE final (entity TEXT, key TEXT, pos INTEGER, rank INTEGER, record BLOB,
                    PRIMARY KEY (entity, key));
"""


def _session_state(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(item["id"]).strip(),
        "project": project_name(item.get("project")),
        "directory": item.get("directory") or "",
        "started_at": item.get("started_at") or EPOCH_TEXT,
        "ended_at": item.get("ended_at"),
        "summary": item.get("summary"),
    }


def _observation_state(item: dict[str, Any]) -> dict[str, Any]:
    created = item.get("created_at") or EPOCH_TEXT
    project = project_name(item.get("project"))
    session_id = (item.get("session_id") or "").strip() or "manual-save"
    title = item.get("title") or "Untitled observation"
    content = item.get("content") or ""
    # A row without a sync id (the Go tool has none) gets the one `engram import` of the same
    # row gives it: derived from the row as its writer named it, so it is the same everywhere.
    sync_id = (item.get("sync_id") or "").strip() or derived_sync_id(
        "observation", project=project, session_id=session_id, created_at=created,
        title=title, content=content,
    )  # fmt: skip
    return {
        "sync_id": sync_id,
        "session_id": session_id,
        "type": (item.get("type") or "").strip() or "manual",
        "title": title,
        "content": content,
        "tool_name": item.get("tool_name"),
        "project": project,
        "scope": normalize_scope(item.get("scope")),
        "topic_key": normalize_topic_key(item.get("topic_key")),
        "revision_count": max(1, item.get("revision_count") or 1),
        "duplicate_count": max(1, item.get("duplicate_count") or 1),
        "last_seen_at": item.get("last_seen_at"),
        "created_at": created,
        "updated_at": item.get("updated_at") or created,
        "deleted_at": item.get("deleted_at"),
    }


def _prompt_state(item: dict[str, Any]) -> dict[str, Any]:
    created = item.get("created_at") or EPOCH_TEXT
    project = project_name(item.get("project"))
    session_id = (item.get("session_id") or "").strip() or "manual-save"
    content = item.get("content") or ""
    sync_id = (item.get("sync_id") or "").strip() or derived_sync_id(
        "prompt", project=project, session_id=session_id, created_at=created, content=content
    )
    return {
        "sync_id": sync_id,
        "session_id": session_id,
        "content": content,
        "project": project,
        "created_at": created,
    }


_STATE = {"session": _session_state, "observation": _observation_state, "prompt": _prompt_state}


def _updated_at(entity: str, state: dict[str, Any]) -> str:
    if entity == "session":
        return str(state["ended_at"] or state["started_at"])
    if entity == "observation":
        return str(state["updated_at"])
    return str(state["created_at"])


def _rank(record: dict[str, Any]) -> int:
    """Session upserts, other upserts, relation upserts, other deletes, session deletes (the
    reference's order)."""
    if record["entity"] == "session":
        return 0 if record["op"] == "upsert" else 4
    if record["entity"] == "relation":
        return 2
    return 1 if record["op"] == "upsert" else 3


def _payload(chunk_id: str, index: int, raw: Any) -> dict[str, Any]:
    """A Go mutation payload: an object, a JSON string, or a JSON string of a JSON string."""
    value = raw
    for _ in range(2):
        if not isinstance(value, str):
            break
        try:
            value = orjson.loads(value.strip())
        except orjson.JSONDecodeError:
            raise BadChunkError(chunk_id, f"mutations[{index}]: payload is not JSON") from None
    if not isinstance(value, dict):
        raise BadChunkError(chunk_id, f"mutations[{index}]: payload must be a JSON object")
    return value


class GoConverter:
    """Records of one Go document, fed element by element with :meth:`add`, read back with
    :meth:`records`. ``project``: the repository's project every row is given (``None`` keeps
    each row's own name)."""

    def __init__(self, chunk_id: str, *, project: str | None = None) -> None:
        self.chunk_id = chunk_id
        self.project = project or None
        self.skipped = 0  # relation mutations (not replicated yet)
        self.counts = dict.fromkeys(_SECTION_RANK, 0)
        # "": a private temporary database on disk, removed when the connection closes.
        self._spool = sqlite3.connect("", isolation_level=None)
        self._spool.execute("PRAGMA journal_mode=OFF")
        self._spool.execute("PRAGMA synchronous=OFF")
        self._spool.execute("PRAGMA temp_store=FILE")
        self._spool.execute("PRAGMA cache_size=-8192")  # 8 MiB; the rest stays on disk
        for statement in _SPOOL.strip().split(";"):
            if statement.strip():
                self._spool.execute(statement)
        self._spool.execute("BEGIN")

    def close(self) -> None:
        self._spool.close()

    def __enter__(self) -> GoConverter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one row, one record --------------------------------------------------------------

    def _moved_key(self, entity: str, key: str) -> str:
        """A key moved into the repository's project (sessions keep their id)."""
        assert self.project is not None
        return key if entity == "session" else moved_key(entity, key, self.project)

    def _state(self, entity: str, item: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The row's state in the repository's project, and whether that moved it."""
        state = _STATE[entity](item)
        if self.project is None or state["project"] == self.project:
            return state, False
        key_field = KEY_FIELD[entity]
        moved = {**state, "project": self.project}
        moved[key_field] = self._moved_key(entity, state[key_field])
        return moved, True

    def _record(
        self, entity: str, op: str, payload: dict[str, Any], updated_at: str, scope: str,
        moved: bool,
    ) -> dict[str, Any]:  # fmt: skip
        key = str(payload[KEY_FIELD[entity]])
        project = payload["project"]
        mid_key = f"{key}\0{project}" if moved else key
        return build_record(
            mid=legacy_mid(mid_key, updated_at, op),
            hlc=legacy_hlc(updated_at),
            origin=LEGACY_ORIGIN,
            entity=entity,
            key=key,
            op=op,
            project=project,
            scope=scope,
            payload=payload,
        )

    def _upsert(self, entity: str, state: dict[str, Any], moved: bool) -> dict[str, Any]:
        """The legacy record of a row, as ``engram import`` journals it (soft-deleted
        observations become deletes that keep their full state)."""
        op = "delete" if entity == "observation" and state.get("deleted_at") else "upsert"
        return self._record(
            entity,
            op,
            state if op == "upsert" else {**state, "hard": False},
            _updated_at(entity, state),
            state.get("scope", "project"),
            moved,
        )

    def _known(self, entity: str, key: str) -> dict[str, Any]:
        row = self._spool.execute(
            "SELECT item FROM typed WHERE entity = ? AND key = ?", (entity, key)
        ).fetchone()
        return orjson.loads(row[0]) if row else {}

    def _explicit(self, index: int, mutation: Any) -> tuple[dict[str, Any], str] | None:
        """The record of one explicit mutation and the key it names in the document."""
        chunk_id = self.chunk_id
        if not isinstance(mutation, dict):
            raise BadChunkError(chunk_id, f"mutations[{index}] must be an object")
        entity = str(mutation.get("entity") or "").strip()
        op = str(mutation.get("op") or "").strip()
        if entity in UNSUPPORTED_ENTITIES:
            return None
        if entity == "relation":
            return self._relation(index, mutation, op)
        if entity not in _STATE:
            raise BadChunkError(chunk_id, f"mutations[{index}]: unknown entity {entity!r}")
        if op not in ("upsert", "delete"):
            raise BadChunkError(chunk_id, f"mutations[{index}]: unknown op {op!r}")
        payload = _payload(chunk_id, index, mutation.get("payload"))
        key_field = KEY_FIELD[entity]
        key = str(mutation.get("entity_key") or payload.get(key_field) or "").strip()
        if not key:
            raise BadChunkError(chunk_id, f"mutations[{index}]: no {key_field}")
        if payload.get(key_field) not in (None, "", key):
            raise BadChunkError(chunk_id, f"mutations[{index}]: entity_key does not match payload")
        occurred = str(mutation.get("occurred_at") or "") or EPOCH_TEXT
        known = self._known(entity, key)
        project = payload.get("project") or mutation.get("project") or known.get("project")
        if op == "upsert":
            item = {**known, **payload, key_field: key, "project": project}
            if entity == "observation":
                item.setdefault("updated_at", occurred)
            return self._upsert(entity, *self._state(entity, item)), key
        deleted_at = payload.get("deleted_at") or occurred
        hard = entity != "observation" or bool(payload.get("hard_delete") or payload.get("hard"))
        if not hard and known:
            # A soft delete keeps the row's full state; its clock is the time of the delete.
            updated = max(str(known.get("updated_at") or ""), deleted_at)
            item = {**known, "deleted_at": deleted_at, "updated_at": updated}
            return self._upsert(entity, *self._state("observation", item)), key
        own = project_name(project)
        moved = self.project is not None and own != self.project
        body: dict[str, Any] = {key_field: self._moved_key(entity, key) if moved else key}
        if known.get("session_id"):
            body["session_id"] = known["session_id"]
        body.update(project=self.project if moved else own, deleted_at=deleted_at, hard=hard)
        record = self._record(
            entity, "delete", body, deleted_at, normalize_scope(known.get("scope")), moved
        )
        return record, key

    def _relation(
        self, index: int, mutation: dict[str, Any], op: str
    ) -> tuple[dict[str, Any], str]:
        """A later Go version's relation upsert (docs/graph.md, "Replication") as the legacy record of its
        state, in the repository's project. A relation of another project moves there with its
        memories: its key and both ends take their moved keys, as those memories do. Its fields
        are checked by the store (or the server) like any relation record's: a bad one is
        quarantined there, alone."""
        chunk_id = self.chunk_id
        if op != "upsert":
            raise BadChunkError(chunk_id, f"mutations[{index}]: relation records are upserts only")
        payload = _payload(chunk_id, index, mutation.get("payload"))
        key = str(mutation.get("entity_key") or payload.get("sync_id") or "").strip()
        if not key:
            raise BadChunkError(chunk_id, f"mutations[{index}]: no sync_id")
        if payload.get("sync_id") not in (None, "", key):
            raise BadChunkError(chunk_id, f"mutations[{index}]: entity_key does not match payload")
        own = project_name(payload.get("project") or mutation.get("project"))
        project = self.project or own
        moved = self.project is not None and own != self.project
        occurred = str(mutation.get("occurred_at") or "") or EPOCH_TEXT
        body = {"source_id": "", "target_id": "", "relation": "", **payload}
        for end in ("source_id", "target_id"):
            if isinstance(body[end], str):
                body[end] = body[end].strip()
                if moved and body[end]:
                    body[end] = self._moved_key("observation", body[end])
        record_key = self._moved_key("relation", key) if moved else key
        state = relation_state(
            {"project": project, "payload": {**body, "sync_id": record_key, "project": project}}
        )
        if not payload.get("updated_at"):
            state["updated_at"] = str(payload.get("created_at") or occurred)
        unknown = {k: v for k, v in payload.items() if k not in state and k != "scope"}
        scope = "personal" if payload.get("scope") == "personal" else "project"
        record = self._record(
            "relation", "upsert", {**state, **unknown}, state["updated_at"], scope, moved
        )
        return record, key

    # --- feeding and reading --------------------------------------------------------------

    def add(self, section: str, index: int, item: Any) -> None:
        """One element of the document's ``section`` array (validated here)."""
        self.counts[section] += 1
        position = (_SECTION_RANK[section] << _POSITION_BITS) | index
        if section == "mutations":
            self._spool.execute(
                "INSERT INTO explicit(seq, item) VALUES (?, ?)", (index, orjson.dumps(item))
            )
            return
        try:
            validate_export_item(section, index, item)
        except ValidationError as exc:
            raise BadChunkError(self.chunk_id, str(exc)) from None
        entity = _ENTITY[section]
        state = _STATE[entity](item)
        self._spool.execute(
            """INSERT INTO typed(entity, key, pos, item) VALUES (?, ?, ?, ?)
               ON CONFLICT(entity, key) DO UPDATE SET item = excluded.item""",
            (entity, state[KEY_FIELD[entity]], position, orjson.dumps({**item, **state})),
        )

    def _keep(self, record: dict[str, Any], key: str, position: int) -> None:
        """Keep ``record`` for the entity the document names ``key`` (its record key differs
        when the row moved into the repository's project)."""
        self._spool.execute(
            """INSERT INTO final(entity, key, pos, rank, record) VALUES (?, ?, ?, ?, ?)
               ON CONFLICT(entity, key) DO UPDATE SET rank = excluded.rank,
                   record = excluded.record""",
            (record["entity"], key, position, _rank(record), orjson.dumps(record)),
        )

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record, once: session upserts, other upserts, other deletes, session
        deletes; within each, in the order the rows first appeared."""
        for record, _ in self.sized_records():
            yield record

    def sized_records(self) -> Iterator[tuple[dict[str, Any], int]]:
        """:meth:`records`, each with the size of its JSON text (to bound batches)."""
        spool = self._spool
        explicit_base = _SECTION_RANK["mutations"] << _POSITION_BITS
        # Cursors are read one row at a time while other statements write ``final``: SQLite
        # allows it, and each key is written once it has been read, never ahead of the cursor.
        for seq, raw in spool.execute("SELECT seq, item FROM explicit ORDER BY seq"):
            found = self._explicit(seq, orjson.loads(raw))
            if found is None:
                self.skipped += 1
                continue
            record, key = found
            row = spool.execute(
                "SELECT pos FROM typed WHERE entity = ? AND key = ?", (record["entity"], key)
            ).fetchone()
            self._keep(record, key, row[0] if row else explicit_base | seq)
        typed = spool.execute(
            """SELECT entity, key, pos, item FROM typed t WHERE NOT EXISTS
                   (SELECT 1 FROM final f WHERE f.entity = t.entity AND f.key = t.key)"""
        )  # the rows no explicit mutation replaced
        for entity, key, position, raw in typed:
            state, moved = self._state(entity, orjson.loads(raw))
            self._keep(self._upsert(entity, state, moved), key, position)
        for (raw,) in spool.execute("SELECT record FROM final ORDER BY rank, pos"):
            yield orjson.loads(raw), len(raw)


def go_chunk_records(
    chunk_id: str, document: dict[str, Any], *, project: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The mutation records of an older-format document held in memory, and how many relation
    mutations were skipped. Raises :class:`BadChunkError` naming the first bad row."""
    with GoConverter(chunk_id, project=project) as converter:
        for section, index, item in _document_elements(chunk_id, document):
            converter.add(section, index, item)
        records = list(converter.records())
        return records, converter.skipped


def _document_elements(chunk_id: str, document: dict[str, Any]) -> Iterable[tuple[str, int, Any]]:
    for section in _SECTION_RANK:
        items = document.get(section)
        if items is None:
            continue
        if not isinstance(items, list):
            raise BadChunkError(chunk_id, f"{section} must be a list")
    for section in _SECTION_RANK:
        for index, item in enumerate(document.get(section) or []):
            yield section, index, item
