"""The cyclic garbage collector during an import (engram/sync/git/collector.py): paused while
the chunks apply (it ran over every parsed record, 3.4% of an import's CPU), the young objects
collected after each chunk instead, and its state given back however the import ends."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from engram.store import Store
from engram.sync.git.collector import ChunkCollections
from engram.sync.git.gitdir import SyncDir
from tests.support.sync_git import import_
from tests.sync.git import hostile


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection the collector starts, in order."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.enable()


def chunks(sync_dir: SyncDir, count: int) -> list[str]:
    made = []
    for n in range(count):
        records = [
            hostile.observation(f"obs-gc{n}-{i:03d}", project="acme", title=f"memory {i}")
            for i in range(60)
        ]
        made.append(hostile.write_chunk(sync_dir.path, records))
    return made


def test_an_import_runs_without_the_collector_and_collects_the_young_per_chunk(
    store: Store, sync_dir: SyncDir, collections: list[int]
) -> None:
    made = chunks(sync_dir, 3)
    enabled_at_commit: list[bool] = []
    store.db.write_listeners.append(lambda: enabled_at_commit.append(gc.isenabled()))
    report = import_(store, sync_dir)
    assert sorted(report.chunks_imported) == sorted(made)
    # the chunks' transaction committed with the collector paused; it runs again after
    assert enabled_at_commit and not any(enabled_at_commit)
    assert gc.isenabled()
    assert collections.count(1) >= 3  # one collection of the young per chunk


def test_a_paused_collector_stays_paused(
    store: Store, sync_dir: SyncDir, collections: list[int]
) -> None:
    """A caller that paused the collector itself keeps it paused (and no collection runs)."""
    chunks(sync_dir, 2)
    gc.disable()
    import_(store, sync_dir)
    assert not gc.isenabled()
    assert collections == []


def test_a_bad_chunk_gives_the_collector_back(
    store: Store, sync_dir: SyncDir, collections: list[int]
) -> None:
    good, bad = chunks(sync_dir, 2)
    path = sync_dir.path / "log" / f"{bad}.jsonl.gz"
    path.write_bytes(path.read_bytes()[:-30])  # truncated: found bad only at its end
    report = import_(store, sync_dir)
    assert [f.chunk for f in report.failures] == [bad]
    assert report.chunks_imported == [good]
    assert gc.isenabled()


def test_cycles_made_during_a_chunk_are_collected_when_it_is_done(
    collections: list[int],
) -> None:
    class Node:
        other: object = None

    with ChunkCollections() as paused:
        assert not gc.isenabled()
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: reference counting alone never frees it
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None
        paused.chunk_done()
        assert gone() is None
    assert gc.isenabled()
