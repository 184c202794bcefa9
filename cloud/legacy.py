"""What older clients send, turned into mutation records: the Go tool's ``entries`` push shape
and its chunk documents (``{"sessions", "observations", "prompts", "mutations"}``).

Both become the deterministic legacy records of docs/architecture.md, "Identity, the journal and replication" through
:func:`engram.sync.git.go_chunk.go_chunk_records`, so pushing the same chunk or entry twice stores
nothing new, and every machine that imports the same rows another way produces the same mids.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from engram.sync.git.chunk import BadChunkError
from engram.sync.git.go_chunk import go_chunk_records
from engram_cloud.auth import normalize_project_name
from engram_cloud.sync_log import (
    Candidate,
    ClockBound,
    RecordRejected,
    Rejection,
    prepare_record,
)

CHUNK_SECTIONS = ("sessions", "observations", "prompts")
CLOUD_CHUNK_ID_LENGTH = 8  # the Go tool's cloud chunk ids: 8 hex of the canonical bytes


def _decoded(payload: Any) -> Any:
    """A payload object, a JSON string of one, or a JSON string of that string."""
    for _ in range(2):
        if not isinstance(payload, str):
            break
        try:
            payload = orjson.loads(payload.strip())
        except orjson.JSONDecodeError:
            raise ValueError("payload is not JSON") from None
    return payload


def entry_candidate(
    entry: Any, index: int, clock: ClockBound | None = None
) -> Candidate | Rejection:
    """One ``{"project", "entity", "entity_key", "op", "payload"}`` entry as a candidate
    record, or why it was rejected."""
    if not isinstance(entry, dict):
        return Rejection(index, None, "payload_invalid", "entry must be a JSON object")
    project = normalize_project_name(entry.get("project"))
    if not project:
        return Rejection(index, None, "empty_project", "mutation entries must specify a project")
    try:
        payload = _decoded(entry.get("payload"))
    except ValueError as exc:
        return Rejection(index, None, "payload_invalid", str(exc))
    if not isinstance(payload, dict):
        return Rejection(index, None, "payload_invalid", "payload must be a JSON object")
    mutation = {**entry, "project": project, "payload": {**payload, "project": project}}
    try:
        records, skipped = go_chunk_records("entries", {"mutations": [mutation]})
    except BadChunkError as exc:
        return Rejection(index, None, "payload_invalid", exc.reason.removeprefix("mutations[0]: "))
    if skipped or not records:
        entity = str(entry.get("entity") or "")[:50]
        return Rejection(index, None, "unsupported_entity", f"entity {entity!r} is not supported")
    try:
        return prepare_record(records[0], index, clock)
    except RecordRejected as exc:
        return Rejection(index, records[0]["mid"], exc.code, str(exc))


def canonical_chunk(data: Any, project: str) -> tuple[str, bytes, dict[str, Any]]:
    """``(chunk_id, canonical bytes, document)`` of a pushed chunk, every row and mutation set
    to ``project`` (docs/cloud.md, "Chunk routes (older clients)"). Raises :class:`ValueError` naming what is malformed."""
    if not isinstance(data, dict):
        raise ValueError("data must be a JSON object")
    document: dict[str, Any] = {}
    for section in CHUNK_SECTIONS:
        rows = data.get(section)
        if rows is None:
            rows = []
        if not isinstance(rows, list):
            raise ValueError(f"{section} must be a list")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ValueError(f"{section}[{i}] must be an object")
        document[section] = [{**row, "project": project} for row in rows]
    mutations = data.get("mutations")
    if mutations is not None:
        if not isinstance(mutations, list):
            raise ValueError("mutations must be a list")
        out = []
        for i, mutation in enumerate(mutations):
            if not isinstance(mutation, dict):
                raise ValueError(f"mutations[{i}] must be an object")
            try:
                payload = _decoded(mutation.get("payload"))
            except ValueError as exc:
                raise ValueError(f"mutations[{i}]: {exc}") from None
            if not isinstance(payload, dict):
                raise ValueError(f"mutations[{i}]: payload must be a JSON object")
            out.append({**mutation, "project": project, "payload": {**payload, "project": project}})
        document["mutations"] = out
    raw = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(raw).hexdigest()[:CLOUD_CHUNK_ID_LENGTH], raw, document


def chunk_candidates(
    chunk_id: str, document: dict[str, Any], clock: ClockBound | None = None
) -> tuple[list[Candidate], list[Rejection], int]:
    """The chunk's rows and mutations as candidate records, the rows rejected one by one (a NUL
    in one memory, a clock far ahead: the rest of the chunk still lands), and how many relation
    mutations were skipped. Raises :class:`ValueError` when the chunk's shape is malformed."""
    try:
        records, skipped = go_chunk_records(chunk_id, document)
    except BadChunkError as exc:
        raise ValueError(exc.reason) from None
    candidates: list[Candidate] = []
    rejected: list[Rejection] = []
    for index, record in enumerate(records):
        try:
            candidates.append(prepare_record(record, index, clock))
        except RecordRejected as exc:
            where = f"{record['entity']} {str(record['key'])[:100]!r}"
            rejected.append(Rejection(index, record["mid"], exc.code, f"{where}: {exc}"))
    return candidates, rejected, skipped
