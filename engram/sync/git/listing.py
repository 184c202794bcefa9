"""The chunk files of a sync directory with what their headers say, for export, import and
status alike: the files are the truth (``log/``, ``chunks/`` and the Go directories elsewhere in
the repository), the Go manifests only fill in who wrote a Go-format chunk and when (those have
no header line).

Reading a header is cheap for our chunks (one line). An older-format document has to be read
to its end to be counted and verified, so that is done once per file: the result, or the
refusal of a file too large to read, is kept in the :class:`~engram.sync.git.ledger.ChunkLedger`
until the file changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from engram.sync.git.chunk import BadChunkError, ChunkHeader
from engram.sync.git.gitdir import CHUNKS, LOG, ChunkFiles, SyncDir, chunk_files, scan_folder
from engram.sync.git.ledger import ChunkLedger
from engram.sync.git.manifest import ManifestEntry
from engram.sync.git.nested import NestedGoDir
from engram.sync.git.reader import go_header, read_header
from engram.sync.git.stream import ChunkTooLargeError

LINK_PROBLEM = "is a symbolic link; refused (a chunk must be a file in the directory)"


@dataclass(slots=True)
class ListedChunk:
    """A chunk file with what its header (or, for the older format, its content) says."""

    id: str
    path: Path
    #: ``log``, ``chunks``, or a Go directory elsewhere in the repository (its path)
    place: str = LOG
    header: ChunkHeader | None = None
    problem: str | None = None
    #: refused for its size (now or earlier): not read again until the file changes
    refused: bool = False

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.header.created_at if self.header else "", self.id)

    @property
    def mutations(self) -> int:
        return self.header.counts.get("mutations", 0) if self.header else 0

    @property
    def go_format(self) -> bool:
        """A chunk in the Go tool's single-object format (no header line)."""
        return self.header is not None and self.header.format == 1

    @property
    def misplaced(self) -> bool:
        """One of our chunks in the Go tool's folder (written by an earlier version of
        Engram): it stops the Go tool, and the next export moves it to ``log/``."""
        return self.place == CHUNKS and self.header is not None and not self.go_format


def _examine(item: ListedChunk, known: Mapping[str, ManifestEntry], ledger: ChunkLedger) -> None:
    note = ledger.file_note(item.id, item.path)
    if note is not None and note.refused:
        item.problem, item.refused = f"refused earlier, file unchanged: {note.refused}", True
        return
    try:
        item.header = read_header(item.id, item.path)
        if item.header is not None:
            return
        if note is not None and note.header is not None:
            cached = note.header
        else:
            cached = go_header(item.id, item.path)
            ledger.note_header(item.id, item.path, cached)
        # Who wrote it and when: its manifest entry, else unknown and its newest row's time.
        entry = known.get(item.id)
        created_by = (entry.created_by if entry else "") or "unknown"
        created_at = entry.created_at if entry else cached.created_at
        item.header = ChunkHeader(created_by, created_at, cached.counts, cached.format)
    except ChunkTooLargeError as exc:
        ledger.note_refused(item.id, item.path, exc.reason)
        item.problem, item.refused = exc.reason, True
    except BadChunkError as exc:
        item.problem = exc.reason


def list_chunks(
    sync_dir: SyncDir,
    known: Mapping[str, ManifestEntry],
    ledger: ChunkLedger,
    nested: Sequence[NestedGoDir] = (),
) -> tuple[list[ListedChunk], list[str]]:
    """Every chunk file — ``log/``, ``chunks/``, then the ``nested`` Go directories; one per
    id — with its header, sorted by (created_at, id), and the names in ``log/`` and ``chunks/``
    that are not chunk files. ``known``: the Go manifests' entries (who wrote a Go chunk, when).
    """
    found: ChunkFiles = chunk_files(sync_dir)
    for folder in nested:
        scan_folder(folder.sync_dir.chunks_dir, f"{folder.rel}/{CHUNKS}", found)
    listed = []
    for file in found.files:
        item = ListedChunk(file.id, file.path, file.place)
        _examine(item, known, ledger)
        listed.append(item)
    for file in found.links:
        listed.append(ListedChunk(file.id, file.path, file.place, problem=LINK_PROBLEM))
    listed.sort(key=lambda c: c.sort_key)
    strangers = [name for name in found.strangers if name.startswith((f"{LOG}/", f"{CHUNKS}/"))]
    return listed, strangers
