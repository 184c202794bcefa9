"""Issue 18, the import's CPU: Python's cyclic garbage collector is paused while an import
applies its chunks (engram/collector.py) and is back on afterwards however the import ended;
what the import writes does not depend on it."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator

import pytest

from engram import collector
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync
from tests.support.sync_git import canonical, export, synthetic_records


def test_the_collector_is_off_inside_and_back_on_after_however_it_ends() -> None:
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():  # nested: the inner run does not turn it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("an import that failed half way")
    assert gc.isenabled()


def test_a_collector_someone_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_import_applies_its_chunks_with_the_collector_paused(
    make_store, sync_dir: SyncDir
) -> None:
    """Seen from inside: the import's progress is reported while each chunk is applied."""
    source = make_store("source")
    source.apply_mutations(synthetic_records(120), source="seed:test")
    export(source, sync_dir)
    seen: list[bool] = []

    @contextlib.contextmanager
    def progress(label: str, total: int) -> Iterator[Callable[[int], None]]:
        yield lambda n: seen.append(gc.isenabled())

    receiver = make_store("receiver")
    report = GitSync(receiver, sync_dir, author="tester", progress=progress).import_chunks()
    assert report.failures == []
    assert seen and not any(seen)  # off while the chunks were applied
    assert gc.isenabled()  # and on again after
    assert canonical(receiver, ["acme"]) == canonical(source, ["acme"])


def test_an_import_with_a_bad_chunk_gives_the_collector_back(store, sync_dir: SyncDir) -> None:
    """A chunk found bad at its end (the group rolled back, the chunk refused alone) leaves
    the collector running after the import."""
    from tests.support.sync_git import import_
    from tests.sync.git import hostile

    made = []
    for n in range(2):
        records = [
            hostile.observation(f"obs-gc{n}-{i:02d}", project="acme", title=f"memory {i}")
            for i in range(20)
        ]
        made.append(hostile.write_chunk(sync_dir.path, records))
    path = sync_dir.path / "log" / f"{made[1]}.jsonl.gz"
    path.write_bytes(path.read_bytes()[:-30])  # truncated: found bad only at its end
    report = import_(store, sync_dir)
    assert [f.chunk for f in report.failures] == [made[1]]
    assert report.chunks_imported == [made[0]]
    assert gc.isenabled()
