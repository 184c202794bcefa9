"""An import commits a group of consecutive chunks at once (issue 18: fewer, larger
transactions), within a bound; a bad chunk in a group is still refused alone with every other
chunk applied, and an import killed inside a group loses nothing: the ledger of applied chunks
commits with their rows, so the next import applies the whole group again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engram.settings import Config
from engram.store import Store
from engram.sync.git import importer
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.reader import read_header
from tests.support.paused_engram import kill_at
from tests.support.sync_git import canonical, export, import_


def chunk_path(sync_dir: SyncDir, chunk_id: str) -> Path:
    return sync_dir.log_dir / f"{chunk_id}.jsonl.gz"


def three_chunks(alice: Store, sync_dir: SyncDir) -> list[str]:
    """Three chunks of one memory each (the first also holds the session), in the order an
    import lists them."""
    ids = []
    for i in range(3):
        alice.add_observation(title=f"memory {i}", content=f"in chunk {i}", project="acme")
        ids.append(export(alice, sync_dir, ["acme"]).chunks[0].id)
    header = {cid: read_header(cid, chunk_path(sync_dir, cid)) for cid in ids}
    return sorted(ids, key=lambda cid: (header[cid].created_at if header[cid] else "", cid))


def titles(store: Store) -> set[str]:
    return {o.title for o in store.recent_observations(limit=100)}


def statements(store: Store) -> list[str]:
    """Start recording the statements ``store`` runs (its connection's trace callback)."""
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    return seen


def commits_between_chunks(seen: list[str]) -> list[int]:
    """For each chunk after the first: how many commits came since the chunk before it was
    noted as applied (its ``sync_chunks`` row)."""
    counts, current, started = [], 0, False
    for sql in seen:
        if "INTO sync_chunks" in sql:
            if started:
                counts.append(current)
            started, current = True, 0
        elif sql.strip().upper() == "COMMIT":
            current += 1
    return counts


def test_consecutive_chunks_commit_together(make_store, sync_dir: SyncDir) -> None:
    alice = make_store("alice")
    ids = three_chunks(alice, sync_dir)
    bob = make_store("bob")
    seen = statements(bob)
    report = import_(bob, sync_dir)
    assert report.failures == [] and report.chunks_imported == ids
    assert commits_between_chunks(seen) == [0, 0]  # one transaction for the three
    assert canonical(bob, ["acme"]) == canonical(alice, ["acme"])


@pytest.mark.parametrize("bound", ["mutations", "seconds"])
def test_a_group_ends_at_its_bound(
    bound: str, make_store, sync_dir: SyncDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = make_store("alice")
    ids = three_chunks(alice, sync_dir)
    monkeypatch.setattr(importer, "GROUP_MUTATIONS" if bound == "mutations" else "GROUP_SECONDS", 0)
    bob = make_store("bob")
    seen = statements(bob)
    report = import_(bob, sync_dir)
    assert report.failures == [] and report.chunks_imported == ids
    assert commits_between_chunks(seen) == [1, 1]  # each chunk its own transaction
    assert canonical(bob, ["acme"]) == canonical(alice, ["acme"])


@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_bad_chunk_in_a_group_is_refused_alone(
    position: int, make_store, sync_dir: SyncDir, tmp_path: Path
) -> None:
    alice = make_store("alice")
    ids = three_chunks(alice, sync_dir)
    bad = ids[position]
    path = chunk_path(sync_dir, bad)
    path.write_bytes(path.read_bytes()[:-30])  # truncated: found bad only at its end
    bob = make_store("bob")
    report = import_(bob, sync_dir)
    good = [cid for cid in ids if cid != bad]
    assert [f.chunk for f in report.failures] == [bad] and "truncated" in report.failures[0].reason
    assert report.chunks_imported == good
    assert bob.journal.chunk_ids(report.target) == set(good)
    # the same store as an import of the directory without the bad chunk
    clean = SyncDir(tmp_path / "clean" / "acme" / ".engram")
    shutil.copytree(sync_dir.path, clean.path)
    chunk_path(clean, bad).unlink()
    carol = make_store("carol")
    assert import_(carol, clean).chunks_imported == good
    assert canonical(bob, ["acme"]) == canonical(carol, ["acme"])
    assert bob.stats() == carol.stats()
    again = import_(bob, sync_dir)
    assert [f.chunk for f in again.failures] == [bad] and again.chunks_imported == []


def test_an_import_killed_inside_a_group_loses_nothing_and_resumes(
    make_store, sync_dir: SyncDir, tmp_path: Path
) -> None:
    alice = make_store("alice")
    ids = three_chunks(alice, sync_dir)
    data_dir = tmp_path / "bob"
    with Store.open(config=Config(data_dir=data_dir)):
        pass
    # the first chunk is applied inside the group's open transaction: killed there
    kill_at("mid-group", data_dir, "sync", "--import", "--dir", str(sync_dir.path))
    with Store.open(config=Config(data_dir=data_dir)) as bob:
        # nothing of the group was committed: neither its rows nor the note that it is applied
        assert bob.db.scalar("SELECT COUNT(*) FROM sync_chunks") == 0
        assert bob.db.scalar("SELECT COUNT(*) FROM sync_journal") == 0
        assert titles(bob) == set()
        report = import_(bob, sync_dir)
        assert report.failures == [] and report.chunks_imported == ids
        assert canonical(bob, ["acme"]) == canonical(alice, ["acme"])
