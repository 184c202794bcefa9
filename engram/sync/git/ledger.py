"""What git import remembers about one sync directory's chunk files, beyond "applied": the
records it held back (and for which project), files it refused for their size or already
parsed (older-format headers), and the keys each Go-format chunk holds (what
``engram sync --go-compat`` must not write for Go teammates a second time). Tables
``sync_git_held``, ``sync_git_files`` (migration 5), ``sync_git_go_chunks`` and
``sync_git_go_keys`` (migration 10).

A held-back record is not lost: the chunk that holds it stays in the directory, and the import
that may apply it (after ``engram sync --bind``, or with ``--include-personal``) re-reads that
chunk; applying a mutation twice is a no-op, so re-reading is always safe.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson

from engram.store.db import Database
from engram.sync.git.chunk import ChunkHeader
from engram.times import now_text


@dataclass(frozen=True, slots=True)
class HeldNote:
    """``records`` records of ``chunk_id`` that were not applied: of a project not bound here,
    or (``personal``) of personal scope."""

    chunk_id: str
    project: str
    personal: bool
    records: int


#: (project, personal) → number of records, for one chunk.
HeldCounts = Counter[tuple[str, bool]]


def file_identity(path: Path) -> tuple[int, int] | None:
    """(size, mtime in ns) of a file, without following a symbolic link; None if it is gone."""
    try:
        stat = os.lstat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


@dataclass(frozen=True, slots=True)
class FileNote:
    refused: str | None
    header: ChunkHeader | None


class ChunkLedger:
    """The ledger of one target (``git:<dir>``) in one store."""

    def __init__(self, db: Database, target: str) -> None:
        self.db = db
        self.target = target

    # --- held records ------------------------------------------------------------------------

    def held(self) -> list[HeldNote]:
        rows = self.db.rows(
            "SELECT chunk_id, project, personal, records FROM sync_git_held WHERE target = ?"
            " ORDER BY chunk_id, project, personal",
            (self.target,),
        )
        return [HeldNote(r[0], r[1], bool(r[2]), int(r[3])) for r in rows]

    def replace_held(self, chunk_id: str, counts: HeldCounts) -> None:
        """What ``chunk_id`` holds back now (joins an open write transaction)."""
        with self.db.write() as conn:
            conn.execute(
                "DELETE FROM sync_git_held WHERE target = ? AND chunk_id = ?",
                (self.target, chunk_id),
            )
            conn.executemany(
                "INSERT INTO sync_git_held(target, chunk_id, project, personal, records)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (self.target, chunk_id, project, int(personal), n)
                    for (project, personal), n in sorted(counts.items())
                    if n
                ],
            )

    def forget_held(self, chunk_ids: Iterable[str]) -> None:
        ids = list(chunk_ids)
        if not ids:
            return
        with self.db.write() as conn:
            conn.executemany(
                "DELETE FROM sync_git_held WHERE target = ? AND chunk_id = ?",
                [(self.target, chunk_id) for chunk_id in ids],
            )

    # --- files -------------------------------------------------------------------------------

    def file_note(self, chunk_id: str, path: Path) -> FileNote | None:
        """What is known about this exact file (None if nothing, or the file changed since)."""
        identity = file_identity(path)
        row = self.db.one(
            "SELECT size, mtime_ns, refused, header FROM sync_git_files"
            " WHERE target = ? AND chunk_id = ?",
            (self.target, chunk_id),
        )
        if row is None or identity is None or (row[0], row[1]) != identity:
            return None
        header = None
        if row[3]:
            value = orjson.loads(row[3])
            header = ChunkHeader(
                created_by=value["created_by"],
                created_at=value["created_at"],
                counts=value["counts"],
                format=value["engram_chunk"],
            )
        return FileNote(refused=row[2], header=header)

    def _note(
        self, chunk_id: str, path: Path, refused: str | None, header: ChunkHeader | None
    ) -> None:
        identity = file_identity(path)
        if identity is None:
            return
        with self.db.write() as conn:
            conn.execute(
                """INSERT INTO sync_git_files(target, chunk_id, size, mtime_ns, refused, header,
                       noted_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(target, chunk_id) DO UPDATE SET size = excluded.size,
                       mtime_ns = excluded.mtime_ns, refused = excluded.refused,
                       header = excluded.header, noted_at = excluded.noted_at""",
                (
                    self.target,
                    chunk_id,
                    *identity,
                    refused,
                    orjson.dumps(header.to_dict()).decode() if header else None,
                    now_text(),
                ),
            )

    def note_refused(self, chunk_id: str, path: Path, reason: str) -> None:
        self._note(chunk_id, path, reason, None)

    def note_header(self, chunk_id: str, path: Path, header: ChunkHeader) -> None:
        self._note(chunk_id, path, None, header)

    # --- keys of Go-format chunks ------------------------------------------------------------

    def go_chunks_read(self) -> set[str]:
        """Go-format chunks whose keys are recorded."""
        rows = self.db.rows(
            "SELECT chunk_id FROM sync_git_go_chunks WHERE target = ?", (self.target,)
        )
        return {r[0] for r in rows}

    def note_go_keys(self, chunk_id: str, keys: Iterable[tuple[str, str]]) -> None:
        """The (entity, key) pairs a Go-format chunk holds (joins an open write transaction)."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO sync_git_go_chunks(target, chunk_id, noted_at)"
                " VALUES (?, ?, ?)",
                (self.target, chunk_id, now_text()),
            )
            conn.executemany(
                "INSERT OR IGNORE INTO sync_git_go_keys(target, chunk_id, entity, key)"
                " VALUES (?, ?, ?, ?)",
                [(self.target, chunk_id, entity, key) for entity, key in keys],
            )

    def go_keys(self, chunk_ids: Iterable[str]) -> Mapping[str, set[str]]:
        """entity → the keys the given Go-format chunks hold (chunks no longer in the
        directory are left out by the caller, so a branch switch forgets what they held)."""
        wanted = set(chunk_ids)
        found: dict[str, set[str]] = {"session": set(), "observation": set(), "prompt": set()}
        rows = self.db.rows(
            "SELECT chunk_id, entity, key FROM sync_git_go_keys WHERE target = ?", (self.target,)
        )
        for chunk_id, entity, key in rows:
            if chunk_id in wanted:
                found.setdefault(entity, set()).add(key)
        return found


def go_keys_anywhere(db: Database) -> dict[str, set[str]]:
    """entity → the keys held by every Go-format chunk this machine has read, in any sync
    directory (what ``engram-go sync --import`` brings to a Go database there)."""
    found: dict[str, set[str]] = {"session": set(), "observation": set(), "prompt": set()}
    for entity, key in db.rows("SELECT DISTINCT entity, key FROM sync_git_go_keys"):
        found.setdefault(entity, set()).add(key)
    return found
