"""One chunk file's records, in bounded batches, whatever its format; and the cheap look at a
file that listing needs (its header).

Our chunks are streamed line by line: a batch is handed out as soon as it is full, and the
file's hash is only known at its end — so the caller applies batches inside one transaction and
rolls it back if reading raises (nothing of a bad chunk is ever committed). An older-format
(Go) document is read to its end and verified before its first record comes out (it has to be:
explicit mutations at its end may replace rows at its start), through a disk spool.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engram.store.replication import Received
from engram.sync.git.chunk import ChunkHeader
from engram.sync.git.go_chunk import GoConverter
from engram.sync.git.go_json import document_items, go_events
from engram.sync.git.go_writer import row_time
from engram.sync.git.stream import (
    MAX_GO_BYTES,
    MAX_JSONL_BYTES,
    ChunkStream,
    first_line_header,
    jsonl_lines,
    open_chunk_file,
)
from engram.times import parse_store_text, rfc3339

#: A batch is handed to the store when it holds this many records or bytes of record text.
BATCH_RECORDS = 5000
BATCH_BYTES = 8 * 1024 * 1024  # above a chunk of ours (4 MiB): one batch each


@dataclass(slots=True)
class RecordBatch:
    """Records as the store takes them, with each one parsed for the gate (``None``: not a
    JSON object) and its line in the file (0 for a Go record). A line of our chunks that
    holds an object is a :class:`~engram.store.replication.Received` (its exact text and the
    object, so the store does not decode it again); any other line is its text, for the store
    to refuse with its own message; a Go record is its dict."""

    items: list[str | dict[str, Any] | Received] = field(default_factory=list)
    records: list[dict[str, Any] | None] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    size: int = 0

    def add(self, item: str | dict[str, Any], record: Any, line: int, size: int = 0) -> None:
        self.items.append(item)
        self.records.append(record if isinstance(record, dict) else None)
        self.lines.append(line)
        self.size += size

    def full(self) -> bool:
        return len(self.items) >= BATCH_RECORDS or self.size >= BATCH_BYTES


class ChunkReader:
    """Reads one chunk file. ``project``: the repository's project, given to Go-format rows."""

    def __init__(self, chunk_id: str, path: Path, *, project: str | None) -> None:
        self.chunk_id = chunk_id
        self.path = path
        self.project = project
        #: Go ``relation`` mutations skipped (known once the records have been read).
        self.skipped = 0
        self.go_format = False

    def batches(self) -> Iterator[RecordBatch]:
        """Every record, batch by batch. Raises :class:`BadChunkError` (possibly after some
        batches: see the module's docstring)."""
        with open_chunk_file(self.path) as raw:
            stream = ChunkStream(self.chunk_id, raw, limit=MAX_GO_BYTES)
            header, _ = first_line_header(stream)
            if header is not None:
                stream.limit = MAX_JSONL_BYTES
                yield from self._jsonl(stream)
                return
            self.go_format = True
            raw.seek(0)
            yield from self._go(ChunkStream(self.chunk_id, raw, limit=MAX_GO_BYTES))

    def _jsonl(self, stream: ChunkStream) -> Iterator[RecordBatch]:
        # (RecordBatch.add inlined, and each line's Received made here, as the tuple it is:
        # its NamedTuple constructor is a Python call; this loop runs for every record of an
        # import)
        loads, invalid, pair = orjson.loads, orjson.JSONDecodeError, tuple.__new__
        batch = RecordBatch()
        items, records, lines, size = batch.items, batch.records, batch.lines, 0
        for number, line in jsonl_lines(stream):
            try:
                value = loads(line)
            except invalid:
                # One broken line is one bad record: the store quarantines it ("invalid") and
                # the rest of the chunk applies (the chunk's hash says its author wrote it so).
                value = None
            text = line.decode("utf-8", "replace")
            if value.__class__ is dict:
                items.append(pair(Received, (text, value)))
                records.append(value)
            else:
                items.append(text)
                records.append(None)
            lines.append(number)
            size += len(line)
            if len(items) >= BATCH_RECORDS or size >= BATCH_BYTES:
                batch.size = size
                yield batch
                batch = RecordBatch()
                items, records, lines, size = batch.items, batch.records, batch.lines, 0
        stream.finish()
        if items:
            batch.size = size
            yield batch

    def _go(self, stream: ChunkStream) -> Iterator[RecordBatch]:
        with GoConverter(self.chunk_id, project=self.project) as converter:
            for section, index, item in document_items(self.chunk_id, go_events(stream)):
                converter.add(section, index, item)
            stream.finish()
            batch = RecordBatch()
            for record, size in converter.sized_records():
                batch.add(record, record, 0, size)
                if batch.full():
                    yield batch
                    batch = RecordBatch()
            self.skipped = converter.skipped
            if batch.items:
                yield batch


def read_header(chunk_id: str, path: Path) -> ChunkHeader | None:
    """The header line of one of our chunks (cheap), or ``None`` for an older-format document."""
    with open_chunk_file(path) as raw:
        return first_line_header(ChunkStream(chunk_id, raw, limit=MAX_GO_BYTES))[0]


def go_header(chunk_id: str, path: Path) -> ChunkHeader:
    """Counts of an older-format document, read as a stream to its end and verified, and
    (as ``created_at``, RFC 3339, ``""`` if none) the newest time its rows carry: the best
    guess at when it was written, for a chunk no manifest lists."""
    counts = {"sessions": 0, "observations": 0, "prompts": 0, "mutations": 0}
    newest = ""
    with open_chunk_file(path) as raw:
        stream = ChunkStream(chunk_id, raw, limit=MAX_GO_BYTES)
        for section, _, item in document_items(chunk_id, go_events(stream)):
            counts[section] += 1
            newest = max(newest, row_time(section, item))
        stream.finish()
    try:
        written = rfc3339(parse_store_text(newest)) if newest else ""
    except ValueError:
        written = ""
    return ChunkHeader(created_by="", created_at=written, counts=counts, format=1)
