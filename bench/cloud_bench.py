"""Ingest and pull benchmark of the team server (``engram cloud serve``) on a real PostgreSQL.

    python bench/cloud_bench.py                               # 8 clients x 100 batches x 100
    python bench/cloud_bench.py --clients 2 --batches 10 --size 50    # a quick run

A throwaway PostgreSQL cluster is started (as in the tests: initdb + pg_ctl, fsync off), migrated,
and a real ``engram cloud serve`` process listens on a free port. ``--clients`` threads, one
keep-alive connection each, push ``--batches`` zstd-compressed batches of ``--size`` observation
upserts each (every client in its own project). Then:

* every mutation must be stored exactly once (the log is counted and compared mid by mid);
* baseline: ``COPY`` of the same rows into tables made ``LIKE … INCLUDING ALL`` from the log and
  the observations read model (same columns, generated search vector and indexes), in the same
  run on the same cluster; the ratio push/COPY is the figure to watch (aim ≥ 0.25);
* one client pulls the whole log from cursor 0 in pages of ``--page`` (zstd), compared with
  ``COPY (SELECT record … ORDER BY seq) TO STDOUT`` of the same rows.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import zstandard

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engram.record import build_record, format_hlc  # noqa: E402
from tests.support import free_port, wait_for_port  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402

TOKEN = "bench-token-0123456789abcdef0123456789"
WORDS = (
    "auth login token session cache redis postgres migration index query timeout retry queue "
    "worker deploy docker kubernetes config secret rotate bug fix crash panic race lock deadlock "
    "latency memory leak profile benchmark schema api route handler test fixture pipeline build "
    "release version upgrade rollback feature flag"
).split()


def batches_for(client: int, batches: int, size: int, seed: int) -> list[list[dict]]:
    """Realistic observation upserts: a few hundred bytes of text each, one project per client."""
    rng = random.Random(seed + client)
    origin = secrets.token_hex(8)
    project = f"bench-{client}"
    wall = 1_763_756_100_000
    out = []
    for b in range(batches):
        batch = []
        for i in range(size):
            key = f"obs-{client:02d}{b:04d}{i:04d}{rng.randrange(1 << 24):06x}"
            content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 90)))
            payload = {
                "sync_id": key,
                "session_id": f"s-{client}-{b // 10}",
                "type": "discovery",
                "title": " ".join(rng.choice(WORDS) for _ in range(6)),
                "content": content,
                "tool_name": None,
                "project": project,
                "scope": "project",
                "topic_key": None,
                "revision_count": 1,
                "duplicate_count": 1,
                "last_seen_at": None,
                "created_at": "2026-11-21 10:00:00",
                "updated_at": "2026-11-21 10:00:00",
                "deleted_at": None,
            }
            batch.append(
                build_record(
                    mid=secrets.token_hex(16),
                    hlc=format_hlc(wall + b * size + i, 0, origin),
                    origin=origin,
                    entity="observation",
                    key=key,
                    op="upsert",
                    project=project,
                    scope="project",
                    payload=payload,
                )
            )
        out.append(batch)
    return out


def push_all(port: int, work: list[list[list[dict]]]) -> tuple[float, int, list[str]]:
    """Every client pushes its batches; returns (seconds, accepted, errors)."""
    errors: list[str] = []
    accepted = [0] * len(work)
    compressor = zstandard.ZstdCompressor(level=3)
    bodies = [
        [
            compressor.compress(orjson.dumps({"created_by": f"client-{c}", "mutations": b}))
            for b in batches
        ]
        for c, batches in enumerate(work)
    ]
    start = threading.Barrier(len(work) + 1)

    def client(number: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            "Content-Encoding": "zstd",
        }
        start.wait()
        for body, batch in zip(bodies[number], work[number], strict=True):
            for attempt in range(5):
                try:
                    conn.request("POST", "/sync/mutations/push", body=body, headers=headers)
                    response = conn.getresponse()
                    answer = orjson.loads(response.read())
                except (OSError, http.client.HTTPException) as exc:
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                    if attempt == 4:
                        errors.append(f"client {number}: {exc}")
                    continue
                if response.status != 200 or len(answer["accepted"]) != len(batch):
                    errors.append(f"client {number}: {response.status} {str(answer)[:200]}")
                accepted[number] += len(answer.get("accepted", []))
                break
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(len(work))]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began, sum(accepted), errors


def pull_all(port: int, page: int) -> tuple[float, int, int]:
    """Pull the whole log from cursor 0; returns (seconds, mutations, pages)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept-Encoding": "zstd"}
    decompressor = zstandard.ZstdDecompressor()
    since = total = pages = 0
    began = time.perf_counter()
    while True:
        conn.request("GET", f"/sync/mutations/pull?since={since}&limit={page}", headers=headers)
        response = conn.getresponse()
        raw = response.read()
        if response.getheader("content-encoding") == "zstd":
            raw = decompressor.decompressobj().decompress(raw)
        answer = orjson.loads(raw)
        total += len(answer["mutations"])
        pages += 1
        since = answer["next"]
        if not answer["has_more"]:
            break
    conn.close()
    return time.perf_counter() - began, total, pages


