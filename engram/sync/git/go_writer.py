"""Documents for the Go tool: its single-object chunks (``engram sync --go-compat``) and its
``0.1.0`` JSON export (``engram export --format go``, the way back), built from store rows
(pure).

The Go tool reads them with ``encoding/json`` into its own structs, so every field has the type
its struct declares, optional fields are left out when empty (``omitempty``), and fields it does
not know are ignored: we add ``sync_id`` to memories and prompts, so that our own import of a
chunk we wrote addresses the same memory, and the Go tool drops it. The Go tool imports a chunk
with foreign keys on, so every chunk carries the sessions its memories and prompts name: a
chunk of ours never depends on another one.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from engram.record import EPOCH_TEXT
from engram.sync.git.chunk import GO_ID_LENGTH, content_id
from engram.sync.git.go_encode import go_compact, go_indented

Row = Mapping[str, Any]


def go_session(row: Row) -> dict[str, Any]:
    """A session as the Go tool's ``Session`` struct."""
    item: dict[str, Any] = {
        "id": row["id"],
        "project": row["project"] or "",
        "directory": row["directory"] or "",
        "started_at": row["started_at"] or EPOCH_TEXT,
    }
    if row["ended_at"]:
        item["ended_at"] = row["ended_at"]
    if row["summary"]:
        item["summary"] = row["summary"]
    return item


def go_observation(row: Row, *, local_id: bool = False) -> dict[str, Any]:
    """A memory as the Go tool's ``Observation`` struct (plus ``sync_id``, which it ignores).
    ``local_id``: keep this machine's integer id (an export does, as the Go tool's does; a
    chunk does not: local ids never travel)."""
    item: dict[str, Any] = {"id": row["id"]} if local_id else {}
    item.update(sync_id=row["sync_id"], session_id=row["session_id"], type=row["type"])
    item.update(title=row["title"], content=row["content"])
    if row["tool_name"]:
        item["tool_name"] = row["tool_name"]
    if row["project"]:
        item["project"] = row["project"]
    item["scope"] = row["scope"] or "project"
    if row["topic_key"]:
        item["topic_key"] = row["topic_key"]
    item["revision_count"] = max(1, int(row["revision_count"] or 1))
    item["duplicate_count"] = max(1, int(row["duplicate_count"] or 1))
    if row["last_seen_at"]:
        item["last_seen_at"] = row["last_seen_at"]
    item["created_at"] = row["created_at"] or EPOCH_TEXT
    item["updated_at"] = row["updated_at"] or item["created_at"]
    if row["deleted_at"]:
        item["deleted_at"] = row["deleted_at"]
    return item


def go_prompt(row: Row, *, local_id: bool = False) -> dict[str, Any]:
    """A prompt as the Go tool's ``Prompt`` struct (plus ``sync_id``)."""
    item: dict[str, Any] = {"id": row["id"]} if local_id else {}
    item.update(sync_id=row["sync_id"], session_id=row["session_id"], content=row["content"])
    if row["project"]:
        item["project"] = row["project"]
    item["created_at"] = row["created_at"] or EPOCH_TEXT
    return item


def stub_session(session_id: str, project: str) -> dict[str, Any]:
    """A session the store does not hold but a row names (the Go tool needs one to exist)."""
    return {"id": session_id, "project": project, "directory": "", "started_at": EPOCH_TEXT}


def go_document(
    sessions: list[dict[str, Any]],
    observations: list[dict[str, Any]],
    prompts: list[dict[str, Any]],
) -> dict[str, Any]:
    """A chunk document in the Go tool's field order; empty lists as ``null`` as it writes
    them."""
    return {
        "sessions": sessions or None,
        "observations": observations or None,
        "prompts": prompts or None,
    }


@dataclass(frozen=True, slots=True)
class GoChunk:
    """A Go-format chunk ready to be written: its id (8 hex of SHA-256 of the bytes), the
    uncompressed bytes, what it holds and the newest time any of its rows carries (store
    text: what its manifest entry's ``created_at`` is made of, see
    :func:`engram.sync.git.go_compat.entry_time`)."""

    id: str
    data: bytes
    sessions: int
    observations: int
    prompts: int
    newest: str = EPOCH_TEXT

    def compressed(self) -> bytes:
        return gzip.compress(self.data, compresslevel=6, mtime=0)


