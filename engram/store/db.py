"""Opening the SQLite database: pragmas, clear errors, and write transactions.

Writes use ``BEGIN IMMEDIATE`` so that several processes writing one database queue on SQLite's
busy timeout instead of failing with "database is locked" when a reader upgrades to a writer.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engram.errors import StoreUnavailableError
from engram.platform import private_directory, private_file, tighten_file

#: Parameters of one SQL statement: positional (a tuple or list) or named (a dict).
Params = tuple[Any, ...] | list[Any] | dict[str, Any]

BUSY_TIMEOUT_MS = 10_000
#: The largest integer SQLite stores (64-bit signed): ids and counts above it cannot exist.
MAX_INTEGER = 2**63 - 1
#: Pages the write-ahead log may hold before a commit checkpoints it (SQLite's default: 1,000).
WAL_CHECKPOINT_PAGES = 4000
#: Size the log is cut back to after a checkpoint (a large import's log must not stay large).
WAL_LIMIT_BYTES = 20 * 1024 * 1024
#: Pages the log may hold before a commit checkpoints it during a bulk run of transactions
#: (:meth:`Database.bulk_writes`: an import's chunks): 64 MB of 4 KB pages.
BULK_CHECKPOINT_PAGES = 16_000


#: Files SQLite keeps beside the database (it gives new ones the database file's mode).
SIDE_FILES = ("-wal", "-shm", "-journal")


def make_private(path: Path) -> None:
    """The database's directory ``0700`` and its files ``0600`` (see :mod:`engram.platform`):
    created so, or tightened with a one-line notice on stderr when other users could read
    them."""
    try:
        notice = private_directory(path.parent)
    except OSError as exc:
        raise StoreUnavailableError(
            f"cannot create data directory {path.parent}: {exc.strerror or exc}"
        ) from exc
    tightened = []
    try:
        for file in (path, *(path.with_name(path.name + suffix) for suffix in SIDE_FILES)):
            old = private_file(file) if file == path else tighten_file(file)
            if old is not None:
                tightened.append(f"{file.name} ({old:04o} → {old & ~0o077:04o})")
    except OSError as exc:
        raise StoreUnavailableError(
            f"cannot create database {path}: {exc.strerror or exc}"
        ) from exc
    if tightened:
        files = ", ".join(tightened)
        notice = (
            f"{notice}; and {files}"
            if notice
            else f"made {files} in {path.parent} private: other users could read them"
        )
    if notice:
        sys.stderr.write(f"engram: notice: {notice}\n")


def connect(path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """Open ``path`` with the store's pragmas, creating it and its directory privately (see
    :func:`make_private`); clear errors on failure."""
    make_private(path)
    try:
        conn = sqlite3.connect(
            str(path),
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        # Deleted rows are zeroed as they are freed, so "delete for good" leaves no bytes in
        # free space (engram/store/purge.py clears the FTS segments and the WAL).
        conn.execute("PRAGMA secure_delete=ON")
        # Table, indexes and FTS segments are written together: with SQLite's default 2 MB
        # page cache they evict each other and bulk imports run 2-3x slower.
        conn.execute("PRAGMA cache_size=-32768")
        # A save writes ~25 pages (the row, its indexes, the FTS structures, the journal, the
        # queues) where a plain table writes ~10: with SQLite's default checkpoint every 1,000
        # pages, a burst of saves checkpointed (copying pages and syncing twice) every ~40
        # saves, a tenth of their CPU. Every WAL_CHECKPOINT_PAGES pages instead (about as often
        # per save as a plain table); a log grown larger than WAL_LIMIT_BYTES (one large
        # transaction) is cut back after its checkpoint.
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        conn.execute("PRAGMA temp_store=MEMORY")
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailableError(describe_sqlite_error(exc, path)) from exc
    return conn


def describe_sqlite_error(exc: sqlite3.Error, path: Path) -> str:
    """A one-line explanation of a SQLite failure that a human can act on."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return f"database {path} is locked by another process; try again when it is done"
    if "readonly" in text or "read-only" in text:
        return f"database {path} is read-only: check the permissions of {path.parent}"
    if "unable to open" in text:
        return f"cannot open database {path}: is {path.parent} writable?"
    if "not a database" in text or "malformed" in text:
        return f"{path} is not a valid Engram database ({text})"
    return f"database error on {path}: {text}"


