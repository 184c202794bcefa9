"""Building mutation records for cloud tests: real ones from a real local store, and precise
ones by hand for the edge cases."""

from __future__ import annotations

import itertools
import secrets
from typing import Any

import orjson

from engram.record import build_record, format_hlc
from engram.store import Store

ORIGIN = "a1b2c3d4e5f60718"
_clock = itertools.count(1)


def next_hlc(origin: str = ORIGIN, wall_ms: int = 1_763_756_100_000) -> str:
    return format_hlc(wall_ms + next(_clock), 0, origin)


def observation(
    key: str | None = None,
    *,
    project: str = "acme",
    title: str = "Fixed the login timeout",
    content: str = "Raised the pool size; the timeout came from exhausted connections.",
    hlc: str | None = None,
    op: str = "upsert",
    session_id: str = "s-1",
    **payload: Any,
) -> dict[str, Any]:
    key = key or "obs-" + secrets.token_hex(8)
    body = {
        "sync_id": key,
        "session_id": session_id,
        "type": "bugfix",
        "title": title,
        "content": content,
        "tool_name": None,
        "project": project,
        "scope": "project",
        "topic_key": None,
        "revision_count": 1,
        "duplicate_count": 1,
        "created_at": "2026-11-21 10:00:00",
        "updated_at": "2026-11-21 10:00:00",
        "deleted_at": None,
        **payload,
    }
    hlc = hlc or next_hlc()
    return build_record(
        mid=secrets.token_hex(16),
        hlc=hlc,
        origin=hlc[-16:],
        entity="observation",
        key=key,
        op=op,
        project=project,
        scope="project",
        payload=body,
    )


def session(key: str = "s-1", *, project: str = "acme", hlc: str | None = None, **payload: Any):
    body = {
        "id": key,
        "project": project,
        "directory": "/src/acme",
        "started_at": "2026-11-21 09:00:00",
        "ended_at": None,
        "summary": None,
        **payload,
    }
    hlc = hlc or next_hlc()
    return build_record(
        mid=secrets.token_hex(16),
        hlc=hlc,
        origin=hlc[-16:],
        entity="session",
        key=key,
        op="upsert",
        project=project,
        scope="project",
        payload=body,
    )


def prompt(
    key: str | None = None,
    *,
    project: str = "acme",
    content: str = "why is login slow?",
    session_id: str = "s-1",
    hlc: str | None = None,
) -> dict[str, Any]:
    key = key or "prompt-" + secrets.token_hex(8)
    body = {
        "sync_id": key,
        "session_id": session_id,
        "content": content,
        "project": project,
        "created_at": "2026-11-21 10:01:00",
    }
    hlc = hlc or next_hlc()
    return build_record(
        mid=secrets.token_hex(16),
        hlc=hlc,
        origin=hlc[-16:],
        entity="prompt",
        key=key,
        op="upsert",
        project=project,
        scope="project",
        payload=body,
    )


def delete(
    entity: str,
    key: str,
    *,
    project: str = "acme",
    hard: bool = True,
    hlc: str | None = None,
    **payload: Any,
) -> dict[str, Any]:
    key_field = "id" if entity == "session" else "sync_id"
    body = {
        key_field: key,
        "project": project,
        "deleted_at": "2026-11-21 11:00:00",
        "hard": hard,
        **payload,
    }
    hlc = hlc or next_hlc()
    return build_record(
        mid=secrets.token_hex(16),
        hlc=hlc,
        origin=hlc[-16:],
        entity=entity,
        key=key,
        op="delete",
        project=project,
        scope="project",
        payload=body,
    )


def store_records(store: Store, target: str = "cloud:test") -> list[dict[str, Any]]:
    """Everything a real local store journaled (what its cloud client would push)."""
    return [orjson.loads(entry.record) for entry in store.journal.pending(target)]


def push_body(records: list[dict[str, Any]], created_by: str = "alice") -> dict[str, Any]:
    return {"created_by": created_by, "mutations": records}
