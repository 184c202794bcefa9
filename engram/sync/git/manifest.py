"""The Go tool's ``.engram/manifest.json`` (docs/git-sync.md, "The directory"): read leniently, written only in
the Go tool's exact format (pure: bytes in, bytes out).

The Go tool imports the chunks its manifest lists, in the manifest's order (a chunk may name
sessions that only an earlier chunk holds), and takes the newest ``created_at`` as the
watermark of its next export. So the manifest is the Go tool's and we write it only to
(docs/git-sync.md, "Teams moving from the Go tool"): append Go-format chunks (``engram sync --go-compat``), take out the entries an
earlier version of Engram put there, and repair it when git left it unreadable — conflict
markers from two Go users syncing at once, or invalid JSON from the union merge an earlier
version of Engram set on it. Every write keeps each entry it can find, from both sides of a
conflict, in order, with its real ``created_by`` and ``created_at``.

For us it is only an index: import, export and status list the chunk files themselves, and the
manifest only tells who wrote a Go chunk and when (those chunks carry no header).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from engram.sync.git.chunk import GO_ID_LENGTH, is_chunk_id
from engram.sync.git.go_encode import go_indented

#: What the Go tool writes in a manifest it creates.
GO_MANIFEST_VERSION = 1
_MARKER = re.compile(rb"^(<{7,}|\|{7,}|={7,}|>{7,})(?:[ \t].*)?\r?$")
_FLAT_OBJECT = re.compile(rb"\{[^{}]*\}")


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One chunk as the Go tool's manifest lists it (``memories``: observations)."""

    id: str
    created_by: str = ""
    created_at: str = ""
    sessions: int = 0
    memories: int = 0
    prompts: int = 0

    @property
    def ours(self) -> bool:
        """Listed by an earlier version of Engram: our chunks have 16-hex ids, Go's 8."""
        return len(self.id) != GO_ID_LENGTH

    def to_go(self) -> dict[str, Any]:
        """The entry as the Go tool's struct marshals it (field order, every field)."""
        return {
            "id": self.id,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "sessions": self.sessions,
            "memories": self.memories,
            "prompts": self.prompts,
        }


def render_manifest(entries: Iterable[ManifestEntry], version: int = GO_MANIFEST_VERSION) -> bytes:
    """The manifest exactly as the Go tool writes it: entries in the order given, two-space
    JSON, no trailing newline."""
    return go_indented({"version": version, "chunks": [e.to_go() for e in entries]})


@dataclass(slots=True)
class ManifestReading:
    """What was found in a manifest file.

    ``state``: ``ok`` | ``missing`` | ``conflicted`` (git conflict markers) | ``invalid``.
    ``entries`` keeps the file's order (for a conflict: one side's, then what only the other
    side lists).
    """

    state: str
    entries: dict[str, ManifestEntry] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    version: int = GO_MANIFEST_VERSION

    @property
    def readable(self) -> bool:
        """Whether the Go tool can parse the file as it is."""
        return self.state in ("ok", "missing")

    @property
    def ours(self) -> list[str]:
        """Entries an earlier version of Engram wrote (they stop the Go tool)."""
        return [e.id for e in self.entries.values() if e.ours]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _entry(value: Any, problems: list[str]) -> ManifestEntry | None:
    if not isinstance(value, dict) or "id" not in value:
        return None
    chunk_id = value.get("id")
    if not is_chunk_id(chunk_id):
        # Never used as a path: ids only ever come from file names we listed ourselves.
        problems.append(f"entry with invalid chunk id {chunk_id!r} ignored")
        return None
    return ManifestEntry(
        id=chunk_id,
        created_by=_text(value.get("created_by")),
        created_at=_text(value.get("created_at")),
        sessions=_count(value.get("sessions")),
        memories=_count(value.get("memories", value.get("observations"))),
        prompts=_count(value.get("prompts")),
    )


def _salvage(raw: bytes, problems: list[str]) -> list[ManifestEntry]:
    """Entries that still parse inside a broken manifest (each entry is a flat object)."""
    found = []
    for match in _FLAT_OBJECT.finditer(raw):
        try:
            value = orjson.loads(match.group(0))
        except orjson.JSONDecodeError:
            continue
        entry = _entry(value, problems)
        if entry is not None:
            found.append(entry)
    return found


def _document(raw: bytes, problems: list[str]) -> tuple[list[ManifestEntry], int | None] | None:
    """The entries and version of a manifest that parses as JSON, else None."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict):
        return None
    chunks = document.get("chunks")
    if chunks is None and "chunks" in document:
        chunks = []  # Go writes an empty list it never filled as null
    if not isinstance(chunks, list):
        return None
    version = document.get("version")
    entries = [e for e in (_entry(value, problems) for value in chunks) if e is not None]
    return entries, version if isinstance(version, int) and not isinstance(version, bool) else None


def conflict_sides(raw: bytes) -> tuple[bytes, bytes] | None:
    """The two sides of a file git left with conflict markers (merge or diff3 style: the
    base section is dropped), or None when there are none."""
    if not any(_MARKER.match(line) for line in raw.splitlines()):
        return None
    ours: list[bytes] = []
    theirs: list[bytes] = []
    section = "both"
    for line in raw.splitlines(keepends=True):
        marker = _MARKER.match(line.rstrip(b"\n"))
        if marker:
            kind = marker.group(1)[:1]
            section = {b"<": "ours", b"|": "base", b"=": "theirs", b">": "both"}[kind]
            continue
        if section in ("both", "ours"):
            ours.append(line)
        if section in ("both", "theirs"):
            theirs.append(line)
    return b"".join(ours), b"".join(theirs)


def _side(raw: bytes, problems: list[str]) -> tuple[list[ManifestEntry], int | None]:
    parsed = _document(raw, problems)
    return parsed if parsed is not None else (_salvage(raw, problems), None)


def read_manifest(raw: bytes | None) -> ManifestReading:
    """Parse a manifest leniently: whatever state it is in, keep every entry that is usable,
    in order (first occurrence of an id wins)."""
    if raw is None:
        return ManifestReading("missing")
    problems: list[str] = []
    sides = conflict_sides(raw)
    if sides is not None:
        problems.append("has git conflict markers")
        (first, version), (second, _) = _side(sides[0], problems), _side(sides[1], problems)
        return ManifestReading(
            "conflicted", _ordered([*first, *second]), problems, version or GO_MANIFEST_VERSION
        )
    parsed = _document(raw, problems)
    if parsed is None:
        try:
            orjson.loads(raw)
            problems.append("has no chunks list")
        except orjson.JSONDecodeError as exc:
            problems.append(f"is not valid JSON ({exc})")
        return ManifestReading("invalid", _ordered(_salvage(raw, problems)), problems)
    entries, version = parsed
    return ManifestReading("ok", _ordered(entries), problems, version or GO_MANIFEST_VERSION)


def _ordered(entries: Iterable[ManifestEntry]) -> dict[str, ManifestEntry]:
    found: dict[str, ManifestEntry] = {}
    for entry in entries:
        found.setdefault(entry.id, entry)
    return found
