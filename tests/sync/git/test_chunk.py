"""The chunk codec: header, content-hash ids, the 4 MiB split, and every way a file can be bad."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass

import orjson
import pytest

from engram.sync.git.chunk import HEADER_RESERVE, BadChunkError, is_chunk_id, pack_chunks
from engram.sync.git.stream import decode_chunk, read_header


@dataclass
class Item:
    record: str
    entity: str
    key: str


def record(i: int, entity: str = "observation", key: str | None = None, size: int = 10) -> Item:
    key = key or f"obs-{i:016x}"
    text = orjson.dumps({"mid": f"{i:032x}", "entity": entity, "key": key, "pad": "x" * size})
    return Item(text.decode(), entity, key)


def test_encoded_chunk_is_header_plus_lines_and_named_by_its_hash() -> None:
    items = [record(1), record(2, "session", "s-1"), record(3, key="obs-0000000000000001")]
    [(chunk, held)] = list(
        pack_chunks(items, created_by="alice", created_at="2026-01-02T03:04:05Z")
    )
    assert held == items
    lines = chunk.data.split(b"\n")
    header = orjson.loads(lines[0])
    assert header == {
        "engram_chunk": 2,
        "created_by": "alice",
        "created_at": "2026-01-02T03:04:05Z",
        # entities per kind: obs-…1 appears twice but is one memory
        "counts": {"sessions": 1, "observations": 1, "prompts": 0, "mutations": 3},
    }
    assert lines[1:] == [i.record.encode() for i in items] + [b""]
    assert chunk.id == hashlib.sha256(chunk.data).hexdigest()[:16]
    # gzip with mtime=0: the file bytes depend on the content only
    assert chunk.compressed() == chunk.compressed()
    decoded = decode_chunk(chunk.id, chunk.compressed())
    assert decoded.lines == [i.record for i in items]
    assert decoded.header.created_by == "alice"
    assert not decoded.is_go_format


def test_pack_splits_at_the_limit_and_keeps_order() -> None:
    items = [record(i, size=900) for i in range(40)]
    limit = 8 * 1024
    packed = list(pack_chunks(items, created_by="a", created_at="t", limit=limit))
    assert len(packed) > 3
    assert [i for _, held in packed for i in held] == items
    for chunk, held in packed:
        assert len(chunk.data) <= limit
        assert chunk.header.counts["mutations"] == len(held)


def test_a_record_larger_than_the_limit_gets_a_chunk_of_its_own() -> None:
    big = record(2, size=20_000)
    packed = list(
        pack_chunks(
            [record(1), big, record(3)], created_by="a", created_at="t", limit=HEADER_RESERVE + 5000
        )
    )
    assert [len(held) for _, held in packed] == [1, 1, 1]
    assert packed[1][1] == [big]


def test_a_pretty_printed_record_stays_on_one_line() -> None:
    pretty = Item('{\n  "mid": "1",\n  "key": "k"\n}', "observation", "k")
    [(chunk, _)] = list(pack_chunks([pretty], created_by="a", created_at="t"))
    assert chunk.data.split(b"\n")[1] == b'{"mid":"1","key":"k"}'


def test_nothing_to_pack_yields_no_chunk() -> None:
    assert list(pack_chunks([], created_by="a", created_at="t")) == []


def chunk_bytes() -> tuple[str, bytes]:
    [(chunk, _)] = list(pack_chunks([record(i) for i in range(50)], created_by="a", created_at="t"))
    return chunk.id, chunk.compressed()


def test_truncated_file_is_reported() -> None:
    chunk_id, raw = chunk_bytes()
    with pytest.raises(BadChunkError, match="truncated") as info:
        decode_chunk(chunk_id, raw[: len(raw) // 2])
    assert info.value.chunk_id == chunk_id


def test_flipped_byte_is_reported() -> None:
    chunk_id, raw = chunk_bytes()
    damaged = bytearray(raw)
    damaged[len(raw) // 2] ^= 0x01
    with pytest.raises(BadChunkError, match=chunk_id):
        decode_chunk(chunk_id, bytes(damaged))


def test_content_that_does_not_match_its_id_is_reported() -> None:
    chunk_id, raw = chunk_bytes()
    data = gzip.decompress(raw).replace(b'"pad":"x', b'"pad":"y', 1)
    with pytest.raises(BadChunkError, match="does not match its id"):
        decode_chunk(chunk_id, gzip.compress(data))
    with pytest.raises(BadChunkError, match="does not match its id"):
        decode_chunk("0123456789abcdef", raw)


def test_not_gzip_and_unknown_content_are_reported() -> None:
    with pytest.raises(BadChunkError, match="gzip"):
        decode_chunk("0123456789abcdef", b"plain text, not gzip")
    data = b'["a list"]\n'
    with pytest.raises(BadChunkError, match="unrecognised"):
        decode_chunk(hashlib.sha256(data).hexdigest()[:16], gzip.compress(data))


def test_a_newer_chunk_format_is_refused_clearly() -> None:
    data = b'{"engram_chunk":3,"created_by":"a","created_at":"t","counts":{}}\n'
    with pytest.raises(BadChunkError, match="newer than this Engram"):
        decode_chunk(hashlib.sha256(data).hexdigest()[:16], gzip.compress(data))


def test_read_header_reads_only_the_first_line() -> None:
    chunk_id, raw = chunk_bytes()
    import io

    header = read_header(chunk_id, io.BytesIO(raw))
    assert header is not None and header.counts["mutations"] == 50
    go = gzip.compress(b'{"sessions":[],"observations":[],"prompts":[]}')
    assert read_header("01234567", io.BytesIO(go)) is None


@pytest.mark.parametrize(
    "value,ok",
    [
        ("0123456789abcdef", True),
        ("01234567", True),
        ("../../etc/passwd", False),
        ("0123456789ABCDEF", False),
        ("0123456789abcdef/..", False),
        (None, False),
        ("", False),
    ],
)
def test_chunk_ids_are_never_paths(value: object, ok: bool) -> None:
    assert is_chunk_id(value) is ok
