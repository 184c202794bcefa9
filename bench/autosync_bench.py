"""Cloud sync from the client side, over loopback with a real server and PostgreSQL.

    python bench/autosync_bench.py                          # 100 saves, 50,000-mutation backlog
    python bench/autosync_bench.py --saves 20 --backlog 5000   # a quick run

A throwaway PostgreSQL cluster (initdb + pg_ctl, fsync off, as in the tests) and a real
``engram cloud serve`` process are started. Then:

1. **Save → searchable elsewhere.** Two real ``engram serve`` processes (machines A and B, own
   data directories) run autosync with the default timings (debounce 500 ms, long-poll pull).
   ``--saves`` times, a memory with a unique word is saved through A's HTTP API and B's search
   is polled every 5 ms until it finds it. Reported: p50/p95/max latency, against the target
   "debounce + one round trip" where the round trip (one push of one record + one pull) is
   measured in the same run; aim p95 ≤ 1 s.
2. **Backlog.** ``--backlog`` journal mutations (sessions, memories, prompts, edits, deletes —
   the records of bench/sync_bench.py) are pushed from a store by the client services, then
   pulled into an empty store; mutations/s each way. Baselines in the same run: the same kind
   of batches pushed by a bare HTTP loop with no local bookkeeping (fresh mids), and applying
   the pulled records straight from memory into an empty store (no network).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx
import orjson
import zstandard

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from sync_bench import journal_records  # noqa: E402

from engram.settings import Config  # noqa: E402
from engram.store import Store  # noqa: E402
from engram.sync.cloud import state as cloud_state  # noqa: E402
from engram.sync.cloud.config import CloudConfig, normalize_server_url  # noqa: E402
from engram.sync.cloud.sync import CloudSync  # noqa: E402
from tests.support import engram_env, free_port, wait_for_port  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402

TOKEN = "autosync-bench-token-0123456789abcdef"
JWT = "autosync-bench-jwt-secret-0123456789abcdefghijkl"


def start(args: list[str], env: dict[str, str], log: Path, port: int) -> subprocess.Popen:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "engram", *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, timeout=60)
    except TimeoutError:
        process.kill()
        raise SystemExit(f"{' '.join(args)} did not start:\n{log.read_text()[-2000:]}") from None
    return process


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- 1. latency -----------------------------------------------------------------------------------


def round_trip(url: str) -> float:
    """One push of one fresh record plus one pull, on a kept-alive connection (median of 20)."""
    from engram.record import build_record, format_hlc

    times = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        for i in range(21):
            origin = os.urandom(8).hex()
            record = build_record(
                mid=os.urandom(16).hex(),
                hlc=format_hlc(int(time.time() * 1000), 0, origin),
                origin=origin,
                entity="session",
                key=f"s-rtt-{i}",
                op="upsert",
                project="rtt",
                scope="project",
                payload={
                    "id": f"s-rtt-{i}",
                    "project": "rtt",
                    "directory": "/rtt",
                    "started_at": "2026-11-21 10:00:00",
                    "ended_at": None,
                    "summary": None,
                },
            )
            began = time.perf_counter()
            pushed = http.post(
                "/sync/mutations/push", json={"created_by": "b", "mutations": [record]}
            )
            seq = pushed.json()["latest_seq"]
            http.get("/sync/mutations/pull", params={"since": seq - 1, "project": "rtt"})
            if i:  # the first one opens the connection
                times.append(time.perf_counter() - began)
    return statistics.median(times)


def latency(url: str, work: Path, saves: int) -> dict:
    env = {"ENGRAM_CLOUD_AUTOSYNC": "1", "ENGRAM_CLOUD_SERVER": url, "ENGRAM_CLOUD_TOKEN": TOKEN}
    machines = []
    for name in ("a", "b"):
        home = work / name
        with Store.open(config=Config(data_dir=home)) as store:
            cloud_state.enroll(store, "bench")
        port = free_port()
        process = start(
            ["serve", "--port", str(port)], engram_env(home, env), work / f"serve-{name}.log", port
        )
        machines.append((process, f"http://127.0.0.1:{port}"))
    (pa, a), (pb, b) = machines
    results = []
    try:
        with httpx.Client(base_url=a) as http_a, httpx.Client(base_url=b) as http_b:
            # warm up: connections, the long-poll in place on both sides
            http_a.post(
                "/observations", json={"title": "warm", "content": "warm up", "project": "bench"}
            )
            deadline = time.monotonic() + 30
            while not http_b.get("/search", params={"q": "warm", "project": "bench"}).json():
                if time.monotonic() > deadline:
                    raise SystemExit("B never saw A's first memory: is autosync running?")
                time.sleep(0.05)
            for i in range(saves):
                word = f"zq{i:05d}x{os.urandom(3).hex()}"
                time.sleep(0.05)
                began = time.perf_counter()
                http_a.post(
                    "/observations",
                    json={"title": f"latency {i}", "content": f"probe {word}", "project": "bench"},
                )
                while True:
                    found = http_b.get("/search", params={"q": word, "project": "bench"}).json()
                    if found:
                        break
                    if time.perf_counter() - began > 30:
                        raise SystemExit(f"save {i} never reached B")
                    time.sleep(0.005)
                results.append(time.perf_counter() - began)
    finally:
        stop(pa)
        stop(pb)
    return {
        "p50": statistics.median(results),
        "p95": percentile(results, 0.95),
        "max": max(results),
    }


# --- 2. backlog -----------------------------------------------------------------------------------


def seeded_store(home: Path, records: list[str]) -> Store:
    """A store whose journal holds ``records`` (applied as if from git), all pending for the
    cloud, every project enrolled."""
    store = Store.open(config=Config(data_dir=home))
    for start_at in range(0, len(records), 5000):
        store.apply_mutations(records[start_at : start_at + 5000], source="git:bench")
    for project in {orjson.loads(r)["project"] for r in records}:
        cloud_state.enroll(store, project)
    return store


def bare_push(url: str, records: list[str]) -> float:
    """The same kind of batches, zstd-compressed, by a bare HTTP loop (no journal, no acks)."""
    by_project: dict[str, list[str]] = defaultdict(list)
    for text in records:
        by_project[orjson.loads(text)["project"]].append(text)
    compressor = zstandard.ZstdCompressor(level=3)
    began = time.perf_counter()
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
    ) as http:
        for texts in by_project.values():
            for i in range(0, len(texts), 500):
                body = (
                    b'{"created_by":"bare","mutations":['
                    + ",".join(texts[i : i + 500]).encode()
                    + b"]}"
                )
                answer = http.post(
                    "/sync/mutations/push",
                    content=compressor.compress(body),
                    headers={"Content-Type": "application/json", "Content-Encoding": "zstd"},
                )
                answer.raise_for_status()
    return time.perf_counter() - began


def backlog(url: str, work: Path, size: int) -> dict:
    config = CloudConfig(server_url=normalize_server_url(url), token=TOKEN)
    records = journal_records(size, seed=11)
    source = seeded_store(work / "backlog-a", records)
    projects = sorted({orjson.loads(r)["project"] for r in records})
    began = time.perf_counter()
    with CloudSync(source, config) as sync:
        reports = sync.push(projects)
    push_s = time.perf_counter() - began
    sent = sum(r.acknowledged for r in reports)
    assert sent == size, (sent, size)
    source.close()

    sink = Store.open(config=Config(data_dir=work / "backlog-b"))
    for project in projects:
        cloud_state.enroll(sink, project)
    began = time.perf_counter()
    with CloudSync(sink, config) as sync:
        pulled = sync.pull(projects)
    pull_s = time.perf_counter() - began
    received = sum(r.received for r in pulled.values())
    sink.close()

    fresh = journal_records(size, seed=12)  # other mids: the server stores them anew
    fresh = [t.replace('"project":"', '"project":"bare-') for t in fresh]
    bare_s = bare_push(url, fresh)

    plain = Store.open(config=Config(data_dir=work / "backlog-c"))
    began = time.perf_counter()
    for i in range(0, len(records), 500):
        plain.apply_mutations(records[i : i + 500], source="cloud:bench")
    apply_s = time.perf_counter() - began
    plain.close()
    return {
        "push_s": push_s,
        "pull_s": pull_s,
        "bare_push_s": bare_s,
        "apply_s": apply_s,
        "received": received,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saves", type=int, default=100)
    parser.add_argument("--backlog", type=int, default=50_000)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-backlog", action="store_true")
    args = parser.parse_args()

    cluster = PostgresCluster()
    work = Path(tempfile.mkdtemp(prefix="engram-autosync-bench-"))
    server = None
    try:
        print("starting PostgreSQL and engram cloud serve…", flush=True)
        cluster.init()
        cluster.start()
        db = cluster.create_database("bench")
        port = free_port()
        env = engram_env(
            work / "server",
            {
                "ENGRAM_DATABASE_URL": cluster.url(db),
                "ENGRAM_CLOUD_TOKEN": TOKEN,
                "ENGRAM_JWT_SECRET": JWT,
                "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*",
            },
        )
        server = start(
            ["cloud", "serve", "--migrate", "--port", str(port), "--log-level", "warning"],
            env,
            work / "cloud.log",
            port,
        )
        url = f"http://127.0.0.1:{port}"
        if not args.skip_latency:
            rtt = round_trip(url)
            figures = latency(url, work, args.saves)
            target = 0.5 + rtt
            print(f"\nSave on A → searchable on B ({args.saves} saves, autosync defaults):")
            print(f"  p50 {figures['p50'] * 1000:7.1f} ms")
            print(f"  p95 {figures['p95'] * 1000:7.1f} ms   (aim ≤ 1000 ms)")
            print(f"  max {figures['max'] * 1000:7.1f} ms")
            print(
                f"  baseline: debounce 500 ms + one push/pull round trip {rtt * 1000:.1f} ms "
                f"= {target * 1000:.1f} ms; p95 / baseline = {figures['p95'] / target:.2f}"
            )
        if not args.skip_backlog:
            n = args.backlog
            b = backlog(url, work, n)
            print(f"\nBacklog of {n:,} mutations:")
            print(
                f"  push (client services)   {n / b['push_s']:9,.0f} mutations/s  ({b['push_s']:.1f} s)"
            )
            print(
                f"  push (bare HTTP loop)    {n / b['bare_push_s']:9,.0f} mutations/s  "
                f"→ client / bare = {b['bare_push_s'] / b['push_s']:.2f}"
            )
            print(
                f"  pull (client services)   {b['received'] / b['pull_s']:9,.0f} mutations/s  ({b['pull_s']:.1f} s)"
            )
            print(
                f"  apply from memory        {n / b['apply_s']:9,.0f} mutations/s  "
                f"→ pull / local apply = {b['apply_s'] / b['pull_s']:.2f}"
            )
    finally:
        if server is not None:
            stop(server)
        cluster.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
