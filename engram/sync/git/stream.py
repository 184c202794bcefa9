"""Reading chunk files as streams, with bounded memory whatever the file holds (docs/git-sync.md, "Chunks": a
hostile chunk never costs more than ~200 MB).

A chunk is never read whole. :class:`ChunkStream` inflates it piece by piece, hashing as it goes
(the id is checked once the end is reached, before anything read from it is committed), and
refuses a file that inflates past a cap (:data:`MAX_JSONL_BYTES` for our chunks,
:data:`MAX_GO_BYTES` for the Go tool's single-object chunks); :func:`jsonl_lines` refuses a
line longer than :data:`MAX_LINE_BYTES`. The Go tool's documents are parsed on top of this by
:mod:`engram.sync.git.go_json`. Files are opened without following symbolic links.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from engram.sync.git.chunk import BadChunkError, ChunkHeader, parse_header

MiB = 1024 * 1024
#: Our chunks hold at most 4 MiB (one record larger than that gets a chunk of its own, and a
#: record's text fields are at most 1 MiB each), so 32 MiB is far beyond any honest chunk.
MAX_JSONL_BYTES = 32 * MiB
#: One line (one record) of our chunks.
MAX_LINE_BYTES = 16 * MiB
#: The Go tool writes a whole database into one object; a legitimate 100 MB chunk must import.
MAX_GO_BYTES = 256 * MiB
READ_SIZE = 64 * 1024
LINE_BLOCK = 1024 * 1024
HEADER_BYTES = 64 * 1024
GO_SECTIONS = ("sessions", "observations", "prompts", "mutations")
UNRECOGNISED = "unrecognised content: no engram_chunk header and no sessions/observations"


class ChunkTooLargeError(BadChunkError):
    """A chunk refused for its size: remembered, and not read again until its file changes."""


def open_chunk_file(path: Path) -> BinaryIO:
    """Open a chunk file for reading, refusing a symbolic link (its target may be anywhere)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if path.is_symlink():
            raise BadChunkError(
                path.name.split(".")[0], "is a symbolic link; refused (a chunk must be a file)"
            ) from None
        raise BadChunkError(
            path.name.split(".")[0], f"cannot read ({exc.strerror or exc})"
        ) from None
    return os.fdopen(fd, "rb")


