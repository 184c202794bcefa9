"""The git-sync chunk format (docs/git-sync.md, "Chunks") and its encoder, pure: no files, no store.

A chunk is gzipped JSON Lines. Line 1 is a header, every further line one mutation record (the
exact journal text). Its id is the first 16 hex digits of the SHA-256 of the *uncompressed*
bytes, so a chunk names its own content and any change to it is detected on import. Reading
chunks (ours, and the Go tool's older single-object format) is :mod:`engram.sync.git.stream`'s
job: always as a stream, with caps.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, TypeVar

import orjson

from engram.errors import UnsupportedFormatError

CHUNK_FORMAT = 2
#: Uncompressed size of one chunk; a larger export writes several chunks in one run.
MAX_CHUNK_BYTES = 4 * 1024 * 1024
ID_LENGTH = 16
#: The Go tool names its chunks by the first 8 hex digits of their hash (go_writer.py).
GO_ID_LENGTH = 8
CHUNK_FILE = re.compile(r"^([0-9a-f]{16}|[0-9a-f]{8})\.jsonl\.gz$")
CHUNK_ID = re.compile(r"^(?:[0-9a-f]{16}|[0-9a-f]{8})$")
COUNT_NAMES = ("sessions", "observations", "prompts", "relations", "mutations")
_ENTITY_COUNT = {
    "session": "sessions",
    "observation": "observations",
    "prompt": "prompts",
    "relation": "relations",
}


def shown_counts(counts: dict[str, int]) -> dict[str, int]:
    """A chunk's counts as its header and our index write them: ``relations`` only when there
    are some, so a chunk without them keeps the header (and the id) that versions before
    relations write for the same records."""
    return {
        name: int(counts.get(name, 0))
        for name in COUNT_NAMES
        if name != "relations" or counts.get(name)
    }


class BadChunkError(UnsupportedFormatError):
    """A chunk that cannot be used: truncated, corrupt, not matching its id, malformed."""

    def __init__(self, chunk_id: str, reason: str) -> None:
        super().__init__(f"chunk {chunk_id}: {reason}")
        self.chunk_id = chunk_id
        self.reason = reason


def content_id(data: bytes, length: int = ID_LENGTH) -> str:
    """The id of uncompressed chunk bytes: a prefix of their SHA-256."""
    return hashlib.sha256(data).hexdigest()[:length]


def is_chunk_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a chunk id (16 hex, or 8 hex for the older format) and nothing
    else — in particular never a path."""
    return isinstance(value, str) and CHUNK_ID.match(value) is not None


@dataclass(frozen=True, slots=True)
class ChunkHeader:
    """What line 1 says about a chunk (for an older-format chunk: what its content says)."""

    created_by: str
    created_at: str
    counts: dict[str, int]
    format: int = CHUNK_FORMAT

    def to_dict(self) -> dict[str, Any]:
        return {
            "engram_chunk": self.format,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "counts": shown_counts(self.counts),
        }


@dataclass(frozen=True, slots=True)
class EncodedChunk:
    """A chunk ready to be written: its id, uncompressed bytes and header."""

    id: str
    data: bytes
    header: ChunkHeader

    def compressed(self) -> bytes:
        # mtime=0 keeps the file bytes a function of the content alone.
        return gzip.compress(self.data, compresslevel=6, mtime=0)


class PackItem(Protocol):
    """A journal row as the packer needs it (``engram.store.journal.JournalEntry`` fits)."""

    @property
    def record(self) -> str: ...
    @property
    def entity(self) -> str: ...
    @property
    def key(self) -> str: ...


#: Whatever kind of item is packed comes back with its chunk (journal entries, for export).
Item = TypeVar("Item", bound=PackItem)


def record_line(text: str) -> bytes:
    """One record as a chunk line. Journal texts are compact orjson already; a text received
    pretty-printed from elsewhere is re-serialized so that it stays on one line."""
    if "\n" in text or "\r" in text:
        return orjson.dumps(orjson.loads(text)) + b"\n"
    return text.encode() + b"\n"


def encode_chunk(
    lines: Iterable[bytes], counts: dict[str, int], *, created_by: str, created_at: str
) -> EncodedChunk:
    """Assemble header + ``\\n``-terminated record lines into a chunk and name it."""
    header = ChunkHeader(created_by=created_by, created_at=created_at, counts=counts)
    data = orjson.dumps(header.to_dict()) + b"\n" + b"".join(lines)
    return EncodedChunk(content_id(data), data, header)


#: Room kept for the header line when filling a chunk (its counts grow with the chunk).
HEADER_RESERVE = 512


def pack_chunks(
    items: Iterable[Item],
    *,
    created_by: str,
    created_at: str,
    limit: int = MAX_CHUNK_BYTES,
) -> Iterator[tuple[EncodedChunk, list[Item]]]:
    """Group records into chunks of at most ``limit`` uncompressed bytes, in order.

    Yields each chunk with the items it holds (so the caller can mark exactly those delivered).
    A single record larger than the limit gets a chunk of its own rather than being refused.
    """
    lines: list[bytes] = []
    held: list[Item] = []
    keys: dict[str, set[str]] = {name: set() for name in _ENTITY_COUNT.values()}
    size = HEADER_RESERVE

    def seal() -> tuple[EncodedChunk, list[Item]]:
        counts = {name: len(found) for name, found in keys.items()}
        counts["mutations"] = len(lines)
        chunk = encode_chunk(lines, counts, created_by=created_by, created_at=created_at)
        return chunk, held

    for item in items:
        line = record_line(item.record)
        if lines and size + len(line) > limit:
            yield seal()
            lines, held = [], []
            keys = {name: set() for name in _ENTITY_COUNT.values()}
            size = HEADER_RESERVE
        lines.append(line)
        held.append(item)
        if item.entity in _ENTITY_COUNT:
            keys[_ENTITY_COUNT[item.entity]].add(item.key)
        size += len(line)
    if lines:
        yield seal()


# --- the header --------------------------------------------------------------------------


def parse_header(chunk_id: str, value: dict[str, Any]) -> ChunkHeader:
    version = value.get("engram_chunk")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BadChunkError(chunk_id, "header line has no engram_chunk version")
    if version > CHUNK_FORMAT:
        raise BadChunkError(
            chunk_id,
            f"chunk format {version} is newer than this Engram understands ({CHUNK_FORMAT}); "
            "upgrade Engram",
        )
    counts_in = value.get("counts")
    counts: dict[str, int] = {}
    if isinstance(counts_in, dict):
        for name in COUNT_NAMES:
            number = counts_in.get(name, 0)
            counts[name] = number if isinstance(number, int) and number >= 0 else 0
    return ChunkHeader(
        created_by=str(value.get("created_by") or "unknown"),
        created_at=str(value.get("created_at") or ""),
        counts=counts,
        format=version,
    )
