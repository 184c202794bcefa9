"""The write-ahead log during an import (issue 18, the import's storage cost): the chunks are
committed one by one as before, the log is checkpointed less often while they are, and once at
the import's end, with the store's own setting back afterwards however the import ended."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from engram.store import Store
from engram.store.db import BULK_CHECKPOINT_PAGES, WAL_CHECKPOINT_PAGES
from engram.sync.git.gitdir import SyncDir
from tests.support.sync_git import canonical, export, import_, synthetic_records


def checkpoint_pages(store: Store) -> int:
    return int(store.db.scalar("PRAGMA wal_autocheckpoint"))


def test_a_bulk_run_checkpoints_less_often_and_restores_the_setting(store: Store) -> None:
    assert checkpoint_pages(store) == WAL_CHECKPOINT_PAGES
    with store.db.bulk_writes():
        assert checkpoint_pages(store) == BULK_CHECKPOINT_PAGES
        store.add_observation(title="t", content="inside a bulk run", project="acme")
    assert checkpoint_pages(store) == WAL_CHECKPOINT_PAGES
    with pytest.raises(RuntimeError), store.db.bulk_writes():
        raise RuntimeError("an import that failed half way")
    assert checkpoint_pages(store) == WAL_CHECKPOINT_PAGES


def test_a_bulk_run_inside_a_transaction_leaves_the_checkpoint_to_later(store: Store) -> None:
    with store.db.write(), store.db.bulk_writes():
        store.add_observation(title="t", content="one transaction", project="acme")
    assert checkpoint_pages(store) == WAL_CHECKPOINT_PAGES
    assert store.db.scalar("SELECT COUNT(*) FROM observations") == 1


def main_file_count(store: Store, tmp_path: Path) -> int:
    """Memories in the database file alone, without its log (what a checkpoint put there)."""
    copy = tmp_path / "main-file-only.db"
    shutil.copyfile(store.db.path, copy)
    conn = sqlite3.connect(copy)
    try:
        if (
            conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'observations'").fetchone()
            is None
        ):
            return 0  # not even the schema has left the log yet
        return int(conn.execute("SELECT COUNT(*) FROM observations").fetchone()[0])
    finally:
        conn.close()


def test_an_import_ends_with_its_chunks_in_the_database_file(
    make_store, sync_dir: SyncDir, tmp_path: Path
) -> None:
    """A small import stays far below the store's checkpoint size: before, its pages waited in
    the log for some later commit to copy them (that commit paying for the import's pages)."""
    source = make_store("source")
    source.apply_mutations(synthetic_records(40), source="seed:test")
    export(source, sync_dir)
    receiver = make_store("receiver")
    report = import_(receiver, sync_dir)
    assert report.failures == []
    held = receiver.db.scalar("SELECT COUNT(*) FROM observations")
    assert held > 30 and main_file_count(receiver, tmp_path) == held
    assert checkpoint_pages(receiver) == WAL_CHECKPOINT_PAGES
    assert canonical(receiver, ["acme"]) == canonical(source, ["acme"])
