"""The journal row a received mutation writes, one B-tree at a time (issue 18, eighth round).

``bench/import_floor.py`` says what the journal costs an import as a whole (its ``no-journal``
variant). This script says where that goes: it reads the journal rows an ordinary import left
(a directory ``bench/sync_bench.py``'s seed, export and import phases filled), then writes
only those rows into an empty ``sync_journal`` — the store's own definition of the table and
its indexes, read from a new store — one transaction per chunk the import applied, with the
WAL checkpointed as the import does (``Database.bulk_writes``), and times it. Each variant
changes one thing, so the difference from ``full`` is what that thing costs a row:

  * ``full``: the table as the schema defines it;
  * ``no-mid``: without the unique index on ``mid`` (random keys);
  * ``mid-prefix``: the ``mid`` index on its first 12 hex digits, not unique (a smaller key);
  * ``mid-blob``: ``mid`` stored as its 16 bytes, still unique (a smaller key, lossless);
  * ``no-key``: without ``sync_journal_key`` (entity, project, key, hlc);
  * ``key-narrow``: ``sync_journal_key`` on (key, hlc) only;
  * ``no-project``: without ``sync_journal_project`` (project, seq);
  * ``no-autoincrement``: ``seq`` without AUTOINCREMENT (no ``sqlite_sequence`` update a row);
  * ``lean-text``: ``source``, ``origin`` and ``recorded_at`` written empty (the text that
    repeats on every received row);
  * ``table-only``: the rows alone, no index, no AUTOINCREMENT;
  * ``mid-ordered``: each mid's first 12 hex digits replaced by its record's wall clock in ms
    (its hlc's), as ``record.new_mid`` mints them now: the same unique index, keys in time
    order (the rows' own mids were minted at random by the round's start);
  * ``mid-by-clock``: unique on (hlc, mid) instead of mid: a key in time order, but a weaker
    rule (the same mid at another clock would be a second row) — what a design change would buy;
  * ``key-with-mid``: no index on ``mid``, ``sync_journal_key`` unique on (entity, project, key,
    hlc, mid): one index for both, with the same weaker rule.

``--preload N`` first writes N copies of the rows (an older history: fresh random mids, keys
and clocks that sort before the rows' own) in one transaction, so the same rows are timed going into a journal N+1 times larger: a random index
(the mid's) costs what its size makes it cost, since each commit rewrites every leaf page it
touched.

    .venv/bin/python bench/journal_rows.py --work <dir> [--rounds 3] [--preload 0] [--variants …]
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sync_bench

from engram.settings import Config
from engram.store import Store
from engram.store.db import BULK_CHECKPOINT_PAGES, connect

Rows = list[tuple]


class Schema:
    """The journal's table and index definitions, and the rows as a variant writes them."""

    def __init__(self, table: str, indexes: dict[str, str], columns: list[str]) -> None:
        self.table = table
        self.indexes = indexes
        self.columns = columns
        #: How a variant changes each row before it is written (none: as read).
        self.convert: Callable[[tuple], tuple] | None = None

    def set_column(self, name: str, value: Callable[[object], object]) -> None:
        at = self.columns.index(name)
        before = self.convert

        def convert(row: tuple) -> tuple:
            row = before(row) if before is not None else row
            return (*row[:at], value(row[at]), *row[at + 1 :])

        self.convert = convert

    def sub(self, pattern: str, replacement: str) -> None:
        table, found = re.subn(pattern, replacement, self.table, count=1, flags=re.IGNORECASE)
        if found != 1:
            raise RuntimeError(f"the journal's definition changed: {pattern!r} not in {table}")
        self.table = table


def _no_mid(s: Schema) -> None:
    s.sub(r"\bmid\s+TEXT\s+NOT\s+NULL\s+UNIQUE\b", "mid TEXT NOT NULL")


def _mid_prefix(s: Schema) -> None:
    _no_mid(s)
    s.indexes["sync_journal_mid"] = (
        "CREATE INDEX sync_journal_mid ON sync_journal(substr(mid, 1, 12))"
    )


def _mid_blob(s: Schema) -> None:
    s.sub(r"\bmid\s+TEXT\s+NOT\s+NULL\s+UNIQUE\b", "mid BLOB NOT NULL UNIQUE")
    s.set_column("mid", lambda mid: bytes.fromhex(str(mid)))


def _no_autoincrement(s: Schema) -> None:
    s.sub(r"\s+AUTOINCREMENT\b", "")


def _lean_text(s: Schema) -> None:
    for name in ("source", "origin", "recorded_at"):
        s.set_column(name, lambda _: "")


def _no_key(s: Schema) -> None:
    del s.indexes["sync_journal_key"]


def _key_narrow(s: Schema) -> None:
    s.indexes["sync_journal_key"] = "CREATE INDEX sync_journal_key ON sync_journal(key, hlc)"


def _no_project(s: Schema) -> None:
    del s.indexes["sync_journal_project"]


def _table_only(s: Schema) -> None:
    _no_mid(s)
    _no_autoincrement(s)
    s.indexes.clear()


def _mid_by_clock(s: Schema) -> None:
    _no_mid(s)
    s.indexes["sync_journal_mid"] = "CREATE UNIQUE INDEX sync_journal_mid ON sync_journal(hlc, mid)"


def _key_with_mid(s: Schema) -> None:
    _no_mid(s)
    s.indexes["sync_journal_key"] = (
        "CREATE UNIQUE INDEX sync_journal_key ON sync_journal(entity, project, key, hlc, mid)"
    )


def _mid_ordered(s: Schema) -> None:
    mid, hlc = s.columns.index("mid"), s.columns.index("hlc")
    before = s.convert

    def convert(row: tuple) -> tuple:
        row = before(row) if before is not None else row
        wall = int(str(row[hlc]).split(".", 1)[0])
        return (*row[:mid], f"{wall:012x}{str(row[mid])[12:]}", *row[mid + 1 :])

    s.convert = convert


