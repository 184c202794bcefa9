"""Hostile request bodies against a real ``engram cloud serve``: compression bombs stop at the body
limit within one output window, and bodies within the limit that would parse into millions of
Python objects are refused before parsing, so eight of either at once leave the server's peak
memory (VmHWM of the real process, read from /proc) within a small bound."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import zstandard

from tests.cloud import records as rec
from tests.support.cloud import LEGACY_TOKEN, RunningServer, bearer

MIB = 1024 * 1024
LIMIT = 8 * MIB  # the server's default push limit


def _bombs() -> dict[str, tuple[bytes, dict[str, str]]]:
    zeros = b"\0" * (256 * MIB)
    zstd = zstandard.ZstdCompressor(level=19).compress(zeros)
    gz = gzip.compress(zeros, compresslevel=9)
    del zeros
    return {
        "zstd": (zstd, {"Content-Encoding": "zstd"}),
        "zstd-sniffed": (zstd, {}),
        "gzip": (gz, {"Content-Encoding": "gzip"}),
    }


def test_eight_concurrent_bombs_keep_the_server_small(
    serve: Callable[..., RunningServer],
) -> None:
    server = serve()
    headers = {**bearer(LEGACY_TOKEN), "Content-Type": "application/json"}
    bombs = _bombs()
    assert all(len(body) < 300 * 1024 for body, _ in bombs.values())
    with httpx.Client(base_url=server.url, timeout=120) as http:
        # Warm up every path once with a real push, so the baseline holds what serving costs.
        raw = orjson.dumps(rec.push_body([rec.observation(project="acme")]))
        for encoded, extra in (
            (zstandard.ZstdCompressor().compress(raw), {"Content-Encoding": "zstd"}),
            (gzip.compress(raw), {"Content-Encoding": "gzip"}),
        ):
            answer = http.post(
                "/sync/mutations/push", content=encoded, headers={**headers, **extra}
            )
            assert answer.status_code == 200, answer.text
        baseline = server.peak_rss_kib()

        def send(name: str) -> int:
            body, extra = bombs[name]
            return http.post(
                "/sync/mutations/push", content=body, headers={**headers, **extra}
            ).status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(send, [name for name in bombs for _ in range(8)]))
    assert set(codes) == {413}, codes
    grown_mib = (server.peak_rss_kib() - baseline) / 1024
    print(f"peak RSS grew {grown_mib:.1f} MiB under 24 bombs, 8 at a time")
    # Measured here: ~95 MiB. Before the fix one zstd step alone inflated to 127 MiB, and the
    # same 24 requests grew the server by 835 MiB.
    assert grown_mib < 150, f"peak RSS grew by {grown_mib:.0f} MiB"


def _structure_bombs() -> dict[str, bytes]:
    """Bodies under the 8 MiB limit that are tiny once compressed and huge once parsed."""
    count = (LIMIT - 1000) // 3
    empties = b'{"mutations":[' + b"{}," * (count - 1) + b"{}]}"
    # 500 records: a valid batch size, each with an unknown field full of empty objects.
    record = orjson.dumps(rec.observation(project="acme"))[:-1]
    dense = record + b',"extra":[' + b"{}," * 5000 + b"{}]}"
    batch = b'{"mutations":[' + b",".join([dense] * 500) + b"]}"
    chunk = b'{"project":"acme","data":{"sessions":[' + b"{}," * (count - 100) + b"{}]}}"
    squeeze = zstandard.ZstdCompressor(level=19).compress
    return {"empties": squeeze(empties), "batch": squeeze(batch), "chunk": squeeze(chunk)}


def test_bodies_that_parse_into_millions_of_objects_are_refused_first(
    serve: Callable[..., RunningServer],
) -> None:
    server = serve()
    headers = {
        **bearer(LEGACY_TOKEN),
        "Content-Type": "application/json",
        "Content-Encoding": "zstd",
    }
    bombs = _structure_bombs()
    assert all(len(body) < 64 * 1024 for body in bombs.values())
    with httpx.Client(base_url=server.url, timeout=120) as http:
        # A real 500-record push over the heavy-body threshold still goes through.
        records = [rec.observation(project="acme", content="x" * 1500) for _ in range(500)]
        big = zstandard.ZstdCompressor().compress(orjson.dumps(rec.push_body(records)))
        answer = http.post("/sync/mutations/push", content=big, headers=headers)
        assert answer.status_code == 200 and len(answer.json()["accepted"]) == 500
        baseline = server.peak_rss_kib()

        def send(name: str) -> int:
            path = "/sync/push" if name == "chunk" else "/sync/mutations/push"
            return http.post(path, content=bombs[name], headers=headers).status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(send, [name for name in bombs for _ in range(8)]))
    assert set(codes) == {413}, codes
    grown_mib = (server.peak_rss_kib() - baseline) / 1024
    print(f"peak RSS grew {grown_mib:.1f} MiB under 24 structure bombs, 8 at a time")
    # Parsed, one "empties" body alone is 235 MB of dicts; eight at once took 900 MB.
    assert grown_mib < 150, f"peak RSS grew by {grown_mib:.0f} MiB"
