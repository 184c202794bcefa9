"""Access counts: how often searches returned a memory and people or agents read it.

Counting must never cost a database write per search (a search is a read, and a write would
queue behind every sync import). So each search or read notes one line per memory, and the
lines are appended to a small log beside the database (``engram.db-access``, one ``write``
with ``O_APPEND``, no transaction, no fsync) — not at every search: the process keeps them in
memory until :data:`BUFFER_SECONDS` have passed since the oldest, or they fill
:data:`BUFFER_BYTES` (at most a quarter of a fold), and always when the store closes, before a
fold or a count is read, and when the interpreter exits (the open-lock-check-write-close of one
append was ~4% of an every-word search). A process that is killed, or crashes, loses the hits
it had not appended yet (at most that second's); the log was never synced to disk, so a power
loss could already lose the last ones. The log is *folded* into ``observations.access_count`` /
``last_accessed_at`` in one transaction once it holds :attr:`Config.access_fold_bytes` (about
a thousand hits), and always before consolidation or review read the counts. Folding re-scores
the memories it touched.

Counts are local, derived data: they never sync (what one person reads says little about what a
teammate needs, and a count per read would be a mutation per read on every replica).

Losing nothing when processes race or stop:

* an appender locks the log and checks it is still the file at that path before writing, so a
  line never lands in a file a folder has already taken;
* a folder takes the log by renaming it (under the same lock) to ``…-access.<random>.folding``,
  then folds every such file in one write transaction that also records the file's name in
  ``access_folds``; a file whose name is recorded was folded already (the folder stopped before
  deleting it) and is only deleted, so nothing is counted twice, and two folders never fold one
  file twice (write transactions are serialized, and the name is checked inside).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.platform import PRIVATE_FILE_MODE
from engram.store import scoring
from engram.times import now_text, to_store_text

if TYPE_CHECKING:
    from engram.settings import Config
    from engram.store.db import Database
    from engram.store.models import Observation

try:  # POSIX; elsewhere appends are O_APPEND writes without the lock
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

FOLDING_SUFFIX = ".folding"
#: Longest a noted hit waits in memory before it is appended (checked at the next note).
BUFFER_SECONDS = 1.0
#: Most hits kept in memory (and never more than a quarter of a fold, at ~80 bytes a line).
BUFFER_HITS = 200
LINE_BYTES = 80

#: Logs holding hits not appended yet: appended when the interpreter exits.
_unwritten: weakref.WeakSet[AccessLog] = weakref.WeakSet()


@atexit.register
def _append_all() -> None:
    for log in list(_unwritten):
        log.flush(fold=False)


class AccessLog:
    """The access log of one database."""

    def __init__(self, db: Database, config: Config) -> None:
        self.db = db
        self.path = db.path.with_name(db.path.name + "-access")
        self.fold_bytes = config.access_fold_bytes
        self._limit = max(1, min(BUFFER_HITS, self.fold_bytes // 4 // LINE_BYTES))
        # Noted, not appended yet (see the module docstring): (when, [(project, key)...]),
        # made into lines only when appended.
        self._noted: list[tuple[float, list[tuple[str, str]]]] = []
        self._count = 0
        self._since = 0.0  # when the oldest of them was noted (time.monotonic)
        self._lock = threading.Lock()  # the TUI searches on worker threads

    # --- counting ------------------------------------------------------------------------------

    def note(self, observations: Iterable[Observation]) -> None:
        """Count one access of each memory (a search that returned it, a read of it): kept in
        memory, appended within :data:`BUFFER_SECONDS` (see the module docstring). Never
        fails the caller: a log that cannot be written only loses these counts."""
        hits = [(o.project, o.sync_id) for o in observations if o.sync_id]
        if not hits:
            return
        now = time.monotonic()
        with self._lock:
            if not self._noted:
                self._since = now
                _unwritten.add(self)
            self._noted.append((time.time(), hits))
            self._count += len(hits)
            due = self._count >= self._limit or now - self._since >= BUFFER_SECONDS
        if due:
            self.flush()

    def flush(self, *, fold: bool = True) -> None:
        """Append the hits noted in memory to the log, then fold it if it has grown to
        :attr:`fold_bytes` (unless ``fold`` is false). Never fails the caller."""
        with self._lock:
            noted, self._noted, self._count = self._noted, [], 0
            _unwritten.discard(self)
        if not noted:
            return
        # Led by a line end: a line torn by a process that crashed mid-append is ended there
        # instead of swallowing the first of these (an empty line is skipped).
        lines = ["\n"]
        for when, hits in noted:
            at = _json_string(to_store_text(datetime.fromtimestamp(when, UTC)))
            lines += (
                f"[{_json_string(project)}, {_json_string(key)}, {at}]\n" for project, key in hits
            )
        data = "".join(lines).encode("utf-8", "replace")
        try:
            size = self._append(data)
        except OSError as exc:
            _debug("access log %s not written: %s", self.path, exc)
            return
        if fold and size >= self.fold_bytes:
            try:
                self.fold()
            except Exception as exc:  # a busy database…: fold next time
                _debug("access log not folded yet: %s", exc)

    def _append(self, data: bytes) -> int:
        """Append ``data`` to the log file at :attr:`path` (never to one a folder renamed);
        returns the log's size after the write."""
        for _ in range(8):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    try:
                        current = os.stat(self.path)
                    except FileNotFoundError:
                        continue  # taken by a folder between our open and our lock
                    mine = os.fstat(fd)
                    if (current.st_dev, current.st_ino) != (mine.st_dev, mine.st_ino):
                        continue
                os.write(fd, data)
                return os.fstat(fd).st_size
            finally:
                os.close(fd)  # closing releases the lock
        raise OSError(f"access log {self.path} keeps being replaced")

    def pending_bytes(self) -> int:
        """Bytes of hits not folded yet (the current log only, after appending this
        process's)."""
        self.flush(fold=False)
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def pending_counts(self) -> dict[tuple[str, str], int]:
        """Hits logged but not folded yet, per (project, key), read without taking the log
        (what a dry run adds to the stored counts)."""
        self.flush(fold=False)
        hits: dict[tuple[str, str], list[Any]] = {}
        files = [self.path, *self.path.parent.glob(f"{self.path.name}.*{FOLDING_SUFFIX}")]
        with self.db.read() as conn:
            done = {r[0] for r in conn.execute("SELECT name FROM access_folds")}
        for file in files:
            if file.name not in done:
                _read_hits(file, hits)
        return {address: entry[0] for address, entry in hits.items()}

    # --- folding -------------------------------------------------------------------------------

    def fold(self) -> int:
        """Fold every logged hit into the access counts; returns how many hits were folded."""
        self._take_current()
        files = sorted(self.path.parent.glob(f"{self.path.name}.*{FOLDING_SUFFIX}"))
        if not files:
            return 0
        folded = 0
        with self.db.write() as conn:
            marks = ", ".join("?" for _ in files)
            done = {
                r[0]
                for r in conn.execute(
                    f"SELECT name FROM access_folds WHERE name IN ({marks})",
                    [f.name for f in files],
                )
            }
            hits: dict[tuple[str, str], list[Any]] = {}
            for file in files:
                if file.name in done:
                    continue
                folded += _read_hits(file, hits)
                conn.execute(
                    "INSERT INTO access_folds(name, folded_at) VALUES (?, ?)",
                    (file.name, now_text()),
                )
            ids = _apply(conn, hits)
            scoring.rescore_ids(conn, ids)
            # Names of files deleted by an earlier fold are no longer needed. Only those whose
            # file is gone: a file another folder has folded but not deleted yet (and which
            # this fold did not see, having listed the files before it was taken) must keep
            # its name, or a third folder would count it again.
            gone = [r[0] for r in conn.execute("SELECT name FROM access_folds")]
            stale = [n for n in gone if not self.path.with_name(n).exists()]
            conn.executemany("DELETE FROM access_folds WHERE name = ?", [(n,) for n in stale])
        for file in files:
            with contextlib.suppress(FileNotFoundError):
                file.unlink()
        return folded

    def _take_current(self) -> None:
        """Rename the current log aside for folding (under its lock, so no append is lost),
        with this process's hits appended first."""
        self.flush(fold=False)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            with contextlib.suppress(FileNotFoundError):  # another folder took it
                if os.fstat(fd).st_size:
                    target = f"{self.path.name}.{os.urandom(6).hex()}{FOLDING_SUFFIX}"
                    os.rename(self.path, self.path.with_name(target))
        finally:
            os.close(fd)


