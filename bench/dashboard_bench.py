"""Dashboard benchmark: server time of the browser list and search pages with 100,000
observations in one project (target: p95 ≤ 100 ms over 200 requests each).

    python bench/dashboard_bench.py                         # 100,000 observations, 200 requests
    python bench/dashboard_bench.py --observations 20000 --requests 50     # a quick run

A throwaway PostgreSQL cluster is started (as in the tests), migrated, and the read model is
filled with ``COPY`` (the generated search vectors and indexes are built by PostgreSQL as for a
push): ``--observations`` in project ``big`` (one session per 20), plus two small projects, with
text drawn from a Zipf-distributed vocabulary so searches match realistic shares of the rows.
The cloud app runs in-process under litestar's test client, logged in through the login form.

Server time is the ``Server-Timing`` header the dashboard sets (routing to first byte: the
session check, every query and the template rendering); client time is also shown. Workloads:

* list, full page — ``/dashboard/browser/observations`` (a viewer of every project: three per-
  project branches merged), pages mixed as people page: half page 1, 30 % pages 2–10, 20 %
  anywhere up to the count cap (5,000 rows); also as htmx fragments (what a page click fetches);
* search, full page — 1–2 word queries of mid-frequency words (a word matches ~0.3–8 % of the
  rows, two words fewer);
* search, a very common word (matches most rows; bounded by the 1,000-match ranking window) —
  reported, not part of the target.

Baseline, same run: the bare page statement in psql terms (one ``ORDER BY … LIMIT/OFFSET`` on
the big project; for search one ``@@`` + ``ts_rank_cd`` statement over the whole project),
timed through psycopg; the ratio page/baseline shows what the page adds (count, scope,
template) — or saves (the bounded ranking window).
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.postgres import PostgresCluster  # noqa: E402

TOKEN = "bench-legacy-token-0123456789abcdef0123"
SECRET = "bench-jwt-secret-0123456789abcdefghijklmnopqrstuv"
TYPES = ("bugfix", "decision", "discovery", "pattern", "config", "learning", "architecture")
TARGET_MS = 100.0


def vocabulary(size: int, rng: random.Random) -> list[str]:
    """Pronounceable made-up words of 5–9 letters (never English stop words)."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        n = rng.randint(3, 4)
        word = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n))
        words.add(word[: rng.randint(5, 2 * n)])
    return sorted(words)


class Zipf:
    def __init__(self, words: list[str], rng: random.Random, s: float = 1.07) -> None:
        self.words = words
        self.rng = rng
        self.weights = [1 / (i + 1) ** s for i in range(len(words))]

    def take(self, k: int) -> list[str]:
        return self.rng.choices(self.words, weights=self.weights, k=k)


