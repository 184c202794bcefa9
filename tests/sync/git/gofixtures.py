"""Chunks in the Go tool's older format (docs/git-sync.md, "Chunks of the Go tool"), built the way that tool writes
them: one compact JSON object (sessions, observations, prompts, then mutations), empty lists as
``null``, ``<``, ``>`` and ``&`` escaped, gzipped; the id is 8 hex of SHA-256 of those bytes."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any


def go_json(document: dict[str, Any]) -> bytes:
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.encode()


def go_chunk(
    sessions: list | None = None,
    observations: list | None = None,
    prompts: list | None = None,
    mutations: list | None = None,
) -> tuple[str, bytes, dict[str, Any]]:
    """(id, gzip bytes, document) of one Go-format chunk."""
    document: dict[str, Any] = {
        "sessions": sessions,
        "observations": observations,
        "prompts": prompts,
    }
    if mutations:
        document["mutations"] = mutations
    data = go_json(document)
    return hashlib.sha256(data).hexdigest()[:8], gzip.compress(data), document


def write_go_chunk(directory: Path, *parts: Any, **kw: Any) -> str:
    chunk_id, raw, _ = go_chunk(*parts, **kw)
    (directory / "chunks").mkdir(parents=True, exist_ok=True)
    (directory / "chunks" / f"{chunk_id}.jsonl.gz").write_bytes(raw)
    return chunk_id


SESSIONS = [
    {
        "id": "go-s1",
        "project": "Acme",
        "directory": "/src/acme",
        "started_at": "2026-01-02 03:00:00",
        "ended_at": "2026-01-02 04:00:00",
        "summary": "Fixed auth & <tokens>",
    },
]
OBSERVATIONS = [
    {
        "id": 1,
        "sync_id": "obs-go000000000001",
        "session_id": "go-s1",
        "type": "bugfix",
        "title": "Token refresh",
        "content": "**What**: refresh <before> expiry & retry",
        "project": "Acme",
        "scope": "project",
        "topic_key": "auth/refresh",
        "revision_count": 2,
        "duplicate_count": 1,
        "created_at": "2026-01-02 03:10:00",
        "updated_at": "2026-01-02 03:20:00",
    },
    {
        "id": 2,
        "sync_id": "obs-go000000000002",
        "session_id": "go-s1",
        "type": "decision",
        "title": "Old idea",
        "content": "dropped later",
        "project": "acme",
        "scope": "project",
        "revision_count": 1,
        "duplicate_count": 1,
        "created_at": "2026-01-02 03:11:00",
        "updated_at": "2026-01-02 03:30:00",
        "deleted_at": "2026-01-02 03:30:00",
    },
]
PROMPTS = [
    {
        "id": 1,
        "sync_id": "prompt-go0000000001",
        "session_id": "go-s1",
        "content": "why does login expire?",
        "project": "acme",
        "created_at": "2026-01-02 03:05:00",
    },
]


def go_mutation(
    seq: int,
    entity: str,
    key: str,
    op: str,
    payload: dict,
    *,
    double: bool = False,
    occurred_at: str = "2026-01-03 10:00:00",
) -> dict[str, Any]:
    text = json.dumps(payload)
    return {
        "seq": seq,
        "target_key": "cloud",
        "entity": entity,
        "entity_key": key,
        "op": op,
        "payload": json.dumps(text) if double else text,
        "source": "local",
        "project": "acme",
        "occurred_at": occurred_at,
    }
