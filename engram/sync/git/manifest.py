"""``.engram/manifest.json``: an index of the chunks, rebuilt from them, never trusted (pure).

The chunk files are the truth. A git union merge can leave the manifest valid JSON that lacks an
entry, or broken JSON, or (without the ``.gitattributes`` line) conflict markers; so every sync
rebuilds it from the chunk headers. Reading it serves only two purposes: to report that it is
stale, and to recover who wrote an older-format chunk and when (those chunks have no header).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from engram.sync.git.chunk import ChunkHeader, is_chunk_id

MANIFEST_VERSION = 2
_CONFLICT_MARKER = re.compile(rb"^(<{7}|={7}|>{7})(\s|$)", re.MULTILINE)
_FLAT_OBJECT = re.compile(rb"\{[^{}]*\}")


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One chunk as the manifest lists it (counts are entities per kind)."""

    id: str
    created_by: str
    created_at: str
    sessions: int = 0
    memories: int = 0
    prompts: int = 0
    mutations: int = 0

    @classmethod
    def from_header(cls, chunk_id: str, header: ChunkHeader) -> ManifestEntry:
        counts = header.counts
        return cls(
            id=chunk_id,
            created_by=header.created_by,
            created_at=header.created_at,
            sessions=counts.get("sessions", 0),
            memories=counts.get("observations", 0),
            prompts=counts.get("prompts", 0),
            mutations=counts.get("mutations", 0),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def render_manifest(entries: Iterable[ManifestEntry]) -> bytes:
    """The manifest document: sorted by (created_at, id), 2-space JSON, newline-terminated.

    The same chunks give the same bytes on every machine, so after a merge both sides agree.
    """
    ordered = sorted(entries, key=lambda e: (e.created_at, e.id))
    document = {"version": MANIFEST_VERSION, "chunks": [e.to_dict() for e in ordered]}
    return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"


@dataclass(slots=True)
class ManifestReading:
    """What was found in a manifest file.

    ``state``: ``ok`` | ``missing`` | ``conflicted`` (git conflict markers) | ``invalid``.
    """

    state: str
    entries: dict[str, ManifestEntry] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _entry(value: Any, problems: list[str]) -> ManifestEntry | None:
    if not isinstance(value, dict) or "id" not in value:
        return None
    chunk_id = value.get("id")
    if not is_chunk_id(chunk_id):
        # Never used as a path: ids only ever come from file names we listed ourselves.
        problems.append(f"manifest entry with invalid chunk id {chunk_id!r} ignored")
        return None

    def number(*names: str) -> int:
        for name in names:
            item = value.get(name)
            if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
                return item
        return 0

    return ManifestEntry(
        id=chunk_id,
        created_by=str(value.get("created_by") or "unknown"),
        created_at=str(value.get("created_at") or ""),
        sessions=number("sessions"),
        memories=number("memories", "observations"),
        prompts=number("prompts"),
        mutations=number("mutations"),
    )


def _salvage(raw: bytes, problems: list[str]) -> dict[str, ManifestEntry]:
    """Entries that still parse inside a broken manifest (each entry is a flat object)."""
    found: dict[str, ManifestEntry] = {}
    for match in _FLAT_OBJECT.finditer(raw):
        try:
            value = orjson.loads(match.group(0))
        except orjson.JSONDecodeError:
            continue
        entry = _entry(value, problems)
        if entry is not None:
            found[entry.id] = entry
    return found


def read_manifest(raw: bytes | None) -> ManifestReading:
    """Parse a manifest leniently: whatever state it is in, keep every entry that is usable."""
    if raw is None:
        return ManifestReading("missing")
    problems: list[str] = []
    if _CONFLICT_MARKER.search(raw):
        problems.append("manifest.json has git conflict markers")
        return ManifestReading("conflicted", _salvage(raw, problems), problems)
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        problems.append(f"manifest.json is not valid JSON ({exc})")
        return ManifestReading("invalid", _salvage(raw, problems), problems)
    chunks = document.get("chunks") if isinstance(document, dict) else None
    if not isinstance(chunks, list):
        problems.append("manifest.json has no chunks list")
        return ManifestReading("invalid", _salvage(raw, problems), problems)
    entries: dict[str, ManifestEntry] = {}
    for value in chunks:
        entry = _entry(value, problems)
        if entry is not None:
            entries[entry.id] = entry
    return ManifestReading("ok", entries, problems)
