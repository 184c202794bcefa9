"""Every kind of bad input in a sync directory is reported by name, loses nothing, and never
stops the other chunks from importing."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from engram.store import Store
from engram.sync.git.chunk import encode_chunk
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.index import read_index
from engram.sync.git.manifest import read_manifest
from tests.support.sync_git import canonical, export, import_
from tests.sync.git.gofixtures import SESSIONS, write_go_chunk


@pytest.fixture
def alice(make_store) -> Store:
    store = make_store("alice")
    store.add_observation(
        title="Good memory", content="imported despite the bad chunk", project="acme"
    )
    return store


@pytest.fixture
def good(alice: Store, sync_dir: SyncDir) -> str:
    """A directory with one good chunk (returns its id)."""
    return export(alice, sync_dir, ["acme"]).chunks[0].id


def craft(sync_dir: SyncDir, lines: list[bytes]) -> str:
    """A chunk whose hash is right but whose lines are whatever the test needs."""
    chunk = encode_chunk(
        [line + b"\n" for line in lines],
        {},
        created_by="mallory",
        created_at="2030-01-01T00:00:00Z",
    )
    (sync_dir.log_dir / f"{chunk.id}.jsonl.gz").write_bytes(chunk.compressed())
    return chunk.id


def valid_line(title: str) -> bytes:
    """A real mutation from another replica, as a chunk line."""
    import tempfile

    from engram.settings import Config

    with tempfile.TemporaryDirectory() as tmp, Store.open(config=Config(data_dir=Path(tmp))) as s:
        s.add_observation(title=title, content="should not be half-applied", project="acme")
        entries = s.journal.pending("x", projects=["acme"])
    return entries[-1].record.encode()


def titles(store: Store) -> set[str]:
    return {o.title for o in store.recent_observations(limit=100)}


def import_with_bad(bob: Store, sync_dir: SyncDir, bad_id: str, good_id: str, reason: str):
    report = import_(bob, sync_dir)
    assert [f.chunk for f in report.failures] == [bad_id]
    assert reason in report.failures[0].reason
    assert good_id in report.chunks_imported
    assert titles(bob) == {"Good memory"}
    # nothing of the bad chunk was written, and the next import tries it again
    again = import_(bob, sync_dir)
    assert [f.chunk for f in again.failures] == [bad_id] and again.chunks_imported == []
    return report


def test_truncated_chunk(make_store, sync_dir: SyncDir, good: str, alice: Store) -> None:
    alice.add_observation(title="second", content="in the truncated chunk", project="acme")
    bad = export(alice, sync_dir, ["acme"]).chunks[0].id
    path = sync_dir.log_dir / f"{bad}.jsonl.gz"
    path.write_bytes(path.read_bytes()[:-30])
    bob = make_store("bob")
    import_with_bad(bob, sync_dir, bad, good, "truncated")
    assert titles(bob) == {"Good memory"}


def test_flipped_byte(make_store, sync_dir: SyncDir, good: str, alice: Store) -> None:
    alice.add_observation(title="second", content="in the damaged chunk", project="acme")
    bad = export(alice, sync_dir, ["acme"]).chunks[0].id
    path = sync_dir.log_dir / f"{bad}.jsonl.gz"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    path.write_bytes(bytes(raw))
    bob = make_store("bob")
    report = import_(bob, sync_dir)
    assert [f.chunk for f in report.failures] == [bad] and good in report.chunks_imported
    assert titles(bob) == {"Good memory"}


def test_content_not_matching_its_id(
    make_store, sync_dir: SyncDir, good: str, alice: Store
) -> None:
    alice.add_observation(title="second", content="original words", project="acme")
    bad = export(alice, sync_dir, ["acme"]).chunks[0].id
    path = sync_dir.log_dir / f"{bad}.jsonl.gz"
    edited = gzip.decompress(path.read_bytes()).replace(b"original words", b"tampered words")
    path.write_bytes(gzip.compress(edited))
    bob = make_store("bob")
    import_with_bad(bob, sync_dir, bad, good, "does not match its id")
    assert titles(bob) == {"Good memory"}
    # a good file under another chunk's name is just as wrong
    renamed = "0" * 16
    (sync_dir.log_dir / f"{good}.jsonl.gz").rename(sync_dir.log_dir / f"{renamed}.jsonl.gz")
    assert renamed in [f.chunk for f in import_(make_store("carol"), sync_dir).failures]


def quarantined_with_the_rest_applied(
    bob: Store, sync_dir: SyncDir, bad_id: str, good_id: str, reason: str
) -> None:
    """Issue 12: a bad record no longer costs its whole chunk. It waits in the quarantine with
    its reason; the chunk's other lines apply and the chunk counts as imported."""
    from engram.store import quarantine

    report = import_(bob, sync_dir)
    assert report.failures == [] and {bad_id, good_id} <= set(report.chunks_imported)
    assert report.applied.quarantined == {"invalid": 1}
    held = quarantine.listing(bob.db)
    assert [(q.reason, q.source) for q in held] == [("invalid", f"git:{sync_dir.path}")]
    assert reason in held[0].error
    assert import_(bob, sync_dir).chunks_imported == []  # nothing is retried chunk-wise


