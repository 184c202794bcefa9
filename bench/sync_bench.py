"""Git-sync benchmark (issue 5 targets).

Builds a journal of N mutations (default 100,000: realistic developer notes from three
replicas — sessions, new memories, edits, soft deletes, prompts; fixed seed), then measures, each
phase in its own process:

  * export: ``engram sync --all`` of the whole journal into chunks (mutations/s);
  * import of those chunks into an empty store (mutations/s) and the import's peak RSS;
  * baseline: inserting the same rows' text into a bare FTS5 table (same ``porter unicode61``
    tokenizer) in one transaction; target import ≤ 4× that time (issue 18; issue 5 asked 2×);
  * peak RSS of the import at each size (default 10k and 100k): it should stay flat as the
    data grows, since chunks are applied one at a time.

    .venv/bin/python bench/sync_bench.py [--sizes 10000,100000] [--json] [--profile]

``--profile`` also runs the largest import under cProfile and prints the top functions.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import devnotes

from engram.record import build_record, format_hlc
from engram.settings import Config
from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync

ORIGINS = ["a1a1a1a1a1a1a1a1", "b2b2b2b2b2b2b2b2", "c3c3c3c3c3c3c3c3"]
START_MS = 1_763_700_000_000
#: Issue 18: an import of 100,000 mutations within 4x the bare FTS5 insert of the same rows.
TARGET = 4.0


def stamp(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


def journal_records(n: int, seed: int = 7) -> list[str]:
    """``n`` mutation records as chunk lines: a session per 50 notes, a prompt per 10, one edit
    per 12 and one soft delete per 40 memories, spread over three replicas."""
    rng = random.Random(seed)
    lines: list[str] = []
    live: list[dict] = []
    clock = START_MS
    notes = devnotes.notes(n, seed)
    session = None
    i = 0

    def emit(entity: str, key: str, op: str, project: str, scope: str, payload: dict) -> None:
        nonlocal clock
        clock += rng.randint(1, 50)
        origin = ORIGINS[i % 3]
        record = build_record(
            mid=f"{rng.getrandbits(128):032x}",
            hlc=format_hlc(clock, 0, origin),
            origin=origin,
            entity=entity,
            key=key,
            op=op,
            project=project,
            scope=scope,
            payload=payload,
        )
        lines.append(orjson.dumps(record).decode())

    while len(lines) < n:
        item = next(notes)
        project = item["project"]
        if i % 50 == 0:
            session = f"s-bench-{i // 50}"
            emit(
                "session",
                session,
                "upsert",
                project,
                "project",
                {
                    "id": session,
                    "project": project,
                    "directory": f"/src/{project}",
                    "started_at": stamp(clock),
                    "ended_at": None,
                    "summary": None,
                },
            )
        if i % 10 == 0 and len(lines) < n:
            emit(
                "prompt",
                f"prompt-{i:012d}",
                "upsert",
                project,
                "project",
                {
                    "sync_id": f"prompt-{i:012d}",
                    "session_id": session,
                    "content": f"how do we handle the {item['title'].lower()}?",
                    "project": project,
                    "created_at": stamp(clock),
                },
            )
        if len(lines) >= n:
            break
        now = stamp(clock)
        memory = {
            "sync_id": f"obs-{i:016x}",
            "session_id": session,
            "type": item["type"],
            "title": item["title"],
            "content": item["content"],
            "tool_name": None,
            "project": project,
            "scope": "project",
            "topic_key": None,
            "revision_count": 1,
            "duplicate_count": 1,
            "last_seen_at": now,
            "created_at": now,
            "updated_at": now,
            "deleted_at": None,
        }
        emit("observation", memory["sync_id"], "upsert", project, "project", memory)
        live.append(memory)
        if i % 12 == 11 and len(lines) < n:
            edited = rng.choice(live)
            edited.update(
                content=edited["content"] + "\n**Update**: confirmed in production.",
                revision_count=edited["revision_count"] + 1,
                updated_at=stamp(clock),
            )
            emit(
                "observation",
                edited["sync_id"],
                "upsert",
                edited["project"],
                "project",
                dict(edited),
            )
        if i % 40 == 39 and len(lines) < n:
            gone = live.pop(rng.randrange(len(live)))
            gone.update(deleted_at=stamp(clock), updated_at=stamp(clock))
            emit(
                "observation",
                gone["sync_id"],
                "delete",
                gone["project"],
                "project",
                {**gone, "hard": False},
            )
        i += 1
    return lines[:n]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def chunk_files(work: Path) -> list[Path]:
    """The exported chunks: ``log/`` since the Go bridge (``chunks/`` is the Go tool's), where
    earlier versions wrote them. (Reading only ``chunks/`` left the bare FTS5 baseline with no
    rows at all, and every ratio meaningless.)"""
    engram = work / "repo" / ".engram"
    return sorted([*(engram / "log").glob("*.jsonl.gz"), *(engram / "chunks").glob("*.jsonl.gz")])


def open_store(path: Path) -> Store:
    return Store.open(config=Config(data_dir=path))


# --- phases (each runs in its own process) -------------------------------------------------


def phase_seed(work: Path, n: int) -> dict:
    lines = journal_records(n)
    with open_store(work / "source") as store:
        started = time.perf_counter()
        for start in range(0, len(lines), 5000):
            store.apply_mutations(lines[start : start + 5000], source="bench:seed")
        seconds = time.perf_counter() - started
    return {"seed_seconds": seconds}


def phase_export(work: Path) -> dict:
    with open_store(work / "source") as store:
        sync = GitSync(store, SyncDir(work / "repo" / ".engram"), author="bench")
        started = time.perf_counter()
        report = sync.export(projects=None, include_personal=True)
        seconds = time.perf_counter() - started
    files = chunk_files(work)
    return {
        "export_seconds": seconds,
        "exported": report.total("mutations"),
        "chunks": len(report.chunks),
        "compressed_bytes": sum(p.stat().st_size for p in files),
    }


def phase_import(work: Path, profile: bool = False) -> dict:
    with open_store(work / "dest") as store:
        sync = GitSync(store, SyncDir(work / "repo" / ".engram"))
        for project in devnotes.PROJECTS:  # the journal's projects are all this repository's
            sync.bind(project)
        baseline_rss = peak_rss_mb()
        started, cpu = time.perf_counter(), time.process_time()
        if profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            report = profiler.runcall(sync.import_chunks)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats(
                os.environ.get("PROFILE_SORT", "cumulative")
            ).print_stats(40)
        else:
            report = sync.import_chunks()
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
        assert not report.failures, report.failures
        assert not report.held, report.held
    return {
        "import_seconds": seconds,
        "import_cpu_seconds": cpu,
        "imported": report.applied.received,
        "rss_before_import_mb": baseline_rss,
        "import_peak_rss_mb": peak_rss_mb(),
    }


def phase_fts(work: Path) -> dict:
    """The same rows' text into a bare FTS5 table, one transaction (reading them not timed)."""
    rows = []
    for path in chunk_files(work):
        for line in gzip.decompress(path.read_bytes()).split(b"\n")[1:]:
            if not line:
                continue
            record = orjson.loads(line)
            p = record["payload"]
            rows.append(
                (
                    p.get("title"),
                    p.get("content") or p.get("directory"),
                    p.get("tool_name"),
                    p.get("type"),
                    p.get("project"),
                    p.get("topic_key"),
                )
            )
    seconds, cpu = bare_insert(work / "bare.db", rows)
    return {"fts_seconds": seconds, "fts_cpu_seconds": cpu, "fts_rows": len(rows)}


def bare_insert(target: Path, rows: list[tuple]) -> tuple[float, float]:
    """The baseline: ``rows`` (the mutations' text) into a bare FTS5 table in one
    transaction; returns (wall, CPU) seconds. ``import_floor.py`` times the same."""
    conn = sqlite3.connect(target)
    started, cpu = time.perf_counter(), time.process_time()
    conn.execute(
        "CREATE VIRTUAL TABLE bare USING fts5(title, content, tool_name, type, project,"
        " topic_key, tokenize='porter unicode61')"
    )
    with conn:
        conn.executemany("INSERT INTO bare VALUES (?, ?, ?, ?, ?, ?)", rows)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    return seconds, cpu


# --- driver --------------------------------------------------------------------------------


def run_phase(name: str, work: Path, *extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--phase", name, "--work", str(work), *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"phase {name} failed:\n{done.stderr}")
    if done.stderr.strip():
        sys.stderr.write(done.stderr)
    return orjson.loads(done.stdout.strip().splitlines()[-1])


def measure(n: int, profile: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="engram-sync-bench-") as tmp:
        work = Path(tmp)
        result = {"mutations": n}
        result.update(run_phase("seed", work, "--n", str(n)))
        result.update(run_phase("export", work))
        result.update(run_phase("import", work, *(["--profile"] if profile else [])))
        result.update(run_phase("fts", work))
    if result["fts_rows"] != result["exported"]:  # the baseline must insert every mutation's text
        raise SystemExit(f"the bare FTS5 baseline read {result['fts_rows']} rows of {n}")
    result["export_per_s"] = result["exported"] / result["export_seconds"]
    result["import_per_s"] = result["imported"] / result["import_seconds"]
    result["import_vs_fts"] = result["import_seconds"] / result["fts_seconds"]
    result["import_vs_fts_cpu"] = result["import_cpu_seconds"] / result["fts_cpu_seconds"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="journal sizes, comma-separated")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest import")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        work = Path(args.work)
        out = {
            "seed": lambda: phase_seed(work, args.n),
            "export": lambda: phase_export(work),
            "import": lambda: phase_import(work, args.profile),
            "fts": lambda: phase_fts(work),
        }[args.phase]()
        print(orjson.dumps(out).decode())
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    results = [measure(n, args.profile and n == max(sizes)) for n in sizes]
    if args.json:
        print(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())
        return
    print(
        f"{'mutations':>10} {'export/s':>10} {'import/s':>10} {'chunks':>7} {'gz MB':>7}"
        f" {'import s':>9} {'bare FTS s':>11} {'ratio':>6} {'import RSS MB':>14}"
    )
    for r in results:
        print(
            f"{r['mutations']:>10,} {r['export_per_s']:>10,.0f} {r['import_per_s']:>10,.0f}"
            f" {r['chunks']:>7} {r['compressed_bytes'] / 1e6:>7.1f} {r['import_seconds']:>9.2f}"
            f" {r['fts_seconds']:>11.2f} {r['import_vs_fts']:>5.2f}x"
            f" {r['import_peak_rss_mb']:>8.1f} (process {r['rss_before_import_mb']:.0f})"
        )
    largest = results[-1]
    verdict = "OK" if largest["import_vs_fts"] <= TARGET else "MISSED"
    print(
        f"\nTarget: import within {TARGET:g}x of bare FTS5 inserts at {largest['mutations']:,}: "
        f"{largest['import_vs_fts']:.2f}x wall, {largest['import_vs_fts_cpu']:.2f}x CPU ({verdict})"
    )
    if len(results) > 1:
        growth = results[-1]["import_peak_rss_mb"] - results[0]["import_peak_rss_mb"]
        print(
            f"Import peak RSS from {results[0]['mutations']:,} to {largest['mutations']:,} "
            f"mutations: {results[0]['import_peak_rss_mb']:.1f} → "
            f"{largest['import_peak_rss_mb']:.1f} MB ({growth:+.1f} MB)"
        )
    if os.environ.get("CI"):
        print("(figures from a shared CI machine: compare ratios, not absolutes)")


if __name__ == "__main__":
    main()
