"""Consolidation benchmark (issue 21): how long `engram consolidate` takes over a store of
10,000 memories, and how well it finds the planted duplicates.

    .venv/bin/python bench/consolidation_bench.py                 # 10,000 memories
    .venv/bin/python bench/consolidation_bench.py --memories 2000 --json

The store is ``bench/planted.py``'s synthetic one — the labelled memories of the retrieval data
set with reworded copies planted, trivia, stale facts and a pinned memory — filled up with
generated developer notes to ``--memories``, imported through the real store. The script times
a dry run (plan only), the run itself (re-score, merge, archive, all journaled), and a second
run (nothing left to do), and prints precision and recall of the merged pairs against the
planted ones (pairs of two generated notes are left out: the generator writes near-twins from
one template, and merging those is right, but nobody labelled them).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import planted  # noqa: E402

from engram.settings import Config  # noqa: E402
from engram.store import Store  # noqa: E402


def run(memories: int, seed: int, quiet: bool) -> dict:
    base = planted.build(seed=seed)
    extra = max(0, memories - len(base.document["observations"]))
    plan = planted.build(seed=seed, distractors=extra)
    total = len(plan.document["observations"])
    with (
        tempfile.TemporaryDirectory(prefix="engram-consolidate-") as tmp,
        Store.open(config=Config(data_dir=Path(tmp))) as store,
    ):
        started = time.perf_counter()
        store.import_data(plan.document)
        imported = time.perf_counter() - started
        if not quiet:
            print(f"imported {total} memories in {imported:.1f} s", file=sys.stderr)
        dry = store.consolidate(dry_run=True)
        real = store.consolidate()
        again = store.consolidate()
        groups = [[s.sync_id for s in m.sources] for m in real.merges if m.status == "merged"]
        figures = planted.score(plan, groups)
        archived = {a.memory.sync_id for a in real.archives if a.status == "archived"}
        live = store.count_observations()
    return {
        "memories": total,
        "import_seconds": round(imported, 2),
        "dry_run_seconds": round(dry.elapsed_ms / 1000, 2),
        "run_seconds": round(real.elapsed_ms / 1000, 2),
        "second_run_seconds": round(again.elapsed_ms / 1000, 2),
        "merged_away": real.merged,
        "merged_into": real.merged_into,
        "archived": real.archived,
        "rescored": real.rescored,
        "second_run_changes": again.merged + again.archived,
        "precision": round(figures["precision"], 4),
        "recall": round(figures["recall"], 4),
        "planted_pairs": figures["pairs_planted"],
        "planted_trivia_archived": len(archived & set(plan.trivia)),
        "planted_trivia": len(plan.trivia),
        "pinned_kept": plan.pinned not in archived,
        "live_after": live,
    }


def render(report: dict) -> str:
    r = report
    return "\n".join(
        [
            f"Consolidation of {r['memories']:,} memories (imported in {r['import_seconds']:.1f} s)",
            f"  dry run (plan only)        {r['dry_run_seconds']:>7.2f} s",
            f"  run (score, merge, archive){r['run_seconds']:>7.2f} s",
            f"  second run (nothing to do) {r['second_run_seconds']:>7.2f} s",
            f"  merged {r['merged_away']} memories into {r['merged_into']}; archived "
            f"{r['archived']}; re-scored {r['rescored']}; {r['live_after']:,} live after",
            f"  planted duplicates: precision {r['precision']:.3f}, recall {r['recall']:.3f} "
            f"({r['planted_pairs']} pairs)",
            f"  planted trivia archived: {r['planted_trivia_archived']}/{r['planted_trivia']}; "
            f"pinned memory kept: {r['pinned_kept']}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000, help="store size (default 10000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.memories < 1:
        parser.error("--memories must be at least 1")
    report = run(args.memories, args.seed, quiet=args.json)
    print(
        orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() if args.json else render(report)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
