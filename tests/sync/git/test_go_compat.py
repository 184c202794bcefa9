"""Sharing a sync directory with the Go tool (issue 16, DESIGN §4): our chunks and index stay
in ``log/``, the Go manifest is written only in the Go tool's format — to append Go-format
chunks (``--go-compat``), to take out entries an earlier Engram put there, and to repair what
git left unreadable — and ``--go-compat`` writes each creation for Go teammates exactly once.
The real Go tool reads what these tests write in ``tests/interop``."""

from __future__ import annotations

import gzip
import shutil
from datetime import UTC, datetime
from pathlib import Path

import orjson

from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.go_compat import entry_time
from engram.sync.git.manifest import ManifestEntry, read_manifest, render_manifest
from engram.sync.git.sync import GitSync
from tests.support.sync_git import canonical, export, import_
from tests.sync.git.gofixtures import write_go_chunk

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def go_document(sync_dir: SyncDir, chunk_id: str) -> dict:
    raw = gzip.decompress((sync_dir.chunks_dir / f"{chunk_id}.jsonl.gz").read_bytes())
    return orjson.loads(raw)


def manifest(sync_dir: SyncDir) -> list[ManifestEntry]:
    reading = read_manifest(sync_dir.manifest_path.read_bytes())
    assert reading.state == "ok"
    return list(reading.entries.values())


def go_session(session_id: str, project: str, started_at: str) -> dict:
    return {"id": session_id, "project": project, "directory": "", "started_at": started_at}


def go_row(title: str, session_id: str, project: str, created_at: str) -> dict:
    return {
        "id": 1, "session_id": session_id, "type": "manual", "title": title,
        "content": f"{title} text", "project": project, "scope": "project",
        "revision_count": 1, "duplicate_count": 1,
        "created_at": created_at, "updated_at": created_at,
    }  # fmt: skip


def test_go_compat_writes_each_creation_once_in_the_go_tools_format(
    store: Store, sync_dir: SyncDir
) -> None:
    store.create_session("s-1", "acme", "/src/acme")
    store.add_observation(
        title="Auth <JWT>", content="tokens & refresh", project="acme", session_id="s-1",
        type="decision", topic_key="auth/jwt",
    )  # fmt: skip
    gone = store.add_observation(title="Gone", content="deleted", project="acme").observation
    store.delete_observation(gone.id)
    store.add_observation(title="Mine", content="personal", project="acme", scope="personal")
    store.add_observation(title="Elsewhere", content="another project", project="other")
    store.add_prompt("why JWT?", session_id="s-1", project="acme")
    newest = max(o.created_at for o in store.recent_observations(project="acme", limit=10))

    report = export(store, sync_dir, ["acme"], go_compat=True)
    assert len(report.chunks) == 1 and len(report.go_chunks) == 1  # ours in log/, and Go's
    assert report.go_project == "acme"
    [written] = report.go_chunks
    document = go_document(sync_dir, written.id)
    assert list(document) == ["sessions", "observations", "prompts"]  # no header line
    assert [o["title"] for o in document["observations"]] == ["Auth <JWT>"]
    memory = document["observations"][0]
    assert (memory["type"], memory["topic_key"], memory["project"]) == (
        "decision",
        "auth/jwt",
        "acme",
    )
    assert "id" not in memory  # local ids never travel
    assert {s["id"] for s in document["sessions"]} == {"s-1", "manual-save-acme"}
    assert [p["content"] for p in document["prompts"]] == ["why JWT?"]
    raw = gzip.decompress((sync_dir.chunks_dir / f"{written.id}.jsonl.gz").read_bytes())
    assert b"\\u003cJWT\\u003e" in raw and b"\\u0026" in raw  # the Go tool's HTML escaping
    # listed in the Go manifest in its format, dated by its newest row (not "now")
    [entry] = manifest(sync_dir)
    assert entry == ManifestEntry(
        written.id, "tester", entry_time(newest), sessions=2, memories=1, prompts=1
    )
    assert not list(sync_dir.log_dir.glob("*.json"))  # the index lists only our chunks
    index = [orjson.loads(line) for line in sync_dir.index_path.read_bytes().splitlines()]
    assert [line["id"] for line in index] == [report.chunks[0].id]

    # nothing twice: the next export has nothing new for Go teammates, an edit is not sent
    store.update_observation(store.get_observation_by_sync_id(memory["sync_id"]).id, title="v2")
    again = export(store, sync_dir, ["acme"], go_compat=True)
    assert again.go_chunks == [] and len(again.chunks) == 1  # the edit travels in log/ only
    assert [e.id for e in manifest(sync_dir)] == [written.id]


