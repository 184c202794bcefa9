"""Benchmark of the cloud server's WebSocket gateway, live dashboard and Worker API.

    python bench/gateway_bench.py                  # 200 idle connections, 20 pushes to a page,
                                                   # 300 heartbeats of each shape
    python bench/gateway_bench.py --idle 50 --pushes 5 --heartbeats 50      # a quick run
    python bench/gateway_bench.py --idle 0 --pushes 0       # heartbeats only (0 skips a part)

A throwaway PostgreSQL cluster (as in the tests) is migrated and a real ``engram cloud serve``
process started on it. Printed:

* **idle connections' memory**: the server's resident memory (``VmRSS``) before and after
  ``--idle`` clients have done the seed's handshake and stay connected, per connection;
* **push-to-browser latency**: headless Chromium keeps ``/dashboard/activity`` open; each of
  ``--pushes`` memories is pushed over HTTP (as another machine would) and the time until its
  title is in the page (a MutationObserver stamps it) is measured; p50 and p95. Baseline in the
  same run: the push request's own round trip.
* **heartbeat latency**: ``--heartbeats`` heartbeats through the first seed's shape (hostname,
  IPs, RAM, GPU; 20 workers) and as many through ours (origin, projects, counts; 20 replicas),
  interleaved on one keep-alive connection from a member (its rate bound raised out of the
  way, so its counting is paid as in production); p50 and p95 of each. Baseline in the same run:
  ``GET /api/v1/whoami`` (the same authentication, no write).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from tests.cloud import records as rec  # noqa: E402
from tests.support import engram_env, free_port, wait_for_port  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402

TOKEN = "bench-shared-token-0123456789abcdef"
SECRET = "bench-jwt-secret-0123456789abcdefghijklmnop"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--pushes", type=int, default=20)
    parser.add_argument("--heartbeats", type=int, default=300, help="of each shape")
    args = parser.parse_args()

    from engram_cloud.db import create_db_engine
    from engram_cloud.migrate import upgrade

    cluster = PostgresCluster()
    process = None
    try:
        cluster.init()
        cluster.start()
        url = cluster.url(cluster.create_database("gateway_bench"))
        engine = create_db_engine(url, pool_size=1)
        upgrade(engine)
        engine.dispose()
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "engram", "cloud", "serve", "--port", str(port)],
            env=engram_env(
                Path(os.environ.get("TMPDIR", "/tmp")),
                {
                    "ENGRAM_DATABASE_URL": url,
                    "ENGRAM_JWT_SECRET": SECRET,
                    "ENGRAM_CLOUD_TOKEN": TOKEN,
                    "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*",
                    "ENGRAM_CLOUD_HEARTBEATS_PER_MINUTE": "100000",
                },
            ),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=None if os.environ.get("BENCH_SERVER_LOG") else subprocess.DEVNULL,
        )
        wait_for_port(port, timeout=60)
        base = f"127.0.0.1:{port}"
        httpx.get(f"http://{base}/health", timeout=30)
        time.sleep(1)
        if args.heartbeats:
            heartbeats(base, args.heartbeats)
        if args.idle:
            idle_connections(process.pid, base, args.idle)
        if args.pushes:
            push_to_browser(base, args.pushes)
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
        cluster.destroy()


def heartbeats(base: str, count: int) -> None:
    """p50/p95 of the seed's heartbeat and of ours, and of an authenticated read."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    timings: dict[str, list[float]] = {"seed": [], "ours": [], "whoami": []}
    with httpx.Client(base_url=f"http://{base}", timeout=30, headers=auth) as http:
        for n in range(count + 20):  # the first 20 of each warm up and are not counted
            requests = {
                "seed": lambda n=n: http.post(
                    "/api/v1/workers/heartbeat",
                    json={
                        "hostname": f"edge-nano-{n % 20:02d}",
                        "tailscale_ip": f"100.64.0.{n % 20}",
                        "local_ip": f"192.168.1.{n % 20}",
                        "ram_gb": 8.0,
                        "gpu_type": "edge device",
                    },
                ),
                "ours": lambda n=n: http.post(
                    "/api/v1/workers/heartbeat",
                    json={
                        "origin": f"{n % 20:016x}",
                        "hostname": f"laptop-{n % 20}",
                        "version": "0.1.0",
                        "projects": ["acme", "widgets"],
                        "pending": n,
                        "quarantined": 0,
                        "last_push_at": "2026-11-21T10:00:00Z",
                        "last_pull_at": None,
                    },
                ),
                "whoami": lambda: http.get("/api/v1/whoami"),
            }
            for name, request in requests.items():
                started = time.perf_counter()
                answer = request()
                elapsed = (time.perf_counter() - started) * 1000
                assert answer.status_code == 200, answer.text
                if n >= 20:
                    timings[name].append(elapsed)
    seed, ours, whoami = (statistics.median(timings[k]) for k in ("seed", "ours", "whoami"))
    print(
        f"heartbeats ({count} of each shape): seed shape p50 {seed:.1f} ms "
        f"(p95 {percentile(timings['seed'], 0.95):.1f}), ours p50 {ours:.1f} ms "
        f"(p95 {percentile(timings['ours'], 0.95):.1f}); seed/ours {seed / ours:.2f}; "
        f"baseline GET /api/v1/whoami p50 {whoami:.1f} ms"
    )


