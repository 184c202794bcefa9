"""Benchmark of ``engram hub``'s ``POST /search`` (regular expressions over memories' text).

    python bench/hub_bench.py                   # 10,000 memories, 200 requests per query kind
    python bench/hub_bench.py --memories 1000 --requests 50     # a quick run

A store is filled with ``--memories`` memories (~60 words each, 50 sessions, 8 types, topic
keys, dates over 90 days) through its import path, then the Hub app answers ``POST /search``
in-process (litestar's test client: the HTTP stack without a socket) for several kinds of query.
Printed per kind: p50/p95 latency and how many memories the search read.

Baselines measured in the same run: ``GET /health`` (the HTTP stack alone), and for the kind
that must read everything, the same scan with Python's ``re`` instead of RE2. Finally the reason
RE2 is used at all: ``(a+)+$`` against 26 characters, which Python's ``re`` needs seconds for
(exponential backtracking) and RE2 microseconds.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from litestar.testing import TestClient  # noqa: E402

from engram.http.hub import HubIndex, create_hub  # noqa: E402
from engram.settings import Config  # noqa: E402
from engram.store import Store  # noqa: E402

WORDS = (
    "auth login token session cache redis postgres migration index query timeout retry queue "
    "worker deploy docker config secret rotate bug fix crash race lock latency memory leak "
    "schema api route handler test fixture pipeline build release version upgrade rollback "
    "tailscale mesh headscale edge device nightly image network"
).split()
TYPES = ["decision", "bugfix", "architecture", "pattern", "discovery", "config", "learning", "edge"]


def fill(store: Store, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    observations = []
    for n in range(count):
        day = 90 - (n * 90 // count)
        moment = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_770_000_000 - day * 86400 + n))
        observations.append(
            {
                "sync_id": f"obs-{n:016x}",
                "session_id": f"session-{n % 50:03d}",
                "type": TYPES[n % len(TYPES)],
                "title": " ".join(rng.choices(WORDS, k=5)),
                "content": " ".join(rng.choices(WORDS, k=60)) + f" ticket-{n}",
                "project": f"project-{n % 4}",
                "scope": "project",
                "topic_key": f"area-{n % 20}/topic-{n % 7}",
                "created_at": moment,
                "updated_at": moment,
            }
        )
    store.import_data(
        {
            "version": "0.1.0",
            "exported_at": "2026-01-01T00:00:00Z",
            "sessions": [
                {
                    "id": f"session-{i:03d}",
                    "project": f"project-{i % 4}",
                    "directory": "/src",
                    "started_at": "2025-01-01 00:00:00",
                }
                for i in range(50)
            ],
            "observations": observations,
            "prompts": [],
        }
    )


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        config = Config(data_dir=Path(tmp))
        started = time.perf_counter()
        with Store.open(config=config) as store:
            fill(store, args.memories)
        print(f"filled {args.memories:,} memories in {time.perf_counter() - started:.1f} s")
        last = args.memories - 1
        kinds = {
            "common word (answer fills early)": {"query": "tailscale"},
            "regex, alternation": {"query": "tailscale.*mesh|headscale"},
            "rare literal (reads everything)": {"query": f"ticket-{last // 2}\\b"},
            "no match (reads everything)": {"query": "zzz-never-there"},
            "session glob + regex": {"query": "(?i)ROLLBACK", "session_id": "session-01"},
            "tags + dates, no query": {"tags": ["edge"], "date_from": "2026-01-01"},
        }
        with TestClient(create_hub(HubIndex(config))) as client:
            client.post("/search", json={"query": "warm up"})
            health = []
            for _ in range(args.requests):
                t = time.perf_counter()
                client.get("/health")
                health.append((time.perf_counter() - t) * 1000)
            p50, p95 = percentiles(health)
            print(f"{'GET /health (baseline)':38} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms")
            for name, body in kinds.items():
                samples = []
                for _ in range(args.requests):
                    t = time.perf_counter()
                    response = client.post("/search", json=body)
                    samples.append((time.perf_counter() - t) * 1000)
                    assert response.status_code == 200, response.text
                p50, p95 = percentiles(samples)
                chars = len(response.json()["results"])
                print(f"{name:38} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  ({chars} chars)")

        # Baseline for the full scan: the same rows read, matched with Python's re.
        with Store.open(config=config) as store:
            rows = store.db.rows("SELECT title, content FROM observations")
            pattern = re.compile("zzz-never-there")
            samples = []
            for _ in range(20):
                t = time.perf_counter()
                for row in store.db.rows("SELECT title, content FROM observations"):
                    pattern.search(row[0]) or pattern.search(row[1])
                samples.append((time.perf_counter() - t) * 1000)
            print(f"{'baseline: SELECT all + Python re':38} p50 {statistics.median(samples):7.2f} ms"
                  f"  ({len(rows):,} rows)")  # fmt: skip

    import re2

    evil, subject = "(a+)+$", "a" * 26 + "!"
    t = time.perf_counter()
    re2.search(evil, subject)
    fast = time.perf_counter() - t
    t = time.perf_counter()
    re.search(evil, subject)
    slow = time.perf_counter() - t
    print(f"(a+)+$ on 27 chars: RE2 {fast * 1e6:.0f} µs, Python re {slow:.2f} s "
          f"({slow / fast:,.0f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
