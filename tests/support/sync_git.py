"""Fixtures of the git-sync tests: a sync directory and small helpers over the services."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import ExportReport, GitSync, ImportReport
from tests.sync.git.clones import world  # noqa: F401 - a fixture for every git test


@pytest.fixture
def sync_dir(tmp_path: Path) -> SyncDir:
    """A sync directory outside git whose own project is "acme" (the directory's name): the
    project the tests write, so imports apply it without a binding."""
    return SyncDir(tmp_path / "acme" / ".engram")


def export(
    store: Store, sync_dir: SyncDir, projects: list[str] | None = None, **kw: object
) -> ExportReport:
    return GitSync(store, sync_dir, author="tester").export(projects=projects, **kw)


def import_(store: Store, sync_dir: SyncDir) -> ImportReport:
    return GitSync(store, sync_dir, author="tester").import_chunks()


def canonical(store: Store, projects: list[str] | None = None) -> bytes:
    return store.canonical_export(projects=projects, include_personal=False)


def pull(source: SyncDir, destination: SyncDir) -> list[str]:
    """What ``git pull`` does to a sync directory: the other side's chunk files appear (ours
    in ``log/``, the Go tool's in ``chunks/``)."""
    copied = []
    for folder in ("log", "chunks"):
        for path in sorted((source.path / folder).glob("*.jsonl.gz")):
            target = destination.path / folder / path.name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
                copied.append(path.name)
    return copied


def synthetic_records(count: int, *, project: str = "acme", size: int = 800) -> list[str]:
    """``count`` observation mutations of another replica (one session), as chunk lines: a
    quick way to give a store a large journal."""
    from engram.record import build_record, format_hlc, new_mid, new_origin

    origin = new_origin()
    session = {
        "id": "s-synthetic",
        "project": project,
        "directory": "/src",
        "started_at": "2026-01-01 00:00:00",
        "ended_at": None,
        "summary": None,
    }
    records = [
        build_record(
            mid=new_mid(),
            hlc=format_hlc(1_700_000_000_000, 0, origin),
            origin=origin,
            entity="session",
            key="s-synthetic",
            op="upsert",
            project=project,
            scope="project",
            payload=session,
        )
    ]
    for i in range(count - 1):
        key = f"obs-{i:016x}"
        payload = {
            "sync_id": key,
            "session_id": "s-synthetic",
            "type": "discovery",
            "title": f"synthetic memory {i}",
            "content": f"number {i} " + "z" * size,
            "tool_name": None,
            "project": project,
            "scope": "project",
            "topic_key": None,
            "revision_count": 1,
            "duplicate_count": 1,
            "last_seen_at": None,
            "created_at": "2026-01-01 00:00:00",
            "updated_at": "2026-01-01 00:00:00",
            "deleted_at": None,
        }
        records.append(
            build_record(
                mid=new_mid(),
                hlc=format_hlc(1_700_000_000_001 + i, 0, origin),
                origin=origin,
                entity="observation",
                key=key,
                op="upsert",
                project=project,
                scope="project",
                payload=payload,
            )
        )
    return [orjson.dumps(r).decode() for r in records]
