"""Fixtures of the git-sync tests: a sync directory and small helpers over the services."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.store import Store
from engram.sync.git_sync import ExportReport, GitSync, ImportReport
from engram.sync.gitdir import SyncDir


@pytest.fixture
def sync_dir(tmp_path: Path) -> SyncDir:
    return SyncDir(tmp_path / "repo" / ".engram")


def export(
    store: Store, sync_dir: SyncDir, projects: list[str] | None = None, **kw: object
) -> ExportReport:
    return GitSync(store, sync_dir, author="tester").export(projects=projects, **kw)


def import_(store: Store, sync_dir: SyncDir) -> ImportReport:
    return GitSync(store, sync_dir, author="tester").import_chunks()


def canonical(store: Store, projects: list[str] | None = None) -> bytes:
    return store.canonical_export(projects=projects, include_personal=False)


def pull(source: SyncDir, destination: SyncDir) -> list[str]:
    """What ``git pull`` does to a sync directory: the other side's chunk files appear."""
    destination.chunks_dir.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in sorted(source.chunks_dir.glob("*.jsonl.gz")):
        target = destination.chunks_dir / path.name
        if not target.exists():
            target.write_bytes(path.read_bytes())
            copied.append(path.name)
    return copied
