"""The import's floor: only the SQL writes the design requires, set-wise, with no Python.

``bench/sync_bench.py`` times ``engram sync --import`` of N mutations against a bare FTS5
insert of the same rows. This script answers how much of that is the schema and how much is
Python: it imports the chunks once the ordinary way (a *reference* store), reads every row that
import left (sessions, prompts, memories with their session context, journal rows, deliveries,
revisions, vector queue, kept states), then writes exactly those rows into an empty store of
the same schema with one ``executemany`` per table and one ``INSERT … SELECT`` per full-text
index, one transaction per chunk the import applied (as the import commits, with its WAL
checkpoints: ``Database.bulk_writes``, the last checkpoint timed too), and times that against
the bare FTS5 insert of the same mutations' text, in one process, round after round.

Each row is written once in its final state: a memory edited in a later chunk is written by
the import twice (its insert, then the edit's update) and here once, so the floor is a little
lower than any import could reach. Variants (``--variants``):

  * ``full``: every table and both full-text indexes, the memories' session context included;
  * ``no-context``: the same with every ``search_context`` empty (the row and the FTS entry
    without it): what indexing the session context some other way would leave;
  * ``no-journal``: ``full`` without the journal and delivery rows;
  * ``neither``: without the session context and without the journal and delivery rows;
  * ``source-rows``: ``full`` plus a delivery row for every received record's own source, as
    the import wrote them before a record counted as held by its source (sixth round).

A reference store imported before that change has those rows: they are left out of ``full``
(as the migration that came with the change drops them) and the targets listed instead.

    .venv/bin/python bench/import_floor.py [--n 100000] [--rounds 3] [--transactions N] [--json]

``--transactions`` commits that many times instead of once per chunk (the bare insert commits
once): what the import's per-chunk commits cost.

Besides the SQL, every import runs some Python for each record whatever the design: the chunk
inflated, its hash checked, its lines split and decoded, each record validated (the trust rules
of ``engram.record.validate_record``). ``reading`` times only that, with nothing kept, and each
variant's line adds it to the variant's floor: the least any import of that design can take on
one core, with no planning, no lookups and no row built in Python at all.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sync_bench

from engram.record import validate_record
from engram.settings import Config
from engram.store import Store
from engram.store.db import BULK_CHECKPOINT_PAGES, connect

#: Tables the import fills, in the order it writes them (FTS indexes are filled from their
#: tables after each transaction's rows, as the import's deferred index does).
TABLES = (
    "sessions",
    "user_prompts",
    "observations",
    "observation_revisions",
    "vector_pending",
    "sync_kept_sessions",
    "sync_kept_observations",
    "sync_kept_user_prompts",
    "sync_journal",
    "sync_delivery",
    "sync_targets",
)
_FTS = {
    "observations": (
        "observations_fts",
        "title, content, tool_name, type, project, topic_key, search_context",
    ),
    "user_prompts": ("prompts_fts", "content, project"),
}
VARIANTS = ("full", "no-context", "no-journal", "neither", "source-rows")
#: What the reference store holds, where a table's rows are not simply all of its rows: the
#: delivery rows that do not repeat their record's source, every target records came from,
#: and (for ``source-rows``) the rows the import wrote before for each received record.
_READ = {
    "sync_delivery": "SELECT d.target, d.seq, d.delivered_at FROM sync_delivery d"
    " JOIN sync_journal j USING (seq) WHERE d.target != j.source ORDER BY d.seq",
    "sync_targets": "SELECT source, 0 FROM sync_journal WHERE source != 'local'"
    " GROUP BY source ORDER BY source",
    "source_rows": "SELECT source, seq, recorded_at FROM sync_journal WHERE source != 'local'"
    " ORDER BY seq",
}
_JOURNAL_TABLES = ("sync_journal", "sync_delivery", "sync_targets")


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def reference_rows(db: Path) -> dict[str, tuple[list[str], list[tuple]]]:
    """Every row of every table the import fills, in rowid (or key) order."""
    conn = sqlite3.connect(db)
    out: dict[str, tuple[list[str], list[tuple]]] = {}
    for table in TABLES:
        if table in _READ:
            columns = ["target", "seq", "delivered_at"] if table == "sync_delivery" else [
                "target", "resend_through"]  # fmt: skip
            out[table] = (columns, conn.execute(_READ[table]).fetchall())
            continue
        columns = _columns(conn, table)
        rows = conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid").fetchall()
        out[table] = (columns, rows)
    out["source_rows"] = (
        ["target", "seq", "delivered_at"],
        conn.execute(_READ["source_rows"]).fetchall(),
    )
    conn.close()
    return out


def _split(rows: list[tuple], parts: int) -> list[list[tuple]]:
    size = -(-len(rows) // parts) if rows else 1
    return [rows[i * size : (i + 1) * size] for i in range(parts)]


def write_floor(
    target: Path, reference: dict[str, tuple[list[str], list[tuple]]], chunks: int, variant: str
) -> tuple[float, float]:
    """Write the reference rows into the empty store at ``target`` (wall, CPU seconds)."""
    journal = variant not in ("no-journal", "neither")
    tables = [t for t in TABLES if journal or t not in _JOURNAL_TABLES]
    prepared: dict[str, tuple[str, list[list[tuple]]]] = {}
    for table in tables:
        columns, rows = reference[table]
        if variant == "source-rows" and table == "sync_delivery":
            rows = sorted({*rows, *reference["source_rows"][1]}, key=lambda r: (r[1], r[0]))
        if variant in ("no-context", "neither") and table == "observations":
            at = columns.index("search_context")
            rows = [(*row[:at], "", *row[at + 1 :]) for row in rows]
        sql = f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        prepared[table] = (sql, _split(rows, chunks))
    conn = connect(target)
    # As the import commits its chunks (Database.bulk_writes): the log checkpointed every
    # BULK_CHECKPOINT_PAGES pages, and once at the end, inside the time.
    conn.execute(f"PRAGMA wal_autocheckpoint={BULK_CHECKPOINT_PAGES}")
    started, cpu = time.perf_counter(), time.process_time()
    for part in range(chunks):
        conn.execute("BEGIN IMMEDIATE")
        for table in tables:
            sql, parts = prepared[table]
            rows = parts[part]
            if not rows:
                continue
            conn.executemany(sql, rows)
            if table in _FTS:
                fts, names = _FTS[table]
                conn.execute(
                    f"INSERT INTO {fts}(rowid, {names}) SELECT id, {names} FROM {table}"
                    " WHERE id BETWEEN ? AND ? ORDER BY id",
                    (rows[0][0], rows[-1][0]),
                )
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    return seconds, cpu


def read_floor(blobs: list[bytes]) -> tuple[float, float]:
    """What every import runs for each record before it can write anything (wall, CPU
    seconds): each chunk inflated, hashed, split into lines, each line decoded and validated."""
    import hashlib
    import zlib

    loads = orjson.loads
    started, cpu = time.perf_counter(), time.process_time()
    for blob in blobs:
        raw = zlib.decompress(blob, 16 + zlib.MAX_WBITS)
        hashlib.sha256(raw).hexdigest()
        for line in raw.split(b"\n")[1:]:
            if line:
                validate_record(loads(line), text_checked=b"\\u0000" not in line)
    return time.perf_counter() - started, time.process_time() - cpu


def bare_rows(work: Path) -> list[tuple]:
    import gzip

    rows = []
    for path in sync_bench.chunk_files(work):
        for line in gzip.decompress(path.read_bytes()).split(b"\n")[1:]:
            if line:
                p = orjson.loads(line)["payload"]
                rows.append(
                    (p.get("title"), p.get("content") or p.get("directory"), p.get("tool_name"),
                     p.get("type"), p.get("project"), p.get("topic_key"))
                )  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="mutations")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--work", help="a directory sync_bench's seed/export/import phases filled")
    parser.add_argument(
        "--transactions", type=int, help="commit this many times (default: once per chunk)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    variants = args.variants.split(",")
    with tempfile.TemporaryDirectory(prefix="engram-floor-") as tmp:
        work = Path(args.work) if args.work else Path(tmp) / "work"
        if not args.work:
            work.mkdir()
            sync_bench.run_phase("seed", work, "--n", str(args.n))
            sync_bench.run_phase("export", work)
            sync_bench.run_phase("import", work)
        db = Config(data_dir=work / "dest").db_path
        reference = reference_rows(db)
        chunks = args.transactions or len(sync_bench.chunk_files(work))
        bare = bare_rows(work)
        blobs = [path.read_bytes() for path in sync_bench.chunk_files(work)]
        results: dict[str, list[tuple[float, float]]] = {
            v: [] for v in ["bare", "reading", *variants]
        }
        for round_ in range(args.rounds):
            for variant in ["bare", "reading", *variants]:
                target = Path(tmp) / f"{variant}-{round_}"
                if variant == "reading":
                    results[variant].append(read_floor(blobs))
                    continue
                if variant == "bare":
                    target.mkdir()
                    results[variant].append(sync_bench.bare_insert(target / "bare.db", bare))
                    continue
                Store.open(config=Config(data_dir=target)).close()  # the schema, empty
                results[variant].append(
                    write_floor(Config(data_dir=target).db_path, reference, chunks, variant)
                )
    base_wall = [w for w, _ in results["bare"]]
    base_cpu = [c for _, c in results["bare"]]
    summary = {
        "mutations": len(bare),
        "transactions": chunks,
        "rows": {t: len(reference[t][1]) for t in TABLES},
        "bare_wall_s": base_wall,
        "bare_cpu_s": base_cpu,
        "reading": {
            "wall_s": [w for w, _ in results["reading"]],
            "cpu_s": [c for _, c in results["reading"]],
        },
    }
    read_wall, read_cpu = summary["reading"]["wall_s"], summary["reading"]["cpu_s"]
    for variant in variants:
        walls = [w for w, _ in results[variant]]
        cpus = [c for _, c in results[variant]]
        summary[variant] = {
            "wall_s": walls,
            "cpu_s": cpus,
            "vs_bare_wall": [w / b for w, b in zip(walls, base_wall, strict=True)],
            "vs_bare_cpu": [c / b for c, b in zip(cpus, base_cpu, strict=True)],
            # the variant's floor with the reading every import runs (one core, one after the other)
            "with_reading_vs_bare_wall": [
                (w + r) / b for w, r, b in zip(walls, read_wall, base_wall, strict=True)
            ],
            "with_reading_vs_bare_cpu": [
                (c + r) / b for c, r, b in zip(cpus, read_cpu, base_cpu, strict=True)
            ],
        }
    if args.json:
        print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
        return
    print(f"{summary['mutations']:,} mutations, {chunks} transactions; rows: {summary['rows']}")
    print(
        f"bare FTS5 insert: wall {median(base_wall):.2f} s, CPU {median(base_cpu):.2f} s (median)"
    )
    n = summary["mutations"]
    print(
        f"reading (inflate, hash, split, decode, validate): wall {median(read_wall):.2f} s, CPU"
        f" {median(read_cpu):.2f} s ({median(read_cpu) / n * 1e6:.1f} µs a mutation) —"
        f" {median(read_wall) / median(base_wall):.2f}x wall, {median(read_cpu) / median(base_cpu):.2f}x CPU"
    )
    for variant in variants:
        s = summary[variant]
        print(
            f"floor {variant:>10}: wall {median(s['wall_s']):.2f} s, CPU {median(s['cpu_s']):.2f} s"
            f" — {median(s['vs_bare_wall']):.2f}x wall, {median(s['vs_bare_cpu']):.2f}x CPU"
            f" (rounds: {', '.join(f'{r:.2f}' for r in s['vs_bare_cpu'])}x CPU);"
            f" with the reading {median(s['with_reading_vs_bare_wall']):.2f}x wall,"
            f" {median(s['with_reading_vs_bare_cpu']):.2f}x CPU"
        )


if __name__ == "__main__":
    main()