#: The row times the Go tool's export compares with its watermark (later versions also
#: compare ``updated_at``).
_ROW_TIMES = {
    "sessions": ("started_at",),
    "observations": ("created_at", "updated_at"),
    "prompts": ("created_at",),
}


def row_time(section: str, row: Any) -> str:
    """The newest of the times the Go tool's export compares in one row of a document's
    ``section`` (store text; ``""`` when it has none)."""
    if not isinstance(row, Mapping):
        return ""
    return max(
        (v for v in (row.get(n) for n in _ROW_TIMES.get(section, ())) if isinstance(v, str)),
        default="",
    )


def newest_row_time(document: Mapping[str, Any]) -> str:
    """The newest time a row of a Go-format document carries (store text)."""
    times = [
        row_time(section, row) for section in _ROW_TIMES for row in document.get(section) or ()
    ]
    return max([EPOCH_TEXT, *times])


def encode_go_chunk(document: dict[str, Any]) -> GoChunk:
    data = go_compact(document)
    return GoChunk(
        id=content_id(data, GO_ID_LENGTH),
        data=data,
        sessions=len(document.get("sessions") or ()),
        observations=len(document.get("observations") or ()),
        prompts=len(document.get("prompts") or ()),
        newest=newest_row_time(document),
    )


@dataclass(slots=True)
class _Pack:
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    observations: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0

    def empty(self) -> bool:
        return not (self.sessions or self.observations or self.prompts)

    def seal(self) -> GoChunk:
        return encode_go_chunk(
            go_document(list(self.sessions.values()), self.observations, self.prompts)
        )


def pack_go_chunks(
    sessions: Mapping[str, dict[str, Any]],
    new_sessions: Iterable[str],
    observations: Iterable[dict[str, Any]],
    prompts: Iterable[dict[str, Any]],
    *,
    limit: int,
) -> Iterator[GoChunk]:
    """Self-contained Go chunks of at most about ``limit`` bytes: each holds the sessions its
    memories and prompts name (``sessions``: every session by id), and ``new_sessions`` go
    into the first one."""
    pack = _Pack()

    def add_session(session_id: str) -> None:
        if session_id not in pack.sessions:
            item = sessions[session_id]
            pack.sessions[session_id] = item
            pack.size += len(go_compact(item))

    for session_id in new_sessions:
        add_session(session_id)
    for kind, items in (("observations", observations), ("prompts", prompts)):
        for item in items:
            size = len(go_compact(item))
            if not pack.empty() and pack.size + size > limit:
                yield pack.seal()
                pack = _Pack()
            add_session(item["session_id"])
            getattr(pack, kind).append(item)
            pack.size += size
    if not pack.empty():
        yield pack.seal()


def go_export(document: Mapping[str, Any]) -> bytes:
    """An ``engram export`` document (``0.1.0``) as the Go tool writes its own export, for
    ``engram-go import``: its field shapes, two-space JSON, empty lists as ``null``, and a
    session row for every session a memory or prompt names (the Go tool imports with foreign
    keys on, and all or nothing)."""
    sessions: dict[str, dict[str, Any]] = {}
    for row in document.get("sessions") or ():
        sessions.setdefault(row["id"], go_session(row))
    observations = [go_observation(r, local_id=True) for r in document.get("observations") or ()]
    prompts = [go_prompt(r, local_id=True) for r in document.get("prompts") or ()]
    for item in (*observations, *prompts):
        if item["session_id"] not in sessions:
            sessions[item["session_id"]] = stub_session(item["session_id"], item.get("project", ""))
    return go_indented(
        {
            "version": document.get("version", "0.1.0"),
            "exported_at": document.get("exported_at", ""),
            "sessions": list(sessions.values()) or None,
            "observations": observations or None,
            "prompts": prompts or None,
        }
    )