def copy_baseline(dsn: str, work: list[list[list[dict]]]) -> float:
    """COPY the same log rows and read-model rows into identical tables; returns seconds."""
    import psycopg

    from engram.record import full_state

    log_rows, obs_rows = [], []
    for c, batches in enumerate(work):
        for batch in batches:
            for record in batch:
                text = orjson.dumps(record)
                digest = hashlib.sha256(orjson.dumps(record, option=orjson.OPT_SORT_KEYS)).digest()
                log_rows.append(
                    (
                        record["mid"],
                        digest,
                        record["project"],
                        record["entity"],
                        record["key"],
                        record["op"],
                        record["hlc"],
                        record["origin"],
                        record["scope"],
                        text.decode(),
                        f"client-{c}",
                        "mutation_push",
                    )
                )
                state = full_state(record)
                obs_rows.append(
                    (
                        record["project"],
                        record["key"],
                        state["session_id"],
                        state["type"],
                        state["title"],
                        state["content"],
                        state["tool_name"],
                        state["scope"],
                        state["topic_key"],
                        state["revision_count"],
                        state["duplicate_count"],
                        state["last_seen_at"],
                        state["created_at"],
                        state["updated_at"],
                        state["deleted_at"],
                        record["hlc"],
                        f"client-{c}",
                    )
                )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_log (LIKE cloud_mutations INCLUDING ALL)")
        conn.execute("CREATE TABLE bench_obs (LIKE cloud_observations INCLUDING ALL)")
        began = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur:
            with cur.copy(
                "COPY bench_log (mid, record_hash, project, entity, key, op, hlc, origin, scope,"
                " record, created_by, source) FROM STDIN"
            ) as copy:
                for row in log_rows:
                    copy.write_row(row)
            with cur.copy(
                "COPY bench_obs (project, sync_id, session_id, type, title, content, tool_name,"
                " scope, topic_key, revision_count, duplicate_count, last_seen_at, created_at,"
                " updated_at, deleted_at, hlc, contributor) FROM STDIN"
            ) as copy:
                for row in obs_rows:
                    copy.write_row(row)
        return time.perf_counter() - began


def copy_out_baseline(dsn: str) -> tuple[float, int]:
    import psycopg

    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        began = time.perf_counter()
        size = 0
        with cur.copy("COPY (SELECT seq, record FROM cloud_mutations ORDER BY seq) TO STDOUT") as c:
            for block in c:
                size += len(block)
        return time.perf_counter() - began, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--size", type=int, default=100, help="mutations per batch")
    parser.add_argument("--page", type=int, default=1000, help="pull page size")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    total = args.clients * args.batches * args.size
    print(
        f"cloud bench: {args.clients} clients x {args.batches} batches x {args.size} mutations "
        f"= {total} mutations"
    )
    cluster = PostgresCluster()
    server = None
    try:
        cluster.init()
        cluster.start()
        database = cluster.create_database("bench")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")},
            "ENGRAM_DATABASE_URL": cluster.url(database),
            "ENGRAM_CLOUD_TOKEN": TOKEN,
            "ENGRAM_JWT_SECRET": secrets.token_hex(32),
            "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*",
        }
        port = free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engram",
                "cloud",
                "serve",
                "--migrate",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            env=env,
            cwd=REPO,
        )
        wait_for_port(port, timeout=60)
        print("preparing batches…", flush=True)
        work = [batches_for(c, args.batches, args.size, args.seed) for c in range(args.clients)]
        seconds, accepted, errors = push_all(port, work)
        print(
            f"push:  {accepted} accepted in {seconds:.2f} s = {accepted / seconds:,.0f} mutations/s"
            f" ({len(errors)} errors)"
        )
        for error in errors[:5]:
            print("  error:", error)

        import psycopg

        expected = {r["mid"] for batches in work for batch in batches for r in batch}
        with psycopg.connect(cluster.dsn(database)) as conn:
            stored = [m for (m,) in conn.execute("SELECT mid FROM cloud_mutations")]
        exact = len(stored) == len(set(stored)) == len(expected) and set(stored) == expected
        print(
            f"check: {len(stored)} stored, {len(set(stored))} distinct, expected {len(expected)}"
            f" -> {'every mutation exactly once' if exact else 'MISMATCH'}"
        )

        copy_seconds = copy_baseline(cluster.dsn(database), work)
        copy_rate = total / copy_seconds
        print(
            f"COPY:  {total} rows into identical log + read-model tables in {copy_seconds:.2f} s"
            f" = {copy_rate:,.0f} rows/s"
        )
        print(f"ratio: push / COPY = {accepted / seconds / copy_rate:.2f}  (aim >= 0.25)")

        pull_seconds, pulled, pages = pull_all(port, args.page)
        print(
            f"pull:  {pulled} mutations in {pages} pages in {pull_seconds:.2f} s"
            f" = {pulled / pull_seconds:,.0f} mutations/s"
        )
        out_seconds, size = copy_out_baseline(cluster.dsn(database))
        print(
            f"COPY TO STDOUT of the same log: {out_seconds:.2f} s = {total / out_seconds:,.0f} rows/s"
            f" ({size / 1e6:.1f} MB); pull / COPY = {pulled / pull_seconds / (total / out_seconds):.2f}"
        )
        return 0 if exact and not errors and pulled == total else 1
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
        cluster.destroy()


if __name__ == "__main__":
    raise SystemExit(main())