def idle_connections(pid: int, base: str, idle: int) -> None:
    """The server's resident memory before and after ``idle`` handshaken connections."""
    before = rss_kib(pid)
    sockets = []
    for _ in range(idle):
        ws = connect(f"ws://{base}/ws", legacy=True, ping_interval=None)
        ws.send(json.dumps({"token": TOKEN}))
        ws.recv(timeout=30)
        sockets.append(ws)
    time.sleep(1)
    after = rss_kib(pid)
    grown = (after - before) / 1024
    print(
        f"{idle} idle gateway connections: server RSS {before / 1024:.1f} -> "
        f"{after / 1024:.1f} MiB (+{grown:.1f} MiB, {(after - before) / idle:.0f} KiB each)"
    )
    for ws in sockets:
        ws.close()


def push_to_browser(base: str, pushes: int) -> None:
    """Latency from a push over HTTP to its title on an open dashboard page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(f"http://{base}/dashboard/login")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_url("**/dashboard/")
        page.goto(f"http://{base}/dashboard/activity")
        page.wait_for_selector("[data-testid=live-state][data-state=on]")
        page.evaluate(
            """() => { window.__seen = {};
            new MutationObserver(() => {
              for (const a of document.querySelectorAll('#results a')) {
                const t = a.textContent;
                if (t.startsWith('bench-') && !(t in window.__seen)) window.__seen[t] = Date.now();
              }
            }).observe(document.body, {subtree: true, childList: true}); }"""
        )
        latencies, round_trips = [], []
        with httpx.Client(timeout=30) as http:
            for n in range(pushes):
                title = f"bench-{n}"
                started = time.time() * 1000
                answer = http.post(
                    f"http://{base}/sync/mutations/push",
                    json={"created_by": "bench", "mutations": [rec.observation(title=title)]},
                    headers={"Authorization": f"Bearer {TOKEN}"},
                )
                round_trips.append(time.time() * 1000 - started)
                assert answer.status_code == 200, answer.text
                page.wait_for_function(f"() => '{title}' in window.__seen", timeout=30_000)
                latencies.append(page.evaluate(f"window.__seen['{title}']") - started)
                time.sleep(0.3)
        browser.close()
    print(
        f"push-to-browser ({pushes} pushes): p50 {statistics.median(latencies):.0f} ms, "
        f"p95 {percentile(latencies, 0.95):.0f} ms; baseline push round trip p50 "
        f"{statistics.median(round_trips):.0f} ms"
    )


if __name__ == "__main__":
    main()
