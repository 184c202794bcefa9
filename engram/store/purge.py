"""Delete for good: after hard deletes, no byte of the deleted text stays in ``engram.db``,
``engram.db-wal`` or ``engram.db-shm``.

A hard delete removes the row and re-derives every session context that used it (engram/store/
search_context.py), but on SQLite 3.40 (no FTS5 ``secure-delete``) the bytes survive in three
places until this module clears them, as measured by tests/store/test_purge.py:

* freed database pages and cells — every connection runs with ``PRAGMA secure_delete=ON``
  (engram/store/db.py), so SQLite zeroes them as it frees them; a database written before that
  (``vacuum_needed``) is rebuilt once with ``VACUUM``;
* FTS5 index segments, which keep a deleted row's terms until the segments are merged — purge
  merges each index into one segment, in small steps (``'merge'``), each its own short write
  transaction, so other processes keep writing meanwhile;
* the write-ahead log, which keeps old page images until it is checkpointed and truncated.

The journal keeps only what replication requires (docs/architecture.md): earlier payloads of a hard-deleted key are
blanked once every target holds the delete (engram/store/journal.py); git history keeps what
was already pushed, which no tool of ours can rewrite.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from engram.errors import StoreUnavailableError
from engram.store.base import StoreBase
from engram.times import now_text

#: Pages each merge step writes: small enough that a step holds the write lock briefly.
MERGE_PAGES = 2000
#: Rows a process must have changed (``total_changes``: ~13 per save) for closing the store to
#: merge the full-text indexes, and the time it may spend doing so.
MERGE_AFTER_CHANGES = 10_000
CLOSE_MERGE_BUDGET_S = 0.5
FTS_INDEXES = ("observations_fts", "prompts_fts")
CHECKPOINT_ATTEMPTS = 20

PURGE_TABLE = """
-- What `engram purge` has done: the journal position of the last purge (hard deletes after it
-- are pending), whether journal text was blanked since, and whether bytes freed before secure
-- deletes were switched on may still sit in free space (then the next purge runs VACUUM).
CREATE TABLE IF NOT EXISTS store_purge (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    journal_seq    INTEGER NOT NULL DEFAULT 0,
    blanked        INTEGER NOT NULL DEFAULT 0,
    vacuum_needed  INTEGER NOT NULL DEFAULT 0,
    purged_at      TEXT
);
"""


def create_purge_state(conn: sqlite3.Connection) -> None:
    """The purge bookkeeping row (migration 9). A database already in use may hold bytes freed
    before secure deletes: its first purge vacuums."""
    conn.execute(PURGE_TABLE)
    used = conn.execute("SELECT 1 FROM sync_journal LIMIT 1").fetchone() is not None
    conn.execute("INSERT OR IGNORE INTO store_purge(id, vacuum_needed) VALUES (1, ?)", (int(used),))


@dataclass(slots=True)
class PurgeReport:
    """What a purge did and what it cost."""

    merge_steps: int = 0
    vacuumed: bool = False
    wal_truncated: bool = False
    seconds: float = 0.0
    bytes_before: int = 0
    bytes_after: int = 0

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


class PurgeMixin(StoreBase):
    def purge_pending(self) -> bool:
        """Whether a hard delete (or journal blanking) happened since the last purge."""
        row = self.db.one("SELECT journal_seq, blanked, vacuum_needed FROM store_purge")
        if row is None:
            return False
        if row["blanked"] or row["vacuum_needed"]:
            return True
        return (
            self.db.one(
                """SELECT 1 FROM sync_journal WHERE seq > ? AND op = 'delete' AND record != ''
                     AND json_extract(record, '$.payload.hard') IS 1 LIMIT 1""",
                (row["journal_seq"],),
            )
            is not None
        )

    def purge(self, progress: Callable[[str], None] | None = None) -> PurgeReport:
        """Remove every trace of hard-deleted text from the database files (see the module
        docstring); ``progress`` hears each stage. Safe to run at any time, also while other
        processes use the database (they only wait for short write steps)."""
        say = progress or (lambda message: None)
        started = time.perf_counter()
        report = PurgeReport(bytes_before=self._file_bytes())
        seq = int(self.db.scalar("SELECT COALESCE(MAX(seq), 0) FROM sync_journal") or 0)
        for fts in FTS_INDEXES:
            say(f"merging the {fts.split('_')[0]} full-text index")
            report.merge_steps += self._merge(fts)
        if self.db.scalar("SELECT vacuum_needed FROM store_purge"):
            say("rebuilding the database file (VACUUM, once after an upgrade)")
            self.db.vacuum()
            report.vacuumed = True
        with self.db.write() as conn:
            conn.execute(
                """UPDATE store_purge SET journal_seq = MAX(journal_seq, ?), blanked = 0,
                       vacuum_needed = 0, purged_at = ? WHERE id = 1""",
                (seq, now_text()),
            )
        say("checkpointing and truncating the write-ahead log")
        report.wal_truncated = self._truncate_wal()
        report.bytes_after = self._file_bytes()
        report.seconds = time.perf_counter() - started
        return report

    def _merge(self, fts: str, budget_s: float | None = None) -> int:
        """Merge an FTS5 index into one segment (dropping deleted rows' terms), step by step;
        with ``budget_s``, no step starts once that many seconds have passed."""
        steps, started = 0, time.perf_counter()
        while budget_s is None or time.perf_counter() - started < budget_s:
            with self.db.write() as conn:
                before = conn.total_changes
                conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('merge', ?)", (-MERGE_PAGES,))
                wrote = conn.total_changes - before > 1  # the command itself counts one
            steps += 1
            if not wrote:
                break
        return steps

    def merge_after_bulk_writes(self) -> bool:
        """Merge the full-text indexes into one segment each when this process changed many
        rows (:data:`MERGE_AFTER_CHANGES`), within :data:`CLOSE_MERGE_BUDGET_S`: called as the
        store closes. FTS5 writes a segment per transaction and merges them only in steps, so
        a burst of saves leaves a dozen or more, and every search then looks each word up in
        each (5,000 saves: 14 segments, searches ~6% slower than over one). Off the save
        path: no save waits for it. Returns whether it merged; a busy database is left as it
        is (the next bulk writer merges)."""
        started = time.perf_counter()
        try:
            if self.db.conn.total_changes < MERGE_AFTER_CHANGES:  # (closed: raises)
                return False
            with self.db.without_waiting():
                for fts in FTS_INDEXES:
                    spent = time.perf_counter() - started
                    self._merge(fts, budget_s=max(CLOSE_MERGE_BUDGET_S - spent, 0.0))
        except (StoreUnavailableError, sqlite3.Error):  # closing must not fail over it
            return False
        return True

    def _truncate_wal(self) -> bool:
        """Checkpoint every frame and truncate the log to zero bytes; another process's open
        read can hold it up for a moment, so retry briefly. Returns whether it completed."""
        for attempt in range(CHECKPOINT_ATTEMPTS):
            busy = self.db.one("PRAGMA wal_checkpoint(TRUNCATE)")
            if busy is not None and busy[0] == 0:
                return True
            time.sleep(0.05 * (attempt + 1))
        return False

    def _file_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += self.db.path.with_name(self.db.path.name + suffix).stat().st_size
            except OSError:
                pass
        return total