def seed(dsn: str, observations: int, rng: random.Random, words: Zipf) -> None:
    import psycopg

    def stamp(i: int) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_750_000_000 + i * 37))

    projects = [("big", observations), ("small-a", 500), ("small-b", 500)]
    with psycopg.connect(dsn) as conn:
        with conn.cursor().copy(
            "COPY cloud_sessions (project, id, directory, started_at, hlc, contributor) FROM STDIN"
        ) as copy:
            for project, n in projects:
                for s in range(max(1, n // 20)):
                    copy.write_row(
                        (
                            project,
                            f"{project}-s{s:06d}",
                            f"/src/{project}",
                            stamp(s * 20),
                            "h",
                            f"dev{s % 9}",
                        )
                    )
        with conn.cursor().copy(
            "COPY cloud_observations (project, sync_id, session_id, type, title, content, scope,"
            " created_at, updated_at, hlc, contributor) FROM STDIN"
        ) as copy:
            for project, n in projects:
                for i in range(n):
                    title = " ".join(words.take(6)).capitalize()
                    content = (
                        f"**What**: {' '.join(words.take(25))}\n**Why**: {' '.join(words.take(18))}\n"
                        f"**Where**: src/{words.take(1)[0]}.py\n**Learned**: {' '.join(words.take(14))}"
                    )
                    copy.write_row(
                        (
                            project,
                            f"{project}-o{i:07d}",
                            f"{project}-s{i // 20:06d}",
                            rng.choice(TYPES),
                            title,
                            content,
                            "project",
                            stamp(i),
                            stamp(i),
                            "h",
                            f"dev{i % 9}",
                        )
                    )
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def pages_mix(rng: random.Random, n: int, last: int) -> list[int]:
    out = []
    for _ in range(n):
        roll = rng.random()
        out.append(1 if roll < 0.5 else rng.randint(2, 10) if roll < 0.8 else rng.randint(11, last))
    return out


def summary(label: str, server: list[float], client: list[float], target: bool) -> str:
    s = sorted(server)
    p95 = s[max(0, round(0.95 * len(s)) - 1)]
    verdict = ("  OK (≤ 100 ms)" if p95 <= TARGET_MS else "  OVER TARGET") if target else ""
    return (
        f"{label:<38} n={len(s):>3}  server p50 {statistics.median(s):6.1f}  p95 {p95:6.1f}  "
        f"max {s[-1]:6.1f} ms   client p50 {statistics.median(client):6.1f} ms{verdict}"
    )


def run(
    client, urls: list[str], headers: dict[str, str] | None = None
) -> tuple[list[float], list[float]]:
    server, wall = [], []
    for url in urls:
        started = time.perf_counter()
        answer = client.get(url, headers=headers or {})
        wall.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200:
            raise SystemExit(f"{url} answered {answer.status_code}: {answer.text[:300]}")
        server.append(float(answer.headers["server-timing"].split("dur=")[1]))
    return server, wall


def baseline(dsn: str, pages: list[int], queries: list[str]) -> tuple[list[float], list[float]]:
    import psycopg

    lists, searches = [], []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for page in pages:
            started = time.perf_counter()
            conn.execute(
                "SELECT project, sync_id, session_id, type, title, left(content, 600), created_at"
                " FROM cloud_observations WHERE project = 'big' AND deleted_at IS NULL"
                " ORDER BY created_at DESC, sync_id DESC LIMIT 25 OFFSET %s",
                ((page - 1) * 25,),
            ).fetchall()
            lists.append((time.perf_counter() - started) * 1000)
        for q in queries:
            started = time.perf_counter()
            conn.execute(
                "SELECT sync_id, title, left(content, 600) FROM cloud_observations,"
                " websearch_to_tsquery('english', %s) query"
                " WHERE project = 'big' AND search @@ query"
                " ORDER BY ts_rank_cd(search, query) DESC LIMIT 25",
                (q,),
            ).fetchall()
            searches.append((time.perf_counter() - started) * 1000)
    return lists, searches


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--observations", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    from litestar.testing import TestClient

    from engram_cloud.app import create_app
    from engram_cloud.dashboard.queries.common import COUNT_CAP
    from engram_cloud.db import create_db_engine
    from engram_cloud.migrate import upgrade
    from engram_cloud.settings import Settings, parse_allowlist

    rng = random.Random(args.seed)
    words = Zipf(vocabulary(4000, rng), rng)
    cluster = PostgresCluster()
    try:
        cluster.init()
        cluster.start()
        name = cluster.create_database("dashboard_bench")
        dsn, url = cluster.dsn(name), cluster.url(name)
        engine = create_db_engine(url, pool_size=4)
        upgrade(engine)
        print(f"seeding {args.observations:,} observations (COPY)…", flush=True)
        started = time.perf_counter()
        seed(dsn, args.observations, rng, words)
        print(f"  seeded and analysed in {time.perf_counter() - started:.1f} s", flush=True)

        settings = Settings(
            database_url=url, allowed_projects=parse_allowlist("*"), token=TOKEN, jwt_secret=SECRET
        )
        last_page = min(args.observations, COUNT_CAP) // 25
        list_pages = pages_mix(rng, args.requests, last_page)
        mid = words.words[60:1500]
        typical = [" ".join(rng.sample(mid, rng.randint(1, 2))) for _ in range(args.requests)]
        common = [words.words[i % 5] for i in range(max(10, args.requests // 4))]
        with TestClient(create_app(settings, engine=engine), timeout=60) as client:
            client.get("/dashboard/login")
            login = client.post(
                "/dashboard/login",
                data={"token": TOKEN, "_csrf_token": client.cookies["engram_dashboard_csrf"]},
                follow_redirects=False,
            )
            assert login.status_code == 303, login.text
            warm = [f"/dashboard/browser/observations?page={p}" for p in list_pages[:20]]
            run(client, warm + [f"/dashboard/browser/observations?q={q}" for q in typical[:20]])

            rows = []
            urls = [f"/dashboard/browser/observations?page={p}" for p in list_pages]
            rows.append(("list, full page", *run(client, urls), True))
            rows.append(("list, htmx fragment", *run(client, urls, {"HX-Request": "true"}), True))
            rows.append(
                (
                    "list, one project filtered",
                    *run(client, [u + "&project=big" for u in urls]),
                    True,
                )
            )
            search_urls = [f"/dashboard/browser/observations?q={q}" for q in typical]
            rows.append(("search, full page (typical queries)", *run(client, search_urls), True))
            rows.append(
                (
                    "search, very common word (not target)",
                    *run(client, [f"/dashboard/browser/observations?q={q}" for q in common]),
                    False,
                )
            )
            matched = client.get(search_urls[0]).text
        base_lists, base_search = baseline(dsn, list_pages, typical)
        engine.dispose()
    finally:
        cluster.destroy()

    print()
    print(
        f"{args.observations:,} observations in project 'big' (+1,000 in two small projects); "
        f"server time from Server-Timing; {args.requests} requests per workload"
    )
    for label, server, client_ms, target in rows:
        print(summary(label, server, client_ms, target))
    print()
    for label, page_times, base in (
        ("list", rows[0][1], base_lists),
        ("search", rows[3][1], base_search),
    ):
        p50_page, p50_base = statistics.median(page_times), statistics.median(base)
        print(
            f"baseline {label:<7} bare statement p50 {p50_base:6.2f} ms; page/baseline = "
            f"{p50_page / p50_base:5.1f}x"
        )
    print(f"(first search's result count line: {_count_line(matched)})")


def _count_line(html: str) -> str:
    import re

    found = re.search(r'data-testid="count">\s*([^<]+?)\s*<', html)
    return found.group(1) if found else "?"


if __name__ == "__main__":
    main()