class ChunkStream:
    """The inflated bytes of one chunk file, read once, hashed, and capped."""

    def __init__(self, chunk_id: str, raw: BinaryIO, *, limit: int) -> None:
        self.chunk_id = chunk_id
        self.limit = limit
        self.size = 0
        self._hash = hashlib.sha256()
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")

    def _fail(self, reason: str) -> BadChunkError:
        return BadChunkError(self.chunk_id, reason)

    def _count(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self.limit:
            raise ChunkTooLargeError(
                self.chunk_id,
                f"inflates to more than {self.limit // MiB} MiB; refused (not read again until "
                "the file changes)",
            )
        self._hash.update(data)
        return data

    def read(self, size: int = READ_SIZE) -> bytes:
        try:
            data = self._gzip.read(size if size > 0 else READ_SIZE)
        except EOFError:
            raise self._fail("truncated (the gzip stream ends early)") from None
        except (OSError, zlib.error) as exc:
            raise self._fail(f"not a readable gzip file ({exc})") from None
        return self._count(data)

    def readline(self, limit: int) -> bytes:
        """One line, or its first ``limit`` bytes if it is longer (the caller tells)."""
        try:
            line = self._gzip.readline(limit)
        except EOFError:
            raise self._fail("truncated (the gzip stream ends early)") from None
        except (OSError, zlib.error) as exc:
            raise self._fail(f"not a readable gzip file ({exc})") from None
        return self._count(line)

    def finish(self) -> None:
        """Read to the end and check the content against the chunk's id."""
        while self.read(READ_SIZE):
            pass
        digest = self._hash.hexdigest()
        if not digest.startswith(self.chunk_id):
            raise self._fail(
                f"content does not match its id (sha256 {digest[: len(self.chunk_id)]}…): "
                "the file was changed or damaged"
            )


def jsonl_lines(stream: ChunkStream, *, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(line number, record text)`` of every non-blank line after the header (line 1).

    Reads blocks and splits them in C rather than asking for one line at a time, so a file of
    millions of empty lines costs seconds, not minutes; a line longer than ``limit`` is
    refused as soon as that many bytes are pending.
    """
    number = 1  # the header
    pending: list[bytes] = []  # the start of a line that continues in the next block
    size = 0
    while block := stream.read(LINE_BLOCK):
        lines = block.split(b"\n")
        tail = lines.pop()
        if pending and lines:
            lines[0] = b"".join(pending) + lines[0]
            pending, size = [], 0
        for offset, line in enumerate(lines, start=number + 1):
            if len(line) > limit:
                raise _line_too_long(stream.chunk_id, offset, limit)
            if line.strip():
                yield offset, line.rstrip(b"\r")
        number += len(lines)
        if tail:
            pending.append(tail)
            size += len(tail)
            if size > limit:
                raise _line_too_long(stream.chunk_id, number + 1, limit)
    line = b"".join(pending)
    if line.strip():
        yield number + 1, line.rstrip(b"\r")


def _line_too_long(chunk_id: str, number: int, limit: int) -> ChunkTooLargeError:
    return ChunkTooLargeError(
        chunk_id,
        f"line {number} is longer than {limit // MiB} MiB; refused (not read again until the "
        "file changes)",
    )


# --- whole chunks in memory (small ones: tests and tools; the importer streams) ---------------


@dataclass(slots=True)
class DecodedChunk:
    """A verified chunk held in memory: its header and its record lines, or, for the older
    format, its parsed document."""

    id: str
    header: ChunkHeader
    lines: list[str] = field(default_factory=list)
    document: dict[str, Any] | None = None

    @property
    def is_go_format(self) -> bool:
        return self.document is not None


def first_line_header(stream: ChunkStream) -> tuple[ChunkHeader | None, bytes]:
    """Line 1 of a chunk: our header, or ``None`` (an older-format document, whose first line
    may be the whole document: only its first 64 KiB are read here), and the bytes read."""
    first = stream.readline(HEADER_BYTES)
    if not first.endswith(b"\n") and len(first) == HEADER_BYTES:
        return None, first
    try:
        value = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None, first
    if isinstance(value, dict) and "engram_chunk" in value:
        return parse_header(stream.chunk_id, value), first
    return None, first


def read_header(chunk_id: str, raw: BinaryIO) -> ChunkHeader | None:
    """The header of one of our chunks from the start of its gzip stream (cheap: one line), or
    ``None`` for an older-format document."""
    return first_line_header(ChunkStream(chunk_id, raw, limit=MAX_GO_BYTES))[0]


def go_counts(document: dict[str, Any]) -> dict[str, int]:
    def size(name: str) -> int:
        items = document.get(name)
        return len(items) if isinstance(items, list) else 0

    return {name: size(name) for name in GO_SECTIONS}


def decode_chunk(chunk_id: str, raw: bytes) -> DecodedChunk:
    """Inflate, verify and parse a chunk given as bytes, with the same caps as a stream."""
    stream = ChunkStream(chunk_id, io.BytesIO(raw), limit=MAX_GO_BYTES)
    header, first = first_line_header(stream)
    if header is not None:
        stream.limit = MAX_JSONL_BYTES
        lines = []
        for _, line in jsonl_lines(stream):
            try:
                lines.append(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise BadChunkError(chunk_id, f"not UTF-8 text ({exc.reason})") from None
        stream.finish()
        return DecodedChunk(chunk_id, header, lines=lines)
    parts = [first]
    while piece := stream.read(READ_SIZE):
        parts.append(piece)
    stream.finish()
    try:
        document = orjson.loads(b"".join(parts))
    except orjson.JSONDecodeError as exc:
        raise BadChunkError(
            chunk_id, f"neither a chunk header nor a JSON document ({exc})"
        ) from None
    if not isinstance(document, dict) or not any(name in document for name in GO_SECTIONS):
        raise BadChunkError(chunk_id, UNRECOGNISED)
    counts = go_counts(document)
    header = ChunkHeader(created_by="", created_at="", counts=counts, format=1)
    return DecodedChunk(chunk_id, header, document=document)
