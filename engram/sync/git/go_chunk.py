"""Chunks in the older single-object format (the Go tool's ``{"sessions", "observations",
"prompts", "mutations"}`` document) turned into mutation records, pure.

Every row becomes the deterministic legacy record of DESIGN §3 (origin zero, hlc from the row's
``updated_at``, mid from key/time/op), built with the same rules as ``engram import`` of a
``0.1.0`` export, so every machine importing the same chunk — or the same rows by another
route — produces the same mutations. Explicit ``mutations`` entries (later Go versions) win
over the typed row of the same entity, as in the reference.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from engram.errors import ValidationError
from engram.project import project_name
from engram.record import EPOCH_TEXT, KEY_FIELD, legacy_record
from engram.store.exchange import validate_export
from engram.sync.git.chunk import BadChunkError
from engram.text import normalize_scope, normalize_topic_key

#: Entities of newer Go versions that this Engram does not replicate yet: skipped, counted.
UNSUPPORTED_ENTITIES = ("relation",)
_ORDER = {("session", "upsert"): 0, ("session", "delete"): 3}


def _derived_id(prefix: str, *parts: Any) -> str:
    """A sync id for an old row that has none, the same on every machine (from its content)."""
    raw = "\0".join("" if p is None else str(p) for p in parts)
    return prefix + hashlib.sha256(raw.encode()).hexdigest()[:16]


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
    sync_id = (item.get("sync_id") or "").strip() or _derived_id(
        "obs-", item.get("session_id"), created, item.get("title"), item.get("content")
    )
    return {
        "sync_id": sync_id,
        "session_id": (item.get("session_id") or "").strip() or "manual-save",
        "type": (item.get("type") or "").strip() or "manual",
        "title": item.get("title") or "Untitled observation",
        "content": item.get("content") or "",
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


def _prompt_state(item: dict[str, Any]) -> dict[str, Any]:
    created = item.get("created_at") or EPOCH_TEXT
    sync_id = (item.get("sync_id") or "").strip() or _derived_id(
        "prompt-", item.get("session_id"), created, item.get("content")
    )
    return {
        "sync_id": sync_id,
        "session_id": (item.get("session_id") or "").strip() or "manual-save",
        "content": item.get("content") or "",
        "project": project_name(item.get("project")),
        "created_at": created,
    }


_STATE = {"session": _session_state, "observation": _observation_state, "prompt": _prompt_state}


def _updated_at(entity: str, state: dict[str, Any]) -> str:
    if entity == "session":
        return state["ended_at"] or state["started_at"]
    if entity == "observation":
        return state["updated_at"]
    return state["created_at"]


def _upsert(entity: str, state: dict[str, Any]) -> dict[str, Any]:
    """The legacy record of a row, as ``engram import`` journals it (soft-deleted observations
    become deletes that keep their full state)."""
    op = "delete" if entity == "observation" and state.get("deleted_at") else "upsert"
    return legacy_record(
        entity=entity,
        op=op,
        payload=state if op == "upsert" else {**state, "hard": False},
        updated_at=_updated_at(entity, state),
        project=state["project"],
        scope=state.get("scope", "project"),
    )


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


def _explicit(
    chunk_id: str,
    index: int,
    mutation: Any,
    typed: dict[tuple[str, str], dict[str, Any]],
) -> dict[str, Any] | None:
    if not isinstance(mutation, dict):
        raise BadChunkError(chunk_id, f"mutations[{index}] must be an object")
    entity = str(mutation.get("entity") or "").strip()
    op = str(mutation.get("op") or "").strip()
    if entity in UNSUPPORTED_ENTITIES:
        return None
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
    known = typed.get((entity, key), {})
    project = payload.get("project") or mutation.get("project") or known.get("project")
    if op == "upsert":
        item = {**known, **payload, key_field: key, "project": project}
        if entity == "observation":
            item.setdefault("updated_at", occurred)
        return _upsert(entity, _STATE[entity](item))
    deleted_at = payload.get("deleted_at") or occurred
    hard = entity != "observation" or bool(payload.get("hard_delete") or payload.get("hard"))
    if not hard and known:
        # A soft delete keeps the row's full state; its clock is the time of the delete.
        updated = max(str(known.get("updated_at") or ""), deleted_at)
        state = _observation_state({**known, "deleted_at": deleted_at, "updated_at": updated})
        return _upsert(entity, state)
    body: dict[str, Any] = {key_field: key}
    if known.get("session_id"):
        body["session_id"] = known["session_id"]
    body.update(project=project_name(project), deleted_at=deleted_at, hard=hard)
    return legacy_record(
        entity=entity,
        op="delete",
        payload=body,
        updated_at=deleted_at,
        project=body["project"],
        scope=normalize_scope(known.get("scope")),
    )


def go_chunk_records(chunk_id: str, document: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The mutation records of an older-format chunk, and how many relation mutations were
    skipped. Raises :class:`BadChunkError` naming the first bad row."""
    try:
        sections = validate_export({**document, "version": "0.1.0"})
    except ValidationError as exc:
        raise BadChunkError(chunk_id, str(exc)) from None
    raw_mutations = document.get("mutations") or []
    if not isinstance(raw_mutations, list):
        raise BadChunkError(chunk_id, "mutations must be a list")
    typed: dict[tuple[str, str], dict[str, Any]] = {}
    for entity, section in (
        ("session", "sessions"),
        ("observation", "observations"),
        ("prompt", "prompts"),
    ):
        for item in sections[section]:
            state = _STATE[entity](item)
            typed[(entity, state[KEY_FIELD[entity]])] = {**item, **state}
    records: dict[tuple[str, str], dict[str, Any]] = {
        (entity, key): _upsert(entity, _STATE[entity](item))
        for (entity, key), item in typed.items()
    }
    skipped = 0
    for index, mutation in enumerate(raw_mutations):
        record = _explicit(chunk_id, index, mutation, typed)
        if record is None:
            skipped += 1
            continue
        records[(record["entity"], record["key"])] = record  # explicit wins, later wins
    ordered = sorted(
        records.values(),
        key=lambda r: _ORDER.get((r["entity"], r["op"]), 1 if r["op"] == "upsert" else 2),
    )
    return ordered, skipped