class Database:
    """One connection plus a re-entrant write transaction, safe to share between threads."""

    def __init__(self, path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = path
        self.conn = connect(path, busy_timeout_ms)
        self._lock = threading.RLock()
        self._depth = 0
        #: Called (without arguments) after every committed write transaction, e.g. to nudge a
        #: sync loop. Listeners must return at once: they run on the writer's thread.
        self.write_listeners: list[Callable[[], None]] = []

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; nested uses join the outer one."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise StoreUnavailableError(describe_sqlite_error(exc, self.path)) from exc
            self._depth = 1
            try:
                yield self.conn
            except BaseException:
                self._depth = 0
                self.conn.execute("ROLLBACK")
                raise
            try:
                self.conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                self.conn.execute("ROLLBACK")
                raise StoreUnavailableError(describe_sqlite_error(exc, self.path)) from exc
            finally:
                self._depth = 0
            self._notify()

    def _notify(self) -> None:
        for listener in list(self.write_listeners):
            try:
                listener()
            except Exception:  # a listener's bug must never fail a committed write
                import logging  # (not at import: every engram process opens a store)

                logging.getLogger(__name__).exception("write listener failed")

    @contextmanager
    def bulk_writes(self) -> Iterator[None]:
        """A long run of write transactions (an import's chunks, one transaction each): commits
        checkpoint the write-ahead log every :data:`BULK_CHECKPOINT_PAGES` pages instead of
        every :data:`WAL_CHECKPOINT_PAGES`, and the run ends with one checkpoint.

        Why: every chunk rewrites much the same pages (the leaves of the indexes with random
        keys, the full-text segments being merged), and each checkpoint copies every page the
        log holds into the database file and syncs it; a larger log copies each page once per
        four times as many chunks. Each chunk still commits on its own (a killed import keeps
        every chunk it finished; another writer still gets in between chunks). The setting
        is restored, and the log checkpointed, however the run ends; a checkpoint that cannot
        finish (a reader holds an old snapshot) is left to later commits, as SQLite does."""
        with self._lock:
            before = int(self.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
            self.conn.execute(f"PRAGMA wal_autocheckpoint={max(before, BULK_CHECKPOINT_PAGES)}")
        try:
            yield
        finally:
            with self._lock:
                self.conn.execute(f"PRAGMA wal_autocheckpoint={before}")
                if not self._depth:  # (never inside a transaction: SQLite would refuse)
                    try:
                        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    except sqlite3.OperationalError:
                        pass  # busy or locked: the next commit's checkpoint does it

    @contextmanager
    def without_waiting(self) -> Iterator[None]:
        """Writes inside give up at once (``StoreUnavailableError``) instead of waiting for
        another process's transaction: for work a read does on the side (deferred conflict
        checks, graph catch-up), which must never make the read wait."""
        with self._lock:
            timeout = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
            self.conn.execute("PRAGMA busy_timeout=0")
            try:
                yield
            finally:
                self.conn.execute(f"PRAGMA busy_timeout={int(timeout)}")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for multi-statement reads."""
        with self._lock:
            if self._depth:
                yield self.conn
                return
            self.conn.execute("BEGIN")
            self._depth = 1
            try:
                yield self.conn
            finally:
                self._depth = 0
                self.conn.execute("COMMIT")

    def vacuum(self) -> None:
        """Rebuild the database file (outside any transaction, holding the connection)."""
        with self._lock:
            self.conn.execute("VACUUM")

    def rows(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Run a read and fetch every row while holding the connection."""
        with self._lock:
            try:
                return self.conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    raise StoreUnavailableError(describe_sqlite_error(exc, self.path)) from exc
                raise

    def one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = self.rows(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Params = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else row[0]

    def close(self) -> None:
        with self._lock:
            self.conn.close()
