"""Compressed bodies in both directions.

Requests: ``Content-Encoding: zstd`` (preferred) or ``gzip``; the Go tool's gzip envelope type
``application/vnd.engram.sync+gzip; version=1``; and gzip or zstd recognised by their magic
bytes when a proxy dropped or rewrote the headers. Decompression is bounded: a body that inflates
past the push limit is refused with 413 before it is fully inflated (no zip bombs).

Responses: litestar's compression middleware with a zstd facade, gzip as the fallback, for
clients whose ``Accept-Encoding`` allows it.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from io import BytesIO
from typing import Any, ClassVar

import zstandard
from litestar.config.compression import CompressionConfig

from engram_cloud.errors import ApiError, payload_too_large

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_ENVELOPE = "application/vnd.engram.sync+gzip"
_ZSTD_STEP = 64  # compressed bytes per step: at most 16 blocks x 128 KiB = 2 MiB of output
_GZIP_WINDOW = 1 << 20  # output per zlib call


def _invalid(message: str) -> ApiError:
    return ApiError(
        400, "repairable", "upgrade_repairable_payload_invalid", f"invalid push payload: {message}"
    )


def _encoding_of(body: bytes, headers: Mapping[str, str]) -> str:
    declared = headers.get("content-encoding", "").strip().lower()
    content_type = headers.get("content-type", "")
    media, _, params = content_type.partition(";")
    if media.strip().lower() == GZIP_ENVELOPE:
        version = ""
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "version":
                version = value.strip().strip('"')
        if version not in ("", "1"):
            raise _invalid(f"unsupported envelope version {version!r} (this server reads 1)")
        return "gzip"
    if declared in ("", "identity"):
        if body.startswith(GZIP_MAGIC):
            return "gzip"
        if body.startswith(ZSTD_MAGIC):
            return "zstd"
        return "identity"
    if declared in ("gzip", "x-gzip"):
        return "gzip"
    if declared == "zstd":
        return "zstd"
    raise ApiError(
        415,
        "invalid_request",
        "unsupported_content_encoding",
        f"unsupported Content-Encoding {declared!r} (use zstd or gzip)",
    )


def _gunzip(body: bytes, limit: int) -> bytearray:
    out = bytearray()
    data = body
    while data:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            while True:
                out += inflater.decompress(data, min(_GZIP_WINDOW, limit + 1 - len(out)))
                if len(out) > limit:
                    raise payload_too_large(limit)
                data = inflater.unconsumed_tail
                if inflater.eof or not data:
                    break
        except zlib.error as exc:
            raise _invalid(f"corrupt gzip body ({exc})") from None
        if not inflater.eof:
            raise _invalid("truncated gzip body")
        data = inflater.unused_data  # a further gzip member follows
        if data and not data.startswith(GZIP_MAGIC):
            raise _invalid("trailing bytes after the gzip body")
    return out


def _unzstd(body: bytes, limit: int) -> bytearray:
    out = bytearray()
    inflater = zstandard.ZstdDecompressor().decompressobj()
    view = memoryview(body)
    try:
        for start in range(0, len(body), _ZSTD_STEP):
            out += inflater.decompress(view[start : start + _ZSTD_STEP])
            if len(out) > limit:
                raise payload_too_large(limit)
            if inflater.eof:
                break
    except zstandard.ZstdError as exc:
        raise _invalid(f"corrupt zstd body ({exc})") from None
    if not inflater.eof:
        raise _invalid("truncated zstd body")
    if inflater.unused_data:
        raise _invalid("trailing bytes after the zstd body")
    return out


def decode_body(body: bytes, headers: Mapping[str, str], limit: int) -> bytes | bytearray:
    """The request body, decompressed as its headers or magic bytes say, at most ``limit``
    bytes once decompressed (else 413, after at most one output window past the limit)."""
    encoding = _encoding_of(body, headers)
    if encoding == "gzip":
        return _gunzip(body, limit)
    if encoding == "zstd":
        return _unzstd(body, limit)
    return body


class ZstdCompression:
    """litestar compression facade for ``Content-Encoding: zstd`` responses."""

    __slots__ = ("buffer", "writer")
    encoding: ClassVar[str] = "zstd"

    def __init__(self, buffer: BytesIO, compression_encoding: Any, config: Any) -> None:
        self.buffer = buffer
        level = int((config.backend_config or {}).get("level", 3))
        self.writer = zstandard.ZstdCompressor(level=level).stream_writer(buffer, closefd=False)

    def write(self, body: bytes, final: bool = False) -> None:
        self.writer.write(body)
        self.writer.flush(zstandard.FLUSH_FRAME if final else zstandard.FLUSH_BLOCK)

    def close(self) -> None:
        self.writer.close()


def response_compression() -> CompressionConfig:
    """zstd when the client accepts it, else gzip, for responses of 1 KiB or more."""
    return CompressionConfig(
        backend="zstd",
        compression_facade=ZstdCompression,
        backend_config={"level": 3},
        minimum_size=1024,
        gzip_compress_level=6,
        gzip_fallback=True,
    )
