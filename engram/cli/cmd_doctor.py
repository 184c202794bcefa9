"""``engram doctor``: check the local store and repair what it can without losing a memory.

Today it checks the clock (docs/architecture.md, "Trust boundaries"): records or rows stamped beyond now + the
allowed drift are repaired by :meth:`engram.store.Store.repair_clock` (the store also does this
by itself on open when its persisted clock is poisoned), and it reports what waits in the
quarantines.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from engram.cli.common import add_json_flag, emit, open_store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the store (clock, quarantine) and repair what it can",
        description="Find records and rows stamped with a clock beyond now plus the allowed "
        "drift (ENGRAM_MAX_CLOCK_DRIFT, 10 minutes by default): received ones wait in the "
        "quarantine until real time catches up, this machine's own writes are journaled "
        "again under fresh clocks, and every memory they touched is re-derived. Nothing is "
        "lost. Also counts what waits in the quarantine (engram sync --quarantine).",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_doctor)


def _when(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms (beyond the year 9999)"


def cmd_doctor(args: argparse.Namespace) -> int:
    with open_store() as store:
        repair = store.repair_clock()
        held = store.quarantine_counts()
    lines = []
    if repair.repaired:
        lines.append(
            f"Clock: repaired (was {_when(repair.clock_was_ms)}, now {_when(repair.clock_now_ms)})"
        )
        lines += [
            f"  {repair.quarantined} received record(s) beyond the clock bound moved to the "
            "quarantine (clock_skew: applied by themselves once real time catches up)",
            f"  {repair.rejournaled} memory/session/prompt(s) of this machine journaled again "
            "under fresh clocks",
            f"  {repair.rederived} re-derived from their best sane mutation, "
            f"{repair.emptied} held only by a quarantined record",
        ]
    else:
        lines.append("Clock: ok (nothing stamped beyond now + the allowed drift)")
    inbound, outbound = held["inbound"], held["outbound"]
    if inbound or outbound:
        parts = [f"{n} {reason}" for reason, n in inbound.items()]
        parts += [f"{n} rejected by a server ({code})" for code, n in outbound.items()]
        lines.append("Quarantine: " + ", ".join(parts) + " — engram sync --quarantine lists them")
    else:
        lines.append("Quarantine: empty")
    emit(args, "\n".join(lines), {"clock": repair.to_dict(), "quarantine": held})
    return 0
