"""Chunks pushed through the older chunk routes (docs/cloud.md, "Chunk routes (older clients)"): stored as their canonical
JSON per project, listed as a manifest, served back byte for byte. Their rows are also
decomposed into the mutation log (see :mod:`engram_cloud.legacy`), so clients of the mutation
routes see what chunk clients push.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from engram.times import iso
from engram_cloud import models

STORED, EXISTS, CONFLICT = "stored", "exists", "conflict"


def store(
    conn: Connection,
    *,
    project: str,
    chunk_id: str,
    payload: bytes,
    document: dict[str, Any],
    created_by: str,
    client_created_at: datetime | None,
    principal_id: int | None,
) -> str:
    """Store a chunk once: ``stored``, ``exists`` (same id and bytes: a retry) or ``conflict``."""
    c = models.chunks
    inserted = conn.execute(
        pg_insert(c)
        .values(
            project=project,
            chunk_id=chunk_id,
            created_by=created_by,
            client_created_at=client_created_at,
            payload=payload.decode(),
            sessions_count=len(document.get("sessions") or []),
            observations_count=len(document.get("observations") or []),
            prompts_count=len(document.get("prompts") or []),
            mutations_count=len(document.get("mutations") or []),
            principal_id=principal_id,
        )
        .on_conflict_do_nothing(index_elements=["project", "chunk_id"])
        .returning(c.c.id)
    ).first()
    if inserted is not None:
        return STORED
    held = conn.execute(
        select(c.c.payload).where(c.c.project == project, c.c.chunk_id == chunk_id)
    ).scalar_one()
    return EXISTS if held == payload.decode() else CONFLICT


def manifest(conn: Connection, project: str) -> dict[str, Any]:
    """``{"version": 1, "chunks": [...]}`` in the order the server received them."""
    c = models.chunks
    rows = conn.execute(select(c).where(c.c.project == project).order_by(c.c.id))
    return {
        "version": 1,
        "chunks": [
            {
                "id": r.chunk_id,
                "created_by": r.created_by,
                "created_at": iso(r.client_created_at or r.created_at),
                "sessions": r.sessions_count,
                "memories": r.observations_count,
                "prompts": r.prompts_count,
            }
            for r in rows
        ],
    }


def payload(conn: Connection, project: str, chunk_id: str) -> bytes | None:
    c = models.chunks
    text = conn.execute(
        select(c.c.payload).where(c.c.project == project, c.c.chunk_id == chunk_id)
    ).scalar_one_or_none()
    return None if text is None else text.encode()
