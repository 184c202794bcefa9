"""The sync directory on disk: housekeeping files, listing, atomic writes, the lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.errors import ConflictError
from engram.sync.git.gitdir import (
    GITATTRIBUTES,
    OLD_GITATTRIBUTES,
    ChunkFiles,
    SyncDir,
    chunk_files,
    ensure_layout,
    locked,
    remove_stale_temp_files,
    write_atomic,
)


def test_layout_is_written_once_and_never_overwrites(tmp_path: Path) -> None:
    sync_dir = SyncDir(tmp_path / ".engram")
    assert ensure_layout(sync_dir) == [".gitignore", ".gitattributes"]
    assert sync_dir.log_dir.is_dir() and not sync_dir.chunks_dir.exists()
    ignore = (sync_dir.path / ".gitignore").read_text()
    assert all(p in ignore for p in ("*.db", "*.lock", "*.tmp"))
    (sync_dir.path / ".gitignore").write_text("# ours\n")
    assert ensure_layout(sync_dir) == []
    assert (sync_dir.path / ".gitignore").read_text() == "# ours\n"
    (tmp_path / "file").write_text("x")
    with pytest.raises(Exception, match="not a directory"):
        ensure_layout(SyncDir(tmp_path / "file"))


def test_the_union_merge_never_touches_the_go_manifest(tmp_path: Path) -> None:
    """Earlier versions set ``manifest.json merge=union``, which leaves the Go tool's manifest
    unreadable after a merge: the line goes, our index gets it, a team's own lines stay."""
    sync_dir = SyncDir(tmp_path / ".engram")
    sync_dir.path.mkdir()
    attributes = sync_dir.path / ".gitattributes"
    attributes.write_text(OLD_GITATTRIBUTES)
    (sync_dir.path / ".gitignore").write_text("*.lock\n")
    assert ensure_layout(sync_dir) == [".gitattributes"]
    assert attributes.read_text() == GITATTRIBUTES
    attributes.write_text("*.md text\nmanifest.json   merge=union # ours\n")
    assert ensure_layout(sync_dir) == [".gitattributes"]
    assert attributes.read_text() == "*.md text\nlog/index.jsonl merge=union\n"
    assert ensure_layout(sync_dir) == []


def test_listing_skips_temp_files_and_reports_strangers(tmp_path: Path) -> None:
    sync_dir = SyncDir(tmp_path / ".engram")
    ensure_layout(sync_dir)
    sync_dir.chunks_dir.mkdir()
    for name in (
        "0123456789abcdef.jsonl.gz",
        ".0123.jsonl.gz.9.tmp",
        "README.md",
        "ABCDEF0123456789.jsonl.gz",
        "0123456789abcdef.json",
    ):
        (sync_dir.log_dir / name).write_bytes(b"")
    for name in ("a3f8c1d2.jsonl.gz", "0123456789abcdef.jsonl.gz", "fedcba9876543210.jsonl.gz"):
        (sync_dir.chunks_dir / name).write_bytes(b"")  # ours of old, Go's, and a duplicate
    (sync_dir.log_dir / "index.jsonl").write_bytes(b"")  # our index is no stranger
    (sync_dir.log_dir / "1111111111111111.jsonl.gz").mkdir()  # a directory is no chunk
    found = chunk_files(sync_dir)
    assert [(f.id, f.place) for f in found.files] == [
        ("0123456789abcdef", "log"),  # log/ wins over chunks/ for the same id
        ("a3f8c1d2", "chunks"),
        ("fedcba9876543210", "chunks"),
    ]
    assert found.strangers == [
        "log/0123456789abcdef.json",
        "log/1111111111111111.jsonl.gz",
        "log/ABCDEF0123456789.jsonl.gz",
        "log/README.md",
    ]
    assert found.links == []
    assert remove_stale_temp_files(sync_dir) == 1
    assert chunk_files(SyncDir(tmp_path / "missing")) == ChunkFiles()


def test_atomic_write_replaces_whole_files_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"

    def explode() -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_atomic(target, b"three" * 100, midway=explode)
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_a_second_sync_waits_then_gives_up_clearly(tmp_path: Path) -> None:
    sync_dir = SyncDir(tmp_path / ".engram")
    busy = pytest.raises(ConflictError, match="another engram sync is running")
    with locked(sync_dir), busy, locked(sync_dir, timeout=0.3):
        pass
    with locked(sync_dir, timeout=0.3):  # released
        pass


def test_display_is_what_a_human_types(tmp_path: Path, monkeypatch) -> None:
    sync_dir = SyncDir(tmp_path / "repo" / ".engram")
    (tmp_path / "repo" / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo")
    assert sync_dir.display() == ".engram/"
    monkeypatch.chdir(tmp_path / "repo" / "src" / "deep")
    assert sync_dir.display() == "../../.engram/"
    monkeypatch.chdir(tmp_path)
    assert sync_dir.display() == str((tmp_path / "repo" / ".engram").resolve())
