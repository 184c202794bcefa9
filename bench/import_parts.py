"""Where an import's time goes: CPU per mutation of each part of ``engram sync --import``.

Runs the import phase of ``bench/sync_bench.py`` on a directory its seed and export phases
filled, with each part of the import timed in place (the store's functions wrapped, CPU time
per call summed), and prints microseconds per mutation:

    W=/tmp/w20 && mkdir -p $W
    .venv/bin/python bench/sync_bench.py --phase seed --work $W --n 20000
    .venv/bin/python bench/sync_bench.py --phase export --work $W
    .venv/bin/python bench/import_parts.py --work $W

Parts nest (an indented part is inside the one above it); the wrappers cost a little, so the
total is a few per cent above an untimed import. ``lane SQL`` is the fresh lane's statements;
``BEGIN/COMMIT`` the chunks' transactions (writing the WAL and checkpointing it).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sqlite3
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import devnotes
import sync_bench

from engram.store import (
    batch_contexts,
    edit_lane,
    fresh_lane,
    fts,
    journal,
    replication,
    search_context,
)
from engram.sync.git import importer
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync

SPENT: dict[str, float] = defaultdict(float)
#: The transactions' own statements (a group of chunks commits once; each chunk is a part).
_TRANSACTION = ("BEGIN IMMEDIATE", "COMMIT", "SAVEPOINT part", "RELEASE part")
CALLS: dict[str, int] = defaultdict(int)


def timed(owner: Any, name: str, label: str) -> None:
    """Wrap ``owner.name`` so that its CPU time is summed under ``label``."""
    inner: Callable[..., Any] = getattr(owner, name)
    SPENT[label] = 0.0  # (printed in the order registered)

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            SPENT[label] += time.process_time() - started
            CALLS[label] += 1

    setattr(owner, name, wrapper)


class TimedConnection:
    """A connection whose statements' CPU time is summed under ``label`` (and, for the
    transaction's own statements, under ``BEGIN/COMMIT``)."""

    def __init__(self, conn: sqlite3.Connection, label: str) -> None:
        self.conn = conn
        self.label = label

    def _time(self, method: Callable[..., Any], sql: str, *args: Any) -> Any:
        started = time.process_time()
        try:
            return method(sql, *args)
        finally:
            label = "BEGIN/COMMIT" if sql in _TRANSACTION else self.label
            if label:
                SPENT[label] += time.process_time() - started

    def execute(self, sql: str, *args: Any) -> Any:
        return self._time(self.conn.execute, sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self._time(self.conn.executemany, sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def instrument() -> None:
    SPENT["BEGIN/COMMIT"] = 0.0
    timed(importer, "judge", "judging the scope")
    timed(replication.ReplicationMixin, "apply_mutations", "applying (apply_mutations)")
    timed(replication, "parse_record", "  parsing and validating")
    timed(replication._ApplyBatch, "_look_up", "  the mids held here, looked up")
    timed(fresh_lane.FreshLane, "plan", "  planning the fresh lane")
    timed(batch_contexts, "foresee", "  foreseeing the contexts")
    replication.foresee = batch_contexts.foresee  # (imported by name)
    timed(fresh_lane.FreshLane, "flush", "  writing fresh runs")
    SPENT["    (lane SQL)"] = 0.0
    timed(fresh_lane.FreshLane, "_memories", "    memories")
    timed(fresh_lane.FreshLane, "_journal", "    journal rows")
    timed(fresh_lane.FreshLane, "_prompts", "    prompts")
    timed(fresh_lane.FreshLane, "_stub_sessions", "    stub sessions")
    timed(edit_lane, "write", "    edits (the edit lane)")
    timed(replication._ApplyBatch, "_take", "  other records, one by one")
    timed(replication._ApplyBatch, "finish", "  the batch's end")
    timed(batch_contexts, "rederive_sessions", "    sessions' contexts")
    replication.rederive_sessions = batch_contexts.rederive_sessions  # (imported by name)
    timed(search_context.ContextRefresh, "flush", "    context re-derivations")
    timed(fts.DeferredIndex, "flush", "    full-text index")
    timed(journal.Journal, "blank_deleted_payloads", "    deliveries' blanking check")
    if hasattr(replication, "deliver"):  # (a record is held by its source: no row each)
        timed(replication, "deliver", "    delivery rows")
    lane_init = fresh_lane.FreshLane.__init__

    def init(self: fresh_lane.FreshLane, *args: Any, **kwargs: Any) -> None:
        lane_init(self, *args, **kwargs)
        self.conn = TimedConnection(self.conn, "    (lane SQL)")  # type: ignore[assignment]

    fresh_lane.FreshLane.__init__ = init  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="a directory sync_bench seeded and exported")
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work / "dest", ignore_errors=True)
    instrument()
    with sync_bench.open_store(work / "dest") as store:
        store.db.conn = TimedConnection(store.db.conn, "")  # type: ignore[assignment]
        sync = GitSync(store, SyncDir(work / "repo" / ".engram"))
        for project in devnotes.PROJECTS:
            sync.bind(project)
        started = time.process_time()
        report = sync.import_chunks()
        total = time.process_time() - started
    n = report.applied.received
    print(f"{n:,} mutations: {total * 1e6 / n:.1f} µs of CPU per mutation in all")
    for label in SPENT:
        calls = f"  ({CALLS[label]:,} calls)" if CALLS.get(label) else ""
        print(f"{label:<36} {SPENT[label] * 1e6 / n:7.1f} µs{calls}")
    outside = total - SPENT["BEGIN/COMMIT"] - SPENT["judging the scope"]
    outside -= SPENT["applying (apply_mutations)"]
    print(f"{'reading the chunks, the rest':<36} {outside * 1e6 / n:7.1f} µs")


if __name__ == "__main__":
    main()
