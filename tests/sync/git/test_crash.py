"""An export killed with SIGKILL half way: the next run finds no partial chunk listed and still
exports everything. Real processes, a real kill; the process pauses at the crash point through
:mod:`tests.support.paused_engram` (the product carries no test hook)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engram.settings import Config
from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.index import read_index
from tests.support import run_engram
from tests.support.paused_engram import kill_at
from tests.support.sync_git import canonical, import_, synthetic_records


def seeded(data_dir: Path, count: int) -> None:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.apply_mutations(synthetic_records(count), source="seed:test")
        store.add_observation(title="local memory", content="written here", project="acme")


def chunk_lines(sync_dir: SyncDir) -> int:
    import gzip

    return sum(
        gzip.decompress(p.read_bytes()).count(b"\n") - 1
        for p in sync_dir.log_dir.glob("*.jsonl.gz")
    )


@pytest.mark.parametrize("point", ["mid-chunk", "after-chunk"])
def test_export_killed_half_way(point: str, tmp_path: Path, make_store) -> None:
    data_dir = tmp_path / "data"
    sync_dir = SyncDir(tmp_path / "acme" / ".engram")  # the directory's own project: acme
    # ~6 MiB of mutations: two chunks, so "after-chunk" is killed between them
    seeded(data_dir, 6000)
    kill_at(point, data_dir, "sync", "--project", "acme", "--dir", str(sync_dir.path))

    listed = list(sync_dir.log_dir.glob("*.jsonl.gz"))
    temps = list(sync_dir.log_dir.glob(".*.tmp"))
    if point == "mid-chunk":
        assert listed == [] and len(temps) == 1  # only a hidden temp file, never a chunk
    else:
        assert len(listed) == 1 and temps == []  # one complete chunk, not yet recorded
    index = read_index(sync_dir.index_path.read_bytes()) if sync_dir.index_path.exists() else None
    assert index is None or index.ids == []

    done = run_engram(
        "sync", "--project", "acme", "--dir", str(sync_dir.path), "--json", data_dir=data_dir
    )
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert list(sync_dir.log_dir.glob(".*.tmp")) == []
    with Store.open(config=Config(data_dir=data_dir)) as store:
        total = store.journal.count_pending("nowhere", projects=["acme"])
        everything = canonical(store, ["acme"])
    # every mutation is in the directory exactly once
    assert chunk_lines(sync_dir) == total == 6000 + 2  # + the local session and memory
    if point == "after-chunk":
        assert report["already_held"] > 0
        assert report["mutations"] == total - report["already_held"]
    index = read_index(sync_dir.index_path.read_bytes())
    assert set(index.ids) == {p.name[:16] for p in sync_dir.log_dir.glob("*.jsonl.gz")}
    receiver = make_store("receiver")
    assert import_(receiver, sync_dir).failures == []
    assert canonical(receiver, ["acme"]) == everything