def test_what_came_from_go_chunks_is_never_written_back_for_go(
    store: Store, sync_dir: SyncDir
) -> None:
    """A Go teammate's memories (under their clone's name) are applied to the repository's
    project and count as held by the Go side, so --go-compat never sends them back (the Go
    tool would import a second copy)."""
    rows = [go_row("From Go", "go-s", "work-copy", "2026-01-02 03:00:00")]
    write_go_chunk(sync_dir.path, [go_session("go-s", "work-copy", "2026-01-02 03:00:00")], rows)
    assert import_(store, sync_dir).failures == []
    assert store.recent_observations(project="acme", limit=5)[0].title == "From Go"
    report = export(store, sync_dir, ["acme"], go_compat=True)
    assert report.go_chunks == []
    store.add_observation(title="Ours", content="new", project="acme")
    [written] = export(store, sync_dir, ["acme"], go_compat=True).go_chunks
    assert [o["title"] for o in go_document(sync_dir, written.id)["observations"]] == ["Ours"]


def test_another_machine_applies_the_go_chunk_to_the_same_memory(
    make_store, sync_dir: SyncDir
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    alice.add_observation(title="Shared", content="once", project="acme")
    export(alice, sync_dir, ["acme"], go_compat=True)
    assert import_(bob, sync_dir).failures == []
    assert canonical(alice) == canonical(bob)
    assert bob.stats().total_observations == 1


def test_the_setting_is_remembered_per_directory_on_this_machine(
    store: Store, sync_dir: SyncDir
) -> None:
    sync = GitSync(store, sync_dir, author="tester")
    assert not sync.go_compat_enabled()
    assert sync.set_go_compat(True) and not sync.set_go_compat(True)
    store.add_observation(title="By default now", content="x", project="acme")
    assert len(GitSync(store, sync_dir, author="tester").export().go_chunks) == 1
    assert GitSync(store, sync_dir).status().go_compat
    assert sync.set_go_compat(False) and not GitSync(store, sync_dir).go_compat_enabled()


def test_the_manifest_entry_is_dated_by_its_newest_row_not_now(
    store: Store, sync_dir: SyncDir
) -> None:
    """The Go tool exports only rows newer than its manifest's newest created_at: an entry
    dated now would hide every memory a Go teammate saved before it and has not synced."""
    store.import_data(
        {
            "version": "0.1.0",
            "sessions": [go_session("s-old", "acme", "2026-01-02 03:00:00")],
            "observations": [go_row("Old memory", "s-old", "acme", "2026-01-02 03:04:05")],
            "prompts": None,
        }
    )
    assert len(export(store, sync_dir, ["acme"], go_compat=True).go_chunks) == 1
    assert manifest(sync_dir)[0].created_at == "2026-01-02T03:04:05Z"


def test_entry_time_is_the_newest_row_never_the_future() -> None:
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    assert entry_time("2026-04-30 08:00:01", now) == "2026-04-30T08:00:01Z"
    assert entry_time("2099-01-01 00:00:00", now) == "2026-05-01T12:00:00Z"
    assert entry_time("garbage", now) == "2026-05-01T12:00:00Z"


def test_a_go_chunk_a_merge_dropped_from_the_manifest_is_listed_again_in_time_order(
    store: Store, sync_dir: SyncDir
) -> None:
    """A Go user resolved a manifest conflict by keeping one side: the other side's chunk is
    still in chunks/ but the Go tool no longer imports it. --go-compat lists it again where
    its time puts it (before the chunks written after it, which may name its sessions)."""
    older = write_go_chunk(
        sync_dir.path,
        [go_session("s-old", "acme", "2026-01-01 00:00:00")],
        [go_row("Oldest", "s-old", "acme", "2026-01-01 00:00:00")],
    )
    early = write_go_chunk(
        sync_dir.path,
        [go_session("s-early", "acme", "2026-01-02 03:00:00")],
        [go_row("Early", "s-early", "acme", "2026-01-02 03:00:00")],
    )
    late = write_go_chunk(
        sync_dir.path, None, [go_row("Late", "s-early", "acme", "2026-01-03 09:00:00")]
    )
    first = ManifestEntry(older, "gina", "2026-01-01T00:00:00Z", 1, 1, 0)
    kept = ManifestEntry(late, "gus", "2026-01-03T09:00:05Z", 0, 1, 0)
    sync_dir.manifest_path.write_bytes(render_manifest([first, kept]))
    report = export(store, sync_dir, ["acme"], go_compat=True)
    assert report.manifest.relisted == [early]
    entries = manifest(sync_dir)
    assert [e.id for e in entries] == [older, early, late]
    assert entries[1] == ManifestEntry(early, "unknown", "2026-01-02T03:00:00Z", 1, 1, 0)
    assert entries[0] == first and entries[2] == kept  # the others exactly as they were
    # without --go-compat the manifest is the Go tool's business: left alone
    sync_dir.manifest_path.write_bytes(render_manifest([first, kept]))
    assert export(store, sync_dir, ["acme"]).manifest.relisted == []
    assert [e.id for e in manifest(sync_dir)] == [older, late]


def test_the_old_layout_is_moved_and_its_entries_taken_out_of_the_go_manifest(
    store: Store, tmp_path: Path
) -> None:
    """An earlier Engram wrote its chunks into chunks/ and listed them in manifest.json (with a
    union merge on it), which stops the Go tool: the next export moves them to log/ and takes
    exactly those entries out, keeping the Go tool's."""
    sync_dir = SyncDir(tmp_path / "acme" / ".engram")
    shutil.copytree(FIXTURES / "old-layout", sync_dir.path)
    go = write_go_chunk(sync_dir.path, None, None, [])
    listed = orjson.loads(sync_dir.manifest_path.read_bytes())
    go_entry = {
        "id": go, "created_by": "gus", "created_at": "2026-11-22T00:00:00Z",
        "sessions": 0, "memories": 0, "prompts": 0,
    }  # fmt: skip
    listed["chunks"].append(go_entry)
    sync_dir.manifest_path.write_bytes(orjson.dumps(listed))
    assert GitSync(store, sync_dir).status().old_layout == 1

    report = export(store, sync_dir, None)
    assert report.moved == ["92a8b2337df61451"]
    assert report.manifest.removed == ["92a8b2337df61451"]
    assert (sync_dir.log_dir / "92a8b2337df61451.jsonl.gz").is_file()
    assert not (sync_dir.chunks_dir / "92a8b2337df61451.jsonl.gz").exists()
    assert orjson.loads(sync_dir.manifest_path.read_bytes())["chunks"] == [go_entry]
    index = orjson.loads(sync_dir.index_path.read_bytes().splitlines()[0])
    assert index["id"] == "92a8b2337df61451" and index["created_by"] == "example"
    # the moved chunk still imports (bound: the example's project is "acme")
    assert import_(store, sync_dir).failures == []
    assert store.stats().total_observations >= 3
    assert GitSync(store, sync_dir).status().old_layout == 0


def test_export_repairs_a_manifest_git_left_unreadable_keeping_every_entry(
    store: Store, sync_dir: SyncDir
) -> None:
    one = ManifestEntry("aaaaaaaa", "gina", "2026-01-02T00:00:00Z", 1, 2, 0)
    two = ManifestEntry("bbbbbbbb", "gus", "2026-01-02T00:00:05Z", 1, 1, 1)
    ours, theirs = render_manifest([one]), render_manifest([two])
    sync_dir.path.mkdir(parents=True)
    sync_dir.manifest_path.write_bytes(
        b"<<<<<<< HEAD\n" + ours + b"\n=======\n" + theirs + b"\n>>>>>>> 1234abc\n"
    )
    store.add_observation(title="x", content="y", project="acme")
    report = export(store, sync_dir, ["acme"])
    assert report.manifest.repaired == "conflicted"
    assert sync_dir.manifest_path.read_bytes() == render_manifest([one, two])
    # invalid JSON (what a union merge leaves) is repaired the same way
    sync_dir.manifest_path.write_bytes(ours[:-10] + b",\n" + theirs[20:])
    assert export(store, sync_dir, ["acme"]).manifest.repaired == "invalid"
    assert read_manifest(sync_dir.manifest_path.read_bytes()).state == "ok"
    # a readable manifest is never rewritten without --go-compat
    before = sync_dir.manifest_path.read_bytes()
    store.add_observation(title="z", content="w", project="acme")
    assert not export(store, sync_dir, ["acme"]).manifest.written
    assert sync_dir.manifest_path.read_bytes() == before