VARIANTS: dict[str, Callable[[Schema], None]] = {
    "full": lambda s: None,
    "mid-ordered": _mid_ordered,
    "no-mid": _no_mid,
    "mid-prefix": _mid_prefix,
    "mid-blob": _mid_blob,
    "no-key": _no_key,
    "key-narrow": _key_narrow,
    "no-project": _no_project,
    "no-autoincrement": _no_autoincrement,
    "lean-text": _lean_text,
    "table-only": _table_only,
    "mid-by-clock": _mid_by_clock,
    "key-with-mid": _key_with_mid,
}


def journal_schema(tmp: Path) -> tuple[str, dict[str, str]]:
    """The ``CREATE`` statements of ``sync_journal`` and its indexes in a new store."""
    config = Config(data_dir=tmp / "schema")
    Store.open(config=config).close()
    conn = sqlite3.connect(config.db_path)
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'sync_journal'"
        " AND type IN ('table', 'index') AND sql IS NOT NULL"
    ).fetchall()
    conn.close()
    table = next(sql for kind, _, sql in rows if kind == "table")
    return table, {name: sql for kind, name, sql in rows if kind == "index"}


def copies(rows: Rows, columns: list[str], count: int) -> Rows:
    """``count`` copies of ``rows`` as an older history: fresh random mids, keys that sort
    before the rows' own (keys are minted in time order, ``record.new_key``) and clocks
    earlier than theirs."""
    mid, key, hlc = columns.index("mid"), columns.index("key"), columns.index("hlc")
    out: Rows = []
    for copy in range(count):
        earlier = (count - copy) * 10**9  # ms: each copy ~12 days before the next
        for row in rows:
            changed = list(row)
            changed[mid] = os.urandom(16).hex()
            changed[key] = f"!{copy:04d}{row[key]}"
            wall, rest = str(row[hlc]).split(".", 1)
            changed[hlc] = f"{int(wall) - earlier:013d}.{rest}"
            out.append(tuple(changed))
    return out


def write(
    target: Path, schema: Schema, rows: Rows, chunks: int, preload: Rows
) -> tuple[float, float, int]:
    """Write ``rows`` (after ``preload``, untimed) as the import commits; (wall s, CPU s,
    file bytes)."""
    conn = connect(target)
    conn.execute(schema.table)
    for sql in schema.indexes.values():
        conn.execute(sql)
    names = ", ".join(schema.columns)
    sql = f"INSERT INTO sync_journal({names}) VALUES ({', '.join('?' * len(schema.columns))})"
    convert = schema.convert
    if preload:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, preload if convert is None else [convert(r) for r in preload])
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    written = rows if convert is None else [convert(r) for r in rows]
    size = -(-len(written) // chunks)
    parts = [written[i * size : (i + 1) * size] for i in range(chunks)]
    conn.execute(f"PRAGMA wal_autocheckpoint={BULK_CHECKPOINT_PAGES}")
    started, cpu = time.perf_counter(), time.process_time()
    for part in parts:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, part)
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    return seconds, cpu, int(pages) * int(page_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="a directory sync_bench's import filled")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--preload", type=int, default=0, help="copies written first, untimed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    work = Path(args.work)
    reference = sqlite3.connect(Config(data_dir=work / "dest").db_path)
    rows = reference.execute("SELECT * FROM sync_journal ORDER BY seq").fetchall()
    columns = [r[1] for r in reference.execute("PRAGMA table_info(sync_journal)")]
    reference.close()
    # Written without their seq, as the import writes them (AUTOINCREMENT hands them out).
    at = [i for i, name in enumerate(columns) if name != "seq"]
    columns = [columns[i] for i in at]
    rows = [tuple(row[i] for i in at) for row in rows]
    chunks = len(sync_bench.chunk_files(work))
    preload = copies(rows, columns, args.preload)
    results: dict[str, list[tuple[float, float, int]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="engram-journal-rows-") as tmp:
        table, indexes = journal_schema(Path(tmp))
        for round_ in range(args.rounds):
            for variant in variants:
                schema = Schema(table, dict(indexes), list(columns))
                VARIANTS[variant](schema)
                target = Path(tmp) / f"{variant}-{round_}.db"
                results[variant].append(write(target, schema, rows, chunks, preload))
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{target}{suffix}").unlink(missing_ok=True)
    summary: dict[str, object] = {"rows": len(rows), "preloaded": len(preload), "commits": chunks}
    for variant in variants:
        cpus = [c for _, c, _ in results[variant]]
        summary[variant] = {
            "cpu_s": cpus,
            "wall_s": [w for w, _, _ in results[variant]],
            "cpu_us_per_row": median(cpus) * 1e6 / len(rows),
            "file_mb": results[variant][-1][2] / 1e6,
        }
    if args.json:
        print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
        return
    print(f"{len(rows):,} journal rows in {chunks} commits, after {len(preload):,} preloaded")
    base = summary.get("full")
    for variant in variants:
        s = summary[variant]
        assert isinstance(s, dict)
        delta = ""
        if isinstance(base, dict) and variant != "full":
            delta = f" ({s['cpu_us_per_row'] - base['cpu_us_per_row']:+.2f} µs vs full)"
        print(
            f"{variant:>16}: {s['cpu_us_per_row']:5.2f} µs CPU a row{delta}, wall median"
            f" {median(s['wall_s']):.2f} s, file {s['file_mb']:.1f} MB"
            f" (CPU s: {', '.join(f'{c:.3f}' for c in s['cpu_s'])})"
        )


if __name__ == "__main__":
    main()
