"""Hostile request bodies against a real ``engram cloud serve``: compression bombs stop at the body
limit within one output window, so eight of them at once leave the server's peak memory (VmHWM
of the real process, read from /proc) within a small bound."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import zstandard

from tests.cloud import records as rec
from tests.cloud.conftest import LEGACY_TOKEN, RunningServer, bearer

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
        body = rec.push_body([rec.observation(project="acme")])
        import orjson

        raw = orjson.dumps(body)
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
    # Before the fix one zstd bomb alone inflated to 127 MiB; eight took the server past 1 GB.
    assert grown_mib < 120, f"peak RSS grew by {grown_mib:.0f} MiB"
