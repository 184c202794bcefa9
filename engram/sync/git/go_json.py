"""The Go tool's single-object chunk documents, parsed as a stream with bounded memory.

``ijson``'s C parser reads the inflated bytes through a :class:`GuardedReader`, which refuses
runs without a structural quote (a gigantic string, number or whitespace token, whose bytes a
streaming parser would still have to buffer), and :func:`document_items` builds one array
element at a time from the parser's basic events (never its path prefixes, which grow with
nesting) with caps on nesting, values and text.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from engram.sync.git.chunk import BadChunkError
from engram.sync.git.stream import (
    GO_SECTIONS,
    READ_SIZE,
    UNRECOGNISED,
    ChunkStream,
    ChunkTooLargeError,
    MiB,
)

#: A Go document must show a structural quote at least once per block of this size, so no
#: single token (string, number, whitespace run) can be longer than twice this.
QUOTE_BLOCK_BYTES = 4 * MiB
#: One element of a Go document's arrays: nesting depth, parser events, and text it may hold.
MAX_ITEM_DEPTH = 16
MAX_ITEM_EVENTS = 20_000
MAX_ITEM_TEXT = 24 * MiB
_GOOD_QUOTE = re.compile(rb'(?<!\\)"')


class GuardedReader(io.RawIOBase):
    """A file-like view of a :class:`ChunkStream` for ``ijson`` that refuses any block of
    :data:`QUOTE_BLOCK_BYTES` without a quote not preceded by a backslash.

    Inside a JSON string every ``"`` is escaped, so such a quote always sits between tokens: a
    block without one means a single token spans it, which honest documents never have (a
    replicated text field is at most 1 MiB). The check is one regex search per block.
    """

    def __init__(self, stream: ChunkStream, *, block: int = QUOTE_BLOCK_BYTES) -> None:
        self.stream = stream
        self.block = block
        self._offset = 0  # bytes read so far
        self._seen = False  # a good quote in the current block
        self._last = b""  # the byte before the current piece (for the lookbehind)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.stream.read(min(len(buffer), READ_SIZE))
        self._check(data)
        buffer[: len(data)] = data
        return len(data)

    def _check(self, data: bytes) -> None:
        position = 0
        while position < len(data):
            room = self.block - self._offset % self.block
            piece = data[position : position + room]
            if not self._seen:
                probe = self._last[-1:] + piece
                match = _GOOD_QUOTE.search(probe, 1 if self._last else 0)
                self._seen = match is not None
            self._offset += len(piece)
            position += len(piece)
            self._last = piece[-1:]
            if self._offset % self.block == 0:
                if not self._seen:
                    raise ChunkTooLargeError(
                        self.stream.chunk_id,
                        f"holds a single value longer than {self.block // MiB} MiB; refused "
                        "(not read again until the file changes)",
                    )
                self._seen = False


def _too_big(chunk_id: str, where: str, what: str) -> ChunkTooLargeError:
    return ChunkTooLargeError(
        chunk_id, f"{where} {what}; refused (not read again until the file changes)"
    )


def _build(
    chunk_id: str, where: str, first: tuple[str, Any], events: Iterator[tuple[str, Any]]
) -> Any:
    """One JSON value from ``ijson.basic_parse`` events, within the item caps."""
    kind, value = first
    if kind not in ("start_map", "start_array"):
        return value
    root: Any = {} if kind == "start_map" else []
    stack: list[Any] = [root]
    keys: list[str | None] = [None]
    count = 0
    text = 0
    for kind, value in events:
        count += 1
        if count > MAX_ITEM_EVENTS:
            raise _too_big(chunk_id, where, f"has more than {MAX_ITEM_EVENTS} values")
        if kind == "map_key":
            keys[-1] = value
            text += len(value)
            continue
        if kind in ("end_map", "end_array"):
            stack.pop()
            keys.pop()
            if not stack:
                return root
            continue
        if kind in ("start_map", "start_array"):
            item: Any = {} if kind == "start_map" else []
        else:
            item = value
            if isinstance(value, str):
                text += len(value)
        if text > MAX_ITEM_TEXT:
            raise _too_big(chunk_id, where, f"holds more than {MAX_ITEM_TEXT // MiB} MiB of text")
        top = stack[-1]
        if isinstance(top, dict):
            top[keys[-1]] = item
        else:
            top.append(item)
        if kind in ("start_map", "start_array"):
            if len(stack) >= MAX_ITEM_DEPTH:
                raise _too_big(chunk_id, where, f"is nested deeper than {MAX_ITEM_DEPTH} levels")
            stack.append(item)
            keys.append(None)
    raise BadChunkError(chunk_id, "the JSON document ends early")


def _skip(chunk_id: str, first: tuple[str, Any], events: Iterator[tuple[str, Any]]) -> None:
    """Skip one value without building it (depth still bounded by the parser's own stack)."""
    if first[0] not in ("start_map", "start_array"):
        return
    depth = 1
    for kind, _ in events:
        if kind in ("start_map", "start_array"):
            depth += 1
        elif kind in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return
    raise BadChunkError(chunk_id, "the JSON document ends early")


def document_items(
    chunk_id: str, events: Iterator[tuple[str, Any]]
) -> Iterator[tuple[str, int, Any]]:
    """``(section, index, element)`` of the ``sessions``/``observations``/``prompts``/``mutations``
    arrays of a Go document, one element at a time, in document order; other keys are skipped.
    ``null`` sections are empty; any other non-array value is an error naming the section."""
    events = iter(events)
    try:
        first = next(events)
    except StopIteration:
        raise BadChunkError(chunk_id, "empty document") from None
    if first[0] != "start_map":
        raise BadChunkError(chunk_id, UNRECOGNISED)
    known = False
    for kind, value in events:
        if kind == "end_map":
            if not known:
                raise BadChunkError(chunk_id, UNRECOGNISED)
            return
        if kind != "map_key":  # pragma: no cover - the parser guarantees keys here
            raise BadChunkError(chunk_id, "malformed JSON object")
        section = value
        start = next(events)
        if section not in GO_SECTIONS:
            _skip(chunk_id, start, events)
            continue
        known = True
        if start[0] == "null":
            continue
        if start[0] != "start_array":
            raise BadChunkError(chunk_id, f"{section} must be a list")
        for index, event in enumerate(events):
            if event[0] == "end_array":
                break
            yield section, index, _build(chunk_id, f"{section}[{index}]", event, events)
    raise BadChunkError(chunk_id, "the JSON document ends early")


def go_events(stream: ChunkStream) -> Iterator[tuple[str, Any]]:
    """Parser events of a Go document (after the caller re-opened it at its start)."""
    import ijson

    reader = io.BufferedReader(GuardedReader(stream), buffer_size=READ_SIZE)
    try:
        yield from ijson.basic_parse(reader, use_float=True)
    except ijson.JSONError as exc:
        raise BadChunkError(stream.chunk_id, f"not valid JSON ({exc})") from None