def test_invalid_json_line(make_store, sync_dir: SyncDir, good: str) -> None:
    bad = craft(sync_dir, [valid_line("applied without the broken line"), b'{"mid": "broken'])
    bob = make_store("bob")
    quarantined_with_the_rest_applied(bob, sync_dir, bad, good, "invalid JSON")
    assert titles(bob) == {"Good memory", "applied without the broken line"}


def test_unknown_entity(make_store, sync_dir: SyncDir, good: str) -> None:
    line = orjson.loads(valid_line("widget neighbour"))
    widget = orjson.dumps({**line, "mid": "f" * 32, "entity": "widget"})
    bad = craft(sync_dir, [valid_line("widget neighbour"), widget])
    bob = make_store("bob")
    quarantined_with_the_rest_applied(bob, sync_dir, bad, good, "unknown entity 'widget'")
    assert titles(bob) == {"Good memory", "widget neighbour"}


def test_a_decoded_line_that_fails_validation_is_held_as_its_exact_text(
    make_store, sync_dir: SyncDir, good: str
) -> None:
    """The reader decodes every line once and hands the store the line with its record
    (issue 18): a record that then fails validation is held as the line itself, byte for
    byte, never as something rebuilt from the decoded object."""
    line = orjson.loads(valid_line("neighbour"))
    # (not in the canonical spelling: a space after one colon)
    bad_line = orjson.dumps({**line, "mid": "e" * 32, "op": "merge"}).replace(b'"op":', b'"op": ')
    bad = craft(sync_dir, [valid_line("neighbour"), bad_line])
    bob = make_store("bob")
    quarantined_with_the_rest_applied(bob, sync_dir, bad, good, "unknown op 'merge'")
    [text] = [r[0] for r in bob.db.rows("SELECT record FROM sync_inbound_quarantine")]
    assert text == bad_line.decode()


def test_an_import_decodes_each_line_once(
    make_store, sync_dir: SyncDir, alice: Store, monkeypatch
) -> None:
    """The scope gate reads every record, so the reader decodes each line; the store takes the
    decoded record with the line instead of decoding it a second time (issue 18)."""
    for i in range(60):
        alice.add_observation(title=f"memory {i}", content="decoded once", project="acme")
    export(alice, sync_dir, ["acme"])
    lines = sum(
        gzip.decompress(p.read_bytes()).count(b"\n") - 1 for p in sync_dir.log_dir.glob("*.gz")
    )
    calls = []
    real = orjson.loads
    monkeypatch.setattr(orjson, "loads", lambda data: calls.append(1) or real(data))
    bob = make_store("bob")
    report = import_(bob, sync_dir)
    assert report.failures == [] and report.applied.applied == lines > 60
    assert len(calls) <= lines + 2 * len(report.chunks_imported), (len(calls), lines)


def go_manifest(sync_dir: SyncDir, entries: list[dict]) -> bytes:
    raw = orjson.dumps({"version": 1, "chunks": entries}, option=orjson.OPT_INDENT_2)
    sync_dir.manifest_path.write_bytes(raw)
    return raw


def go_entry(chunk_id: str, by: str = "gopher", at: str = "2026-01-02T03:04:05Z") -> dict:
    return {"id": chunk_id, "created_by": by, "created_at": at, "sessions": 1, "memories": 0,
            "prompts": 0}  # fmt: skip


def test_manifest_id_with_path_traversal(
    make_store, sync_dir: SyncDir, good: str, tmp_path: Path
) -> None:
    # A valid chunk planted outside the directory, and a Go manifest entry pointing at it.
    evil_store = make_store("mallory")
    evil_store.add_observation(title="EVIL", content="must never be imported", project="acme")
    evil_dir = SyncDir(tmp_path / "evil")
    evil_id = export(evil_store, evil_dir, ["acme"]).chunks[0].id
    planted = sync_dir.path.parent / "planted.jsonl.gz"
    planted.write_bytes((evil_dir.log_dir / f"{evil_id}.jsonl.gz").read_bytes())
    go_id = write_go_chunk(sync_dir.path, SESSIONS)
    raw = go_manifest(
        sync_dir,
        [go_entry(go_id), {"id": "../../planted", "created_by": "mallory", "created_at": "x"}],
    )
    bob = make_store("bob")
    report = import_(bob, sync_dir)
    assert report.failures == [] and sorted(report.chunks_imported) == sorted([good, go_id])
    assert any("'../../planted'" in w.reason for w in report.warnings)
    assert titles(bob) == {"Good memory"}
    # the Go manifest is the Go tool's: neither import nor export rewrites a readable one
    assert not report.manifest.written
    assert not export(bob, sync_dir, ["acme"]).manifest.written
    assert sync_dir.manifest_path.read_bytes() == raw
    assert not planted.with_suffix(".tmp").exists() and planted.exists()


