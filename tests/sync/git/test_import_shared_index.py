"""An import applies a group of chunks in one transaction (issue 18), each chunk's records a
batch of their own; the batches share one deferred full-text index, settled once before the
group commits (engram/store/db.py ``shared_in_bulk``, engram/store/fts.py ``DeferredIndex``).
A memory one chunk brings and a later chunk of the group edits, deletes or re-contexts is
indexed once, with what it says at the end, instead of indexed, dropped and indexed again.
What the index finds must be exactly what an import of one chunk per transaction finds; a
group rolled back (a bad chunk) leaves nothing of its index behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engram.store import Store
from engram.store.replication import BULK_RECORDS
from engram.sync.git import importer, sync
from engram.sync.git.gitdir import SyncDir
from tests.support.sync_git import canonical, export, import_

from .test_import_groups import chunk_path, commits_between_chunks, statements

WORDS = ["walrus", "narwhal", "pelican", "heron", "otter"]


def three_chunks(alice: Store, sync_dir: SyncDir, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Chunk ids, in the order an import applies them: memories of one agent session; edits,
    soft and hard deletes of them (their neighbours' contexts change too); then more memories
    after them. (Each chunk's header a second later than the one before: an import orders
    chunks by their headers' times, to the second, then by id.)"""
    seconds = iter(range(10, 60))
    monkeypatch.setattr(sync, "rfc3339", lambda: f"2026-11-01T10:00:{next(seconds)}Z")
    ids = [alice.add_observation(title=f"Memory {i}", content=f"walrus fact {i}", project="acme",
                                 session_id="s1").observation.id for i in range(BULK_RECORDS)]  # fmt: skip
    chunks = [export(alice, sync_dir, ["acme"]).chunks[0].id]
    for i, memory in enumerate(ids):
        if i % 10 == 3:
            alice.delete_observation(memory)
        elif i % 10 == 7:
            alice.delete_observation(memory, hard=True)
        else:
            alice.update_observation(memory, content=f"narwhal fact {i}")
    chunks.append(export(alice, sync_dir, ["acme"]).chunks[0].id)
    for i in range(BULK_RECORDS):
        alice.add_observation(title=f"Later {i}", content=f"pelican note {i}", project="acme",
                              session_id="s1" if i % 2 else "s2")  # fmt: skip
    chunks.append(export(alice, sync_dir, ["acme"]).chunks[0].id)
    return chunks


def found(store: Store) -> dict[str, list[tuple]]:
    """What the full-text indexes find (each word in every column, and in the contexts),
    the contexts and vector queue, after both indexes pass their integrity check."""
    conn = store.db.conn
    for fts in ("observations_fts", "prompts_fts"):
        conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
    out: dict[str, list[tuple]] = {}
    for word in WORDS:
        for query in (word, f'search_context : "{word}"'):
            rows = conn.execute(
                "SELECT o.sync_id FROM observations_fts f JOIN observations o ON o.id = f.rowid"
                " WHERE observations_fts MATCH ? ORDER BY o.sync_id",
                (query,),
            )
            out[query] = [tuple(r) for r in rows]
    out["contexts"] = [tuple(r) for r in conn.execute(
        "SELECT sync_id, search_context FROM observations ORDER BY sync_id")]  # fmt: skip
    out["queued"] = [tuple(r) for r in conn.execute(
        "SELECT o.sync_id FROM vector_pending v JOIN observations o ON o.id = v.obs_id"
        " ORDER BY o.sync_id")]  # fmt: skip
    return out


def one_chunk_a_transaction(make_store, sync_dir: SyncDir, name: str) -> Store:
    store = make_store(name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importer, "GROUP_MUTATIONS", 0)
        import_(store, sync_dir)
    return store


def test_what_a_group_brings_and_changes_is_indexed_once(
    make_store, sync_dir: SyncDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = make_store("alice")
    ids = three_chunks(alice, sync_dir, monkeypatch)
    bob = make_store("bob")
    seen = statements(bob)
    report = import_(bob, sync_dir)
    bob.db.conn.set_trace_callback(None)
    assert report.failures == [] and report.chunks_imported == ids
    assert commits_between_chunks(seen) == [0, 0]  # one group
    # No entry the group wrote was dropped again: each row was indexed once, at the end
    # (one entry dropped per memory the second chunk changed, before).
    dropped = [s for s in seen if "observations_fts(observations_fts" in s and "'delete'" in s]
    assert dropped == []
    assert canonical(bob, ["acme"]) == canonical(alice, ["acme"])
    carol = one_chunk_a_transaction(make_store, sync_dir, "carol")
    assert canonical(carol, ["acme"]) == canonical(alice, ["acme"])
    assert found(bob) == found(carol)
    assert len(found(bob)["narwhal"]) >= 40  # the edited ones (and memories quoting them)
    assert found(bob)['search_context : "narwhal"']  # the neighbours quote the edits
    assert bob.search("narwhal", project="acme") and not bob.search("walrus", project="acme")


@pytest.mark.parametrize("position", [1, 2])
def test_a_group_rolled_back_leaves_no_index_behind(
    position: int, make_store, sync_dir: SyncDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad chunk rolls its group back after the chunks before it were applied (their index
    entries not written yet): they are applied again, and the index finds what an import of
    the directory without the bad chunk finds."""
    alice = make_store("alice")
    ids = three_chunks(alice, sync_dir, monkeypatch)
    bad = ids[position]
    path = chunk_path(sync_dir, bad)
    path.write_bytes(path.read_bytes()[:-30])  # truncated: found bad only at its end
    bob = make_store("bob")
    report = import_(bob, sync_dir)
    assert [f.chunk for f in report.failures] == [bad]
    clean = SyncDir(tmp_path / "clean" / "acme" / ".engram")
    shutil.copytree(sync_dir.path, clean.path)
    chunk_path(clean, bad).unlink()
    carol = one_chunk_a_transaction(make_store, clean, "carol")
    assert canonical(bob, ["acme"]) == canonical(carol, ["acme"])
    assert found(bob) == found(carol)
