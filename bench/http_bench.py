"""Load benchmark of ``engram serve``: concurrent clients doing mixed requests over real HTTP.

    python bench/http_bench.py                      # 8 clients x 2,000 requests, 10,000 memories
    python bench/http_bench.py --clients 4 --requests 200 --prefill 1000   # a quick run

A store is pre-filled with ``--prefill`` memories, then a real ``engram serve`` process is started
on a free port and ``--clients`` threads (one keep-alive connection each) send a mix of saves,
searches, context reads and gets. Afterwards the server is stopped with SIGTERM and the store is
opened directly to count the memories: every save the server acknowledged must be there.

Printed: errors, lost writes, requests/s, latency percentiles per kind, and two baselines
measured in the same run — the same operations called on the store in-process (no HTTP), and
``GET /health`` over HTTP (the cost of the HTTP stack alone).
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engram.settings import Config  # noqa: E402
from engram.store import Store  # noqa: E402

COMMON = (
    "auth login token session cache redis postgres migration index query timeout retry "
    "queue worker deploy docker kubernetes config env secret rotate bug fix crash panic "
    "race lock deadlock latency memory leak profile benchmark schema api route handler "
    "test fixture mock ci pipeline build release version upgrade rollback feature flag"
).split()
SYLLABLES = "ka to ri mu sen dor vel pha qui lon tra bex nor gil fen sup ric ath mo zed".split()


def vocabulary(seed: int, size: int = 4000) -> list[str]:
    """Common tech words first, then made-up identifiers: memories name many distinct things
    (functions, files, services), which is what makes full-text search selective."""
    rng = random.Random(seed)
    words = dict.fromkeys(COMMON)
    while len(words) < size:
        words["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


WORDS = vocabulary(0)
# Zipf-like weights: a few words are everywhere, most are rare (as in real text).
WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]
PROJECTS = ("acme", "billing", "frontend", "infra")
MIX = (("save", 25), ("search", 35), ("context", 15), ("get", 25))


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, WEIGHTS, k=n))


def query(rng: random.Random) -> str:
    """What an agent searches for: a few specific words (any of the vocabulary, evenly)."""
    return " ".join(rng.choice(WORDS) for _ in range(3))


def prefill(data_dir: Path, count: int, seed: int) -> int:
    """Fill a store with ``count`` memories through one import (fast, one transaction)."""
    rng = random.Random(seed)
    sessions = [
        {"id": f"bench-{p}-{i}", "project": p, "directory": f"/src/{p}"}
        for p in PROJECTS
        for i in range(10)
    ]
    observations = [
        {
            "session_id": sessions[i % len(sessions)]["id"],
            "project": sessions[i % len(sessions)]["project"],
            "type": rng.choice(("bugfix", "decision", "discovery", "pattern")),
            "title": f"{sentence(rng, 5)} #{i}",
            "content": f"{sentence(rng, 40)} (memory {i})",
            "created_at": "2026-01-01 00:00:00",
        }
        for i in range(count)
    ]
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.import_data({"version": "0.1.0", "sessions": sessions, "observations": observations})
        return store.count_observations()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data_dir: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(ENGRAM_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram", "serve", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"engram serve did not start: {proc.stderr.read().decode()}")


class Client(threading.Thread):
    """One keep-alive connection sending ``n`` requests of the mix."""

    def __init__(self, index: int, port: int, n: int, max_id: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.index, self.port, self.n, self.max_id = index, port, n, max_id
        self.rng = random.Random(seed + index)
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.saved_ids: list[int] = []

    def request(self, conn, method: str, path: str, body: bytes | None = None):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()

    def run(self) -> None:
        kinds = [k for k, _ in MIX]
        weights = [w for _, w in MIX]
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        for i in range(self.n):
            kind = self.rng.choices(kinds, weights)[0]
            project = self.rng.choice(PROJECTS)
            if kind == "save":
                body = orjson.dumps(
                    {
                        "title": f"client {self.index} save {i}",
                        "content": f"{sentence(self.rng, 30)} (client {self.index}, {i})",
                        "type": "discovery",
                        "project": project,
                        "session_id": f"bench-client-{self.index}",
                    }
                )
                args = ("POST", "/observations", body)
                expected = 201
            elif kind == "search":
                q = quote(query(self.rng))
                args = ("GET", f"/search?q={q}&project={project}", None)
                expected = 200
            elif kind == "context":
                args = ("GET", f"/context?project={project}&max_bytes=8192", None)
                expected = 200
            else:
                args = ("GET", f"/observations/{self.rng.randint(1, self.max_id)}", None)
                expected = 200
            started = time.perf_counter()
            try:
                status, payload = self.request(conn, *args)
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append(f"{kind}: {exc!r}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                continue
            self.latencies[kind].append(time.perf_counter() - started)
            if status != expected:
                self.errors.append(f"{kind}: HTTP {status} {payload[:200]!r}")
            elif kind == "save":
                self.saved_ids.append(orjson.loads(payload)["id"])
        conn.close()


def run_http(port: int, clients: int, n: int, max_id: int, seed: int) -> tuple[float, list]:
    workers = [Client(i, port, n, max_id, seed) for i in range(clients)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - started, workers


def health_baseline(port: int, clients: int, n: int) -> float:
    """Requests/s of GET /health with the same number of clients: the HTTP stack's ceiling."""

    def loop() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for _ in range(n):
            conn.request("GET", "/health")
            conn.getresponse().read()
        conn.close()

    threads = [threading.Thread(target=loop) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return clients * n / (time.perf_counter() - started)


def direct_baseline(data_dir: Path, n: int, max_id: int, seed: int) -> float:
    """Operations/s of the same mix called on the store in this process (one thread)."""
    rng = random.Random(seed)
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    with Store.open(config=Config(data_dir=data_dir)) as store:
        started = time.perf_counter()
        for i in range(n):
            kind = rng.choices(kinds, weights)[0]
            project = rng.choice(PROJECTS)
            if kind == "save":
                store.add_observation(
                    title=f"direct save {i}",
                    content=f"{sentence(rng, 30)} (direct {i})",
                    type="discovery",
                    project=project,
                    session_id="bench-direct",
                )
            elif kind == "search":
                store.search(query(rng), project=project)
            elif kind == "context":
                store.context(project, max_bytes=8192)
            else:
                store.get_observation(rng.randint(1, max_id))
        return n / (time.perf_counter() - started)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=2000, help="per client")
    parser.add_argument("--prefill", type=int, default=10_000, help="memories stored first")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="engram-http-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        t0 = time.perf_counter()
        before = prefill(data_dir, args.prefill, args.seed)
        print(f"pre-filled {before:,} memories in {time.perf_counter() - t0:.1f}s")

        port = free_port()
        server = start_server(data_dir, port)
        try:
            elapsed, workers = run_http(port, args.clients, args.requests, before, args.seed)
            health_rps = health_baseline(port, args.clients, max(50, args.requests // 4))
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                code = server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                code = "killed"
        stderr = server.stderr.read().decode() if server.stderr else ""

        errors = [e for w in workers for e in w.errors]
        saved = [i for w in workers for i in w.saved_ids]
        with Store.open(config=Config(data_dir=data_dir)) as store:
            after = store.count_observations()
            missing = 0
            for oid in saved:
                try:
                    store.get_observation(oid)
                except Exception:
                    missing += 1
        lost = (before + len(set(saved))) - after + missing
        direct_ops = direct_baseline(data_dir, min(2000, args.clients * args.requests), before, 1)

    total = sum(len(v) for w in workers for v in w.latencies.values())
    every = [x for w in workers for v in w.latencies.values() for x in v]
    rps = total / elapsed
    print(
        f"{args.clients} clients x {args.requests:,} requests on {before:,} memories: "
        f"{total:,} answered in {elapsed:.1f}s"
    )
    print(f"  errors:            {len(errors)}")
    for line in errors[:5]:
        print(f"    {line}")
    print(f"  saves acknowledged {len(saved):,}; memories after stop {after:,}; lost writes {lost}")
    print(f"  requests/s:        {rps:,.0f}")
    print(
        f"  latency ms:        p50 {statistics.median(every) * 1000:.1f}  "
        f"p95 {percentile(every, 0.95) * 1000:.1f}  p99 {percentile(every, 0.99) * 1000:.1f}"
    )
    for kind, _ in MIX:
        values = [x for w in workers for x in w.latencies.get(kind, [])]
        if values:
            print(
                f"    {kind:<8} n={len(values):>6,}  p50 {statistics.median(values) * 1000:6.1f}"
                f"  p95 {percentile(values, 0.95) * 1000:6.1f}"
            )
    print("baselines (same run):")
    print(
        f"  store in-process, 1 thread, same mix: {direct_ops:,.0f} ops/s "
        f"(HTTP/direct = {rps / direct_ops:.2f})"
    )
    print(
        f"  GET /health over HTTP, {args.clients} clients: {health_rps:,.0f} req/s "
        f"(mix/health = {rps / health_rps:.2f})"
    )
    print(f"server exit status: {code}")
    if errors or lost or code != 0:
        print(stderr[-2000:])
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