def test_go_manifest_with_conflict_markers_is_repaired(
    make_store, sync_dir: SyncDir, good: str, alice: Store
) -> None:
    """Two Go users synced at once: git left conflict markers in their manifest. Import
    repairs it in the Go tool's format with every entry of both sides, as they were."""
    first = write_go_chunk(sync_dir.path, SESSIONS)
    second = write_go_chunk(sync_dir.path, [{**SESSIONS[0], "id": "go-s2"}])
    base = [go_entry("0badcafe", "carol", "2026-01-01T00:00:00Z")]
    ours = orjson.dumps(
        {"version": 1, "chunks": [*base, go_entry(first, "gina")]}, option=orjson.OPT_INDENT_2
    ).decode()
    theirs = orjson.dumps(
        {"version": 1, "chunks": [*base, go_entry(second, "gus", "2026-01-02T09:00:00Z")]},
        option=orjson.OPT_INDENT_2,
    ).decode()
    head, tail_ours = ours.split('    {\n      "id": "' + first)
    _, tail_theirs = theirs.split('    {\n      "id": "' + second)
    sync_dir.manifest_path.write_text(
        head + "<<<<<<< HEAD\n" + '    {\n      "id": "' + first + tail_ours
        + "\n=======\n" + '    {\n      "id": "' + second + tail_theirs + "\n>>>>>>> b\n"
    )  # fmt: skip
    bob = make_store("bob")
    report = import_(bob, sync_dir)
    assert sorted(report.chunks_imported) == sorted([good, first, second])
    assert report.failures == []
    assert any("conflict markers" in w.reason for w in report.warnings)
    assert report.manifest.repaired == "conflicted" and report.manifest.written
    repaired = read_manifest(sync_dir.manifest_path.read_bytes())
    assert repaired.state == "ok"
    assert [(e.id, e.created_by, e.created_at) for e in repaired.entries.values()] == [
        ("0badcafe", "carol", "2026-01-01T00:00:00Z"),
        (first, "gina", "2026-01-02T03:04:05Z"),
        (second, "gus", "2026-01-02T09:00:00Z"),
    ]
    assert not sync_dir.manifest_path.read_bytes().endswith(b"\n")  # as the Go tool writes it
    sessions = orjson.loads(canonical(bob, ["acme"]))["sessions"]
    assert {"go-s1", "go-s2"} <= {s["id"] for s in sessions}  # Go rows land in acme


def test_go_manifest_entry_whose_chunk_file_is_missing(
    make_store, sync_dir: SyncDir, good: str
) -> None:
    raw = go_manifest(sync_dir, [go_entry("0123abcd")])
    sync_dir.chunks_dir.mkdir()
    (sync_dir.chunks_dir / "notes.txt").write_text("not a chunk")
    (sync_dir.log_dir / "README").write_text("not a chunk either")
    bob = make_store("bob")
    report = import_(bob, sync_dir)
    assert report.chunks_imported == [good] and report.failures == []
    reasons = {w.chunk: w.reason for w in report.warnings}
    assert "no chunk file 0123abcd.jsonl.gz is here" in reasons["0123abcd"]
    assert "not a chunk file" in reasons["chunks/notes.txt"]
    assert "not a chunk file" in reasons["log/README"]
    # the Go tool skips a missing file itself: the entry is its business, left alone
    assert not export(bob, sync_dir, ["acme"]).manifest.written
    assert sync_dir.manifest_path.read_bytes() == raw


def test_export_goes_on_past_a_bad_pulled_chunk(
    make_store, sync_dir: SyncDir, good: str, alice: Store
) -> None:
    bad = craft(sync_dir, [b"not json at all"])
    alice.add_observation(title="after", content="exported anyway", project="acme")
    report = export(alice, sync_dir, ["acme"])
    assert [p.chunk for p in report.problems] == [bad]
    assert report.total("mutations") == 1
    index = read_index(sync_dir.index_path.read_bytes())
    assert bad in index.ids  # listed: its header is fine; import reports it by name
    assert not sync_dir.manifest_path.exists()  # nothing of ours ever goes there
