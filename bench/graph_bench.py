"""The memory graph (issue 20): entity ingest throughput, graph query latency, and what relations
and conflict detection cost the save and search paths.

    python bench/graph_bench.py                    # 10,000 memories (the issue's figure)
    python bench/graph_bench.py --memories 2000    # a quick run

A store is filled (through ``import_data``, deterministic text) with memories that name
components, libraries, files and errors the way engineering notes do. Then, each against a
baseline measured in the same run:

1. **Ingest**: ``graph_ingest`` of every memory (rules), memories/s; baseline: the extraction
   alone over the same texts (no database), so the ratio is the cost of storing the graph.
2. **Query**: ``graph_query`` p50/p95 for "what connects X to Y?" questions over named entities
   (warm graph, nothing left to ingest); baseline: a plain ``search`` of the same words.
3. **Save path**: ``add_observation`` p50 as shipped (the conflict check is only queued) vs.
   with the queue switched off (the save before this issue) vs. running the check inline right
   after each save (what the issue says not to do).
4. **Conflict checks** off the save path: ms per queued memory.
5. **Search**: p50 with the relation annotation step vs. without it.

Searches run in lexical mode (the semantic extra, when installed, would time a model instead).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engram.graph.extract import extract  # noqa: E402
from engram.settings import Config  # noqa: E402
from engram.store import Store  # noqa: E402

COMPONENTS = [
    "auth middleware", "session store", "session cache", "billing service", "user service",
    "api gateway", "search index", "job queue", "email worker", "payment gateway",
    "rate limiter", "config loader", "login handler", "upload service", "report job",
    "audit log", "feature flag", "metrics exporter", "sync client", "webhook handler",
]  # fmt: skip
LIBRARIES = ["Redis", "PostgreSQL", "Kafka", "SQLite", "Celery", "Django", "httpx", "Stripe",
             "Nginx", "Prometheus", "Elasticsearch", "React"]  # fmt: skip
VERBS = ["reads tokens from", "writes events to", "depends on", "calls", "caches",
         "validates requests for", "forwards requests to", "uses"]  # fmt: skip
ERRORS = ["TimeoutError", "ConnectionResetError", "KeyError", "ENOSPC", "HTTP 503"]


def memory_text(rng: random.Random, i: int) -> tuple[str, str, str]:
    a, b = rng.sample(COMPONENTS, 2)
    lib = rng.choice(LIBRARIES)
    sentences = [
        f"The {a} {rng.choice(VERBS)} the {b}.",
        f"The {b} runs on {lib}.",
        f"Fixed {rng.choice(ERRORS)} in src/{a.split()[0]}/{b.split()[0]}_{i % 50}.py.",
        "**Why**: the old path dropped requests under load and nobody noticed for days.",
        f"**Learned**: check the {a} before blaming {lib}; ticket {i}.",
    ]
    rng.shuffle(sentences)
    kind = rng.choice(["bugfix", "decision", "architecture", "discovery", "pattern"])
    return f"{a.title()} and {b} ({i})", " ".join(sentences), kind


def fill(store: Store, count: int, seed: int = 7) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    texts = [memory_text(rng, i) for i in range(count)]
    observations = [
        {"sync_id": f"obs-bench{i:011d}", "session_id": f"s-{i // 40}", "type": kind,
         "title": title, "content": content, "project": "acme", "scope": "project",
         "created_at": "2026-11-01 10:00:00", "updated_at": "2026-11-01 10:00:00"}
        for i, (title, content, kind) in enumerate(texts)
    ]  # fmt: skip
    store.import_data({"version": "0.1.0", "observations": observations})
    return texts


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--saves", type=int, default=300)
    args = parser.parse_args()
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(config=Config(data_dir=Path(tmp) / "data"))
        print(f"Filling a store with {args.memories:,} memories…", flush=True)
        texts = fill(store, args.memories)

        # 1. ingest
        bare = timed(lambda: [extract(t, c, k) for t, c, k in texts])
        ingest = timed(lambda: store.graph_ingest(project="acme"))
        entities = store.db.scalar("SELECT COUNT(*) FROM graph_entities")
        triples = store.db.scalar("SELECT COUNT(*) FROM graph_triples")
        print(f"\n1. Ingest {args.memories:,} memories (rules): {ingest:.2f} s = "
              f"{args.memories / ingest:,.0f} memories/s; {entities:,} entities, "
              f"{triples:,} triples")  # fmt: skip
        print(
            f"   baseline, extraction alone (no database): {bare:.2f} s = "
            f"{args.memories / bare:,.0f} memories/s; ingest/extraction = {ingest / bare:.2f}x"
        )

        # 2. query
        questions = [
            f"what connects the {a} to the {b}?"
            for a, b in (rng.sample(COMPONENTS, 2) for _ in range(args.queries))
        ]
        store.graph_query(questions[0], project="acme")  # warm
        query_ms, search_ms, connected = [], [], 0
        for question in questions:
            started = time.perf_counter()
            answer = store.graph_query(question, project="acme")
            query_ms.append((time.perf_counter() - started) * 1000)
            connected += answer.connected
            started = time.perf_counter()
            store.search(question, project="acme", mode="lexical")
            search_ms.append((time.perf_counter() - started) * 1000)
        print(
            f"\n2. graph_query over {args.memories:,} memories: p50 {statistics.median(query_ms):.1f} ms, "
            f"p95 {pct(query_ms, 0.95):.1f} ms ({connected}/{len(questions)} connected)"
        )
        print(
            f"   baseline, search of the same question: p50 {statistics.median(search_ms):.1f} ms, "
            f"p95 {pct(search_ms, 0.95):.1f} ms"
        )

        # 3. the save path: the three variants take turns, so a busy machine slows all alike
        import engram.store.observations as observations_module

        queue = observations_module.queue_check
        spent: dict[str, list[float]] = {"shipped": [], "no queue": [], "inline": []}
        for i in range(args.saves):
            for label in spent:
                title, content, kind = memory_text(rng, 1_000_000 + 3 * i + len(spent[label]))
                observations_module.queue_check = (
                    (lambda conn, oid: None) if label == "no queue" else queue
                )
                started = time.perf_counter()
                store.add_observation(title=title, content=f"{content} {label}", type=kind,
                                      project="acme")  # fmt: skip
                if label == "inline":
                    store.detect_conflicts()
                spent[label].append((time.perf_counter() - started) * 1000)
                observations_module.queue_check = queue
                if label == "shipped":
                    store.detect_conflicts()  # off the clock: the next save starts clean
        shipped, before, inline = (statistics.median(spent[k]) for k in spent)
        print(
            f"\n3. Save p50: {shipped:.2f} ms as shipped (check queued) vs {before:.2f} ms "
            f"without the queue ({shipped / before:.2f}x) vs {inline:.2f} ms with the check "
            f"inline ({inline / before:.2f}x)"
        )

        # 4. conflict checks off the save path
        for i in range(args.saves):
            title, content, kind = memory_text(rng, 2_000_000 + i)
            store.add_observation(title=title, content=content, type=kind, project="acme")
        queued = store.pending_conflict_checks()
        spent = timed(lambda: store.detect_conflicts(limit=None))
        made = store.db.scalar("SELECT COUNT(*) FROM memory_relations")
        print(
            f"\n4. Conflict checks: {queued} queued memories in {spent:.2f} s = "
            f"{spent / max(queued, 1) * 1000:.1f} ms each; {made:,} conflicts in the store"
        )

        # 5. search with and without the annotation step, query by query in turn
        words = [f"{rng.choice(COMPONENTS)} {rng.choice(LIBRARIES)}" for _ in range(args.queries)]
        annotate = type(store).annotate_results
        with_notes, without = [], []
        for q in words:
            with_notes.append(
                timed(lambda q=q: store.search(q, project="acme", mode="lexical")) * 1000
            )
            type(store).annotate_results = lambda self, results: results
            try:
                without.append(
                    timed(lambda q=q: store.search(q, project="acme", mode="lexical")) * 1000
                )
            finally:
                type(store).annotate_results = annotate
        print(
            f"\n5. Search p50: {statistics.median(with_notes):.2f} ms with relation notes vs "
            f"{statistics.median(without):.2f} ms without "
            f"({statistics.median(with_notes) / statistics.median(without):.2f}x)"
        )
        store.close()


if __name__ == "__main__":
    main()
