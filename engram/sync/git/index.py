"""Our index, ``.engram/log/index.jsonl``: one JSON line per chunk of ours, rebuilt from the
chunk headers by every ``engram sync`` (pure: bytes in, bytes out).

One line per chunk, so two syncs that each add a chunk add different lines, and git merges the
file with ``merge=union`` (``.engram/.gitattributes``) without ever stopping or producing
something unreadable: a reader takes every line that parses and ignores the rest. It is only an
index — import, export and status list the chunk files themselves — kept for people and tools
that want to see who wrote what without inflating every chunk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from engram.sync.git.chunk import ChunkHeader, is_chunk_id, shown_counts


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One of our chunks: who wrote it, when, and what it holds."""

    id: str
    created_by: str
    created_at: str
    counts: dict[str, int]

    @classmethod
    def from_header(cls, chunk_id: str, header: ChunkHeader) -> IndexEntry:
        return cls(chunk_id, header.created_by, header.created_at, dict(header.counts))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "counts": shown_counts(self.counts),
        }


def render_index(entries: Iterable[IndexEntry]) -> bytes:
    """The index: one compact line per chunk, sorted by (created_at, id), so the same chunks
    give the same bytes on every machine."""
    ordered = sorted(entries, key=lambda e: (e.created_at, e.id))
    return b"".join(orjson.dumps(e.to_dict()) + b"\n" for e in ordered)


@dataclass(slots=True)
class IndexReading:
    """What an index file lists. ``state``: ``ok`` | ``missing``; ``skipped``: lines that did
    not parse as an entry (a hand edit, a broken merge)."""

    state: str
    ids: list[str] = field(default_factory=list)
    skipped: int = 0


def read_index(raw: bytes | None) -> IndexReading:
    if raw is None:
        return IndexReading("missing")
    reading = IndexReading("ok")
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            reading.skipped += 1
            continue
        chunk_id = value.get("id") if isinstance(value, dict) else None
        if is_chunk_id(chunk_id):
            if chunk_id not in reading.ids:
                reading.ids.append(chunk_id)
        else:
            reading.skipped += 1
    return reading