#: JSON string escapes (RFC 8259: the quote, the backslash and control characters).
_JSON_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\"} | {c: f"\\u{c:04x}" for c in range(0x20)}


def _json_string(text: str) -> str:
    """``text`` as a JSON string: a hit line is written at every search that finds something,
    and importing a JSON library there cost every ``engram search`` process milliseconds."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # nothing to escape (keys and project names): no translation
    return '"' + text.translate(_JSON_ESCAPES) + '"'


def _debug(message: str, *args: object) -> None:
    import logging  # (not at import: every engram process opens a store)

    logging.getLogger(__name__).debug(message, *args)


def _read_hits(file: Path, hits: dict[tuple[str, str], list[Any]]) -> int:
    """Add the hits of one log file to ``hits`` ((project, key) → [count, last at]); lines that
    are not hits (a torn last line after a crash) are skipped."""
    import orjson

    count = 0
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return 0
    for line in data.splitlines():
        try:
            project, key, at = orjson.loads(line)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            continue
        if not (isinstance(project, str) and isinstance(key, str) and isinstance(at, str)):
            continue
        entry = hits.setdefault((project, key), [0, at])
        entry[0] += 1
        entry[1] = max(entry[1], at)
        count += 1
    return count


def _apply(conn: sqlite3.Connection, hits: dict[tuple[str, str], list[Any]]) -> list[int]:
    """Add the counts to their memories; the local ids of the memories that exist."""
    ids: list[int] = []
    for (project, key), (count, at) in sorted(hits.items()):
        row = conn.execute(
            """UPDATE observations SET access_count = access_count + ?,
                   last_accessed_at = MAX(COALESCE(last_accessed_at, ''), ?)
               WHERE project = ? AND sync_id = ? RETURNING id""",
            (count, at, project, key),
        ).fetchone()
        if row is not None:
            ids.append(int(row[0]))
    return ids
