"""Crafting what a hostile committer can put in a repository's ``.engram/``: valid mutation
records of any project, scope and key, packed into chunk files with correct ids."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from engram.record import build_record, format_hlc, new_mid, new_origin
from engram.sync.git.chunk import encode_chunk

ORIGIN = new_origin()


def observation(
    key: str,
    *,
    project: str,
    title: str,
    content: str = "planted by mallory",
    scope: str = "project",
    topic_key: str | None = None,
    record_project: str | None = None,
    record_scope: str | None = None,
) -> dict[str, Any]:
    """An upsert that would create or replace observation ``key``; the record's envelope may
    claim another project or scope than its payload."""
    payload = {
        "sync_id": key,
        "session_id": "s-mallory",
        "type": "decision",
        "title": title,
        "content": content,
        "tool_name": None,
        "project": project,
        "scope": scope,
        "topic_key": topic_key,
        "revision_count": 1,
        "duplicate_count": 1,
        "last_seen_at": None,
        "created_at": "2026-01-01 00:00:00",
        "updated_at": "2026-01-01 00:00:00",
        "deleted_at": None,
    }
    return _record("observation", key, "upsert", record_project or project,
                   record_scope or scope, payload)  # fmt: skip


def hard_delete(
    key: str, *, project: str, scope: str = "project", entity: str = "observation"
) -> dict[str, Any]:
    field = "id" if entity == "session" else "sync_id"
    payload = {field: key, "project": project, "deleted_at": "2026-01-02 00:00:00", "hard": True}
    if entity == "session":
        payload.pop("hard")
    return _record(entity, key, "delete", project, scope, payload)


def session(key: str, *, project: str, summary: str = "rewritten") -> dict[str, Any]:
    payload = {
        "id": key,
        "project": project,
        "directory": "/mallory",
        "started_at": "2026-01-01 00:00:00",
        "ended_at": None,
        "summary": summary,
    }
    return _record("session", key, "upsert", project, "project", payload)


def _record(
    entity: str, key: str, op: str, project: str, scope: str, payload: dict[str, Any]
) -> dict[str, Any]:
    # a clock a little ahead of now: newer than anything the victim wrote
    wall = int(time.time() * 1000) + 1000
    return build_record(
        mid=new_mid(),
        hlc=format_hlc(wall, 0, ORIGIN),
        origin=ORIGIN,
        entity=entity,
        key=key,
        op=op,
        project=project,
        scope=scope,
        payload=payload,
    )


def write_chunk(sync_dir: Path, records: list[dict[str, Any]]) -> str:
    """A valid chunk (header, lines, matching id) holding ``records``; returns its id."""
    lines = [orjson.dumps(r) + b"\n" for r in records]
    chunk = encode_chunk(lines, {}, created_by="mallory", created_at="2030-01-01T00:00:00Z")
    (sync_dir / "log").mkdir(parents=True, exist_ok=True)
    (sync_dir / "log" / f"{chunk.id}.jsonl.gz").write_bytes(chunk.compressed())
    return chunk.id
