"""Helpers for replication tests: move journal rows between stores like a transport would."""

from __future__ import annotations

import random

from engram.store import Store


def exchange(
    src: Store,
    dst: Store,
    *,
    rng: random.Random | None = None,
    duplicate: bool = False,
    include_personal: bool = True,
    projects: list[str] | None = None,
    limit: int | None = None,
) -> int:
    """Send what ``dst`` lacks from ``src`` (optionally shuffled, duplicated, partial).

    Targets are named after the peer, as git and cloud targets are named after the place.
    """
    entries = src.journal.pending(
        f"peer:{id(dst)}", projects=projects, include_personal=include_personal
    )
    if limit is not None:
        entries = entries[:limit]
    if not entries:
        return 0
    records = [e.record for e in entries]
    if duplicate:
        records += records[: max(1, len(records) // 2)]
    if rng is not None:
        rng.shuffle(records)
    dst.apply_mutations(records, source=f"peer:{id(src)}")
    src.journal.mark_delivered(f"peer:{id(dst)}", [e.seq for e in entries])
    return len(entries)


def converge(stores: list[Store], rng: random.Random | None = None) -> None:
    """Exchange in every direction until nothing is pending anywhere."""
    for _ in range(len(stores) + 2):
        moved = 0
        for src in stores:
            for dst in stores:
                if src is not dst:
                    moved += exchange(src, dst, rng=rng)
        if not moved:
            return
    raise AssertionError("replicas did not stop exchanging")
