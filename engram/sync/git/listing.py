"""The chunk files of a sync directory with what their headers say, for export, import and
status alike: the files are the truth, the manifest only fills in who wrote an older-format
chunk and when (those have no header line).

Reading a header is cheap for our chunks (one line). An older-format document has to be read
to its end to be counted and verified, so that is done once per file: the result, or the
refusal of a file too large to read, is kept in the :class:`~engram.sync.git.ledger.ChunkLedger`
until the file changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engram.sync.git.chunk import BadChunkError, ChunkHeader
from engram.sync.git.gitdir import SyncDir, chunk_files
from engram.sync.git.ledger import ChunkLedger
from engram.sync.git.manifest import ManifestReading
from engram.sync.git.reader import go_header, read_header
from engram.sync.git.stream import ChunkTooLargeError

LINK_PROBLEM = "is a symbolic link; refused (a chunk must be a file in the directory)"


@dataclass(slots=True)
class ListedChunk:
    """A chunk file with what its header (or, for the older format, its content) says."""

    id: str
    path: Path
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


def _examine(item: ListedChunk, manifest: ManifestReading, ledger: ChunkLedger) -> None:
    note = ledger.file_note(item.id, item.path)
    if note is not None and note.refused:
        item.problem, item.refused = f"refused earlier, file unchanged: {note.refused}", True
        return
    try:
        item.header = read_header(item.id, item.path)
        if item.header is not None:
            return
        known = manifest.entries.get(item.id)
        created_by = known.created_by if known else "unknown"
        created_at = known.created_at if known else ""
        if note is not None and note.header is not None:
            cached = note.header
        else:
            cached = go_header(item.id, item.path, created_by="", created_at="")
            ledger.note_header(item.id, item.path, cached)
        item.header = ChunkHeader(created_by, created_at, cached.counts, cached.format)
    except ChunkTooLargeError as exc:
        ledger.note_refused(item.id, item.path, exc.reason)
        item.problem, item.refused = exc.reason, True
    except BadChunkError as exc:
        item.problem = exc.reason


def list_chunks(
    sync_dir: SyncDir, manifest: ManifestReading, ledger: ChunkLedger
) -> tuple[list[ListedChunk], list[str]]:
    """Every chunk file in the directory with its header, sorted by (created_at, id), and the
    names in ``chunks/`` that are not chunk files."""
    files, strangers, links = chunk_files(sync_dir)
    listed = []
    for chunk_id, path in files:
        item = ListedChunk(chunk_id, path)
        _examine(item, manifest, ledger)
        listed.append(item)
    for chunk_id in links:
        path = sync_dir.chunks_dir / f"{chunk_id}.jsonl.gz"
        listed.append(ListedChunk(chunk_id, path, problem=LINK_PROBLEM))
    listed.sort(key=lambda c: c.sort_key)
    return listed, strangers
