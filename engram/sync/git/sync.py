"""Git sync services: export, import and status of one sync directory (``engram sync`` calls
these; so can any other face).

* **Export** writes every journal mutation of the selection that no chunk in the directory
  holds, in chunks of at most 4 MiB, each written atomically and only then marked delivered.
  Before selecting, it reads the chunks it has not applied yet (a teammate's, pulled by git) and
  marks the mutations they share with the local journal as held, so a mutation that reached this
  machine by another route (the cloud) is not written into the directory a second time.
* **Import** applies every chunk not applied yet, one transaction per chunk, after checking its
  hash; a bad chunk is reported by name and skipped, the others still import. It changes no
  tracked file, except a manifest that git left with conflict markers (rebuilt: that is the
  resolution). Export rebuilds the manifest every time.
* **Status** reports chunks, what is applied and pending, and contributors.

The directory is the truth: if a chunk this machine recorded has vanished from it (a branch
switch, a deleted file), the delivery marks of this target are forgotten and rebuilt from the
chunks that are there, so nothing is silently left unexported.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engram.errors import InvalidMutationError
from engram.files import write_atomic
from engram.store.models import ApplyResult
from engram.sync.git.chunk import (
    MAX_CHUNK_BYTES,
    BadChunkError,
    ChunkHeader,
    DecodedChunk,
    EncodedChunk,
    decode_chunk,
    pack_chunks,
    read_header,
)
from engram.sync.git.gitdir import (
    SyncDir,
    chunk_files,
    ensure_layout,
    locked,
    remove_stale_temp_files,
)
from engram.sync.git.go_chunk import go_chunk_records
from engram.sync.git.manifest import ManifestEntry, ManifestReading, read_manifest, render_manifest
from engram.sync.progress import ProgressFactory, default_author, no_progress
from engram.times import rfc3339

if TYPE_CHECKING:
    from engram.store import Store
    from engram.store.journal import JournalEntry

#: Test-only seam: ``mid-chunk`` pauses an export half-way through writing a chunk file,
#: ``after-chunk`` right after a chunk is renamed into place but before it is marked delivered.
#: The crash tests kill the paused process with SIGKILL. Never set it in real use.
TEST_PAUSE_ENV = "ENGRAM_TEST_PAUSE_EXPORT"

_MUTATION_INDEX = re.compile(r"^mutation\[(\d+)\]: ")


def _test_pause(point: str) -> None:
    if os.environ.get(TEST_PAUSE_ENV) != point:
        return
    sys.stderr.write(f"engram: test pause at {point}\n")
    sys.stderr.flush()
    time.sleep(60)


# --- reports ---------------------------------------------------------------------------------


@dataclass(slots=True)
class ChunkProblem:
    """A chunk (or manifest entry, or stray file) that could not be used, and why."""

    chunk: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.chunk}: {self.reason}"


@dataclass(slots=True)
class WrittenChunk:
    id: str
    file: str
    sessions: int
    observations: int
    prompts: int
    mutations: int


@dataclass(slots=True)
class ExportReport:
    directory: str
    target: str
    projects: list[str] | None
    include_personal: bool
    chunks: list[WrittenChunk] = field(default_factory=list)
    #: chunks not applied here that were read to learn which mutations the directory holds
    chunks_indexed: int = 0
    #: journal mutations found already held by those chunks (so not written again)
    already_held: int = 0
    rescanned: bool = False
    problems: list[ChunkProblem] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)
    manifest_rebuilt: bool = False

    @property
    def nothing_new(self) -> bool:
        return not self.chunks

    def total(self, name: str) -> int:
        return sum(getattr(c, name) for c in self.chunks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "target": self.target,
            "projects": self.projects,
            "include_personal": self.include_personal,
            "nothing_new": self.nothing_new,
            "chunks": [asdict(c) for c in self.chunks],
            "sessions": self.total("sessions"),
            "observations": self.total("observations"),
            "prompts": self.total("prompts"),
            "mutations": self.total("mutations"),
            "chunks_indexed": self.chunks_indexed,
            "already_held": self.already_held,
            "rescanned": self.rescanned,
            "problems": [p.to_dict() for p in self.problems],
            "files_written": self.files_written,
            "manifest_rebuilt": self.manifest_rebuilt,
        }


@dataclass(slots=True)
class ImportReport:
    directory: str
    target: str
    exists: bool = True
    chunks_imported: list[str] = field(default_factory=list)
    chunks_already: int = 0
    applied: ApplyResult = field(default_factory=ApplyResult)
    skipped_relations: int = 0
    failures: list[ChunkProblem] = field(default_factory=list)
    warnings: list[ChunkProblem] = field(default_factory=list)
    manifest_rebuilt: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "target": self.target,
            "exists": self.exists,
            "chunks_imported": len(self.chunks_imported),
            "imported_ids": self.chunks_imported,
            "chunks_skipped": self.chunks_already,
            "chunks_failed": len(self.failures),
            "failures": [p.to_dict() for p in self.failures],
            "warnings": [p.to_dict() for p in self.warnings],
            "mutations": self.applied.to_dict(),
            "skipped_relation_mutations": self.skipped_relations,
            "manifest_rebuilt": self.manifest_rebuilt,
        }


@dataclass(slots=True)
class StatusReport:
    directory: str
    target: str
    exists: bool
    chunks: int = 0
    applied: int = 0
    pending_import: list[str] = field(default_factory=list)
    pending_export: int = 0
    projects: list[str] | None = None
    sessions: int = 0
    memories: int = 0
    prompts: int = 0
    contributors: dict[str, int] = field(default_factory=dict)
    manifest: str = "missing"
    problems: list[ChunkProblem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["problems"] = [p.to_dict() for p in self.problems]
        return data


# --- the directory's chunks -------------------------------------------------------------------


@dataclass(slots=True)
class ListedChunk:
    """A chunk file with what its header (or, for the older format, its content) says."""

    id: str
    path: Path
    header: ChunkHeader | None = None
    problem: str | None = None

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.header.created_at if self.header else "", self.id)


def _mids(decoded: DecodedChunk, records: list[dict[str, Any]] | None) -> list[str]:
    if records is not None:
        return [r["mid"] for r in records]
    mids = []
    for number, line in enumerate(decoded.lines, start=2):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise BadChunkError(decoded.id, f"line {number}: invalid JSON ({exc})") from None
        mid = value.get("mid") if isinstance(value, dict) else None
        if not isinstance(mid, str):
            raise BadChunkError(decoded.id, f"line {number}: a mutation without a mid")
        mids.append(mid)
    return mids


class GitSync:
    """Export, import and status for one store and one sync directory."""

    def __init__(
        self,
        store: Store,
        sync_dir: SyncDir,
        *,
        progress: ProgressFactory = no_progress,
        author: str | None = None,
        chunk_limit: int = MAX_CHUNK_BYTES,
    ) -> None:
        self.store = store
        self.chunk_limit = chunk_limit
        self.dir = sync_dir
        self.target = sync_dir.target
        self.progress = progress
        self.author = author or default_author()

    # --- listing ------------------------------------------------------------------------

    def _read_manifest(self) -> ManifestReading:
        try:
            raw = self.dir.manifest_path.read_bytes()
        except FileNotFoundError:
            raw = None
        return read_manifest(raw)

    def _list(self, manifest: ManifestReading) -> tuple[list[ListedChunk], list[str]]:
        """Every chunk file in the directory with its header, sorted by (created_at, id)."""
        files, strangers = chunk_files(self.dir)
        listed = []
        for chunk_id, path in files:
            item = ListedChunk(chunk_id, path)
            try:
                with open(path, "rb") as handle:
                    item.header = read_header(chunk_id, handle)
                if item.header is None:  # the older format has no header: read it whole
                    decoded = decode_chunk(chunk_id, path.read_bytes())
                    known = manifest.entries.get(chunk_id)
                    item.header = ChunkHeader(
                        created_by=known.created_by if known else "unknown",
                        created_at=known.created_at if known else "",
                        counts=decoded.header.counts,
                        format=decoded.header.format,
                    )
            except BadChunkError as exc:
                item.problem = exc.reason
            except OSError as exc:
                item.problem = f"cannot read ({exc.strerror or exc})"
            listed.append(item)
        listed.sort(key=lambda c: c.sort_key)
        return listed, strangers

    def _decode(self, chunk: ListedChunk) -> tuple[DecodedChunk, list[dict[str, Any]] | None, int]:
        """Read and verify a chunk; older-format chunks come back converted to records."""
        if chunk.problem:
            raise BadChunkError(chunk.id, chunk.problem)
        try:
            raw = chunk.path.read_bytes()
        except OSError as exc:
            raise BadChunkError(chunk.id, f"cannot read ({exc.strerror or exc})") from None
        decoded = decode_chunk(chunk.id, raw)
        if decoded.document is None:
            return decoded, None, 0
        records, skipped = go_chunk_records(chunk.id, decoded.document)
        return decoded, records, skipped

    def _rebuild_manifest(self, listed: Iterable[ListedChunk]) -> bool:
        """Rewrite the manifest from the chunk headers if it differs; True when rewritten."""
        entries = [
            ManifestEntry.from_header(c.id, c.header)
            for c in listed
            if c.header is not None and c.problem is None
        ]
        data = render_manifest(entries)
        try:
            if self.dir.manifest_path.read_bytes() == data:
                return False
        except FileNotFoundError:
            pass
        write_atomic(self.dir.manifest_path, data)
        return True

    def _missing_chunks(self, listed: list[ListedChunk]) -> set[str]:
        """Chunks recorded as held here whose files are no longer in the directory."""
        present = {c.id for c in listed}
        return self.store.journal.chunk_ids(self.target) - present

    # --- export -------------------------------------------------------------------------

    def export(
        self, *, projects: list[str] | None = None, include_personal: bool = False
    ) -> ExportReport:
        """Write every mutation of the selection that no chunk here holds (``projects=None``:
        every project). Nothing new ⇒ no file."""
        report = ExportReport(
            directory=str(self.dir.path),
            target=self.target,
            projects=projects,
            include_personal=include_personal,
        )
        journal = self.store.journal
        if not self.dir.exists() and not self._pending_count(projects, include_personal):
            return report  # nothing to write and nowhere yet: create nothing
        with locked(self.dir):
            report.files_written = ensure_layout(self.dir)
            remove_stale_temp_files(self.dir)
            manifest = self._read_manifest()
            listed, _ = self._list(manifest)
            if self._missing_chunks(listed):
                journal.forget_target(self.target)
                report.rescanned = True
            held = journal.chunk_ids(self.target)
            for chunk in listed:
                if chunk.id not in held:
                    self._index(chunk, report)
            extra = self._extra_sessions(projects, include_personal)
            total = len(extra) + journal.count_pending(
                self.target, projects=projects, include_personal=include_personal
            )
            if total:
                batches = journal.iter_pending(
                    self.target, projects=projects, include_personal=include_personal
                )
                stream = chain(extra, chain.from_iterable(batches))
                with self.progress("Exporting mutations", total) as advance:
                    for chunk, items in pack_chunks(
                        stream,
                        created_by=self.author,
                        created_at=rfc3339(),
                        limit=self.chunk_limit,
                    ):
                        report.chunks.append(self._write_chunk(chunk, items))
                        advance(len(items))
                listed, _ = self._list(manifest)
            report.manifest_rebuilt = self._rebuild_manifest(listed)
        return report

    def _extra_sessions(
        self, projects: list[str] | None, include_personal: bool
    ) -> list[JournalEntry]:
        """Sessions of other projects that the selection's memories need (see the journal)."""
        if projects is None:
            return []  # every project is selected: every session row already is
        return self.store.journal.pending_sessions(
            self.target, projects=projects, include_personal=include_personal
        )

    def _pending_count(self, projects: list[str] | None, include_personal: bool) -> int:
        """Mutations of the selection not yet marked as held by this directory (an upper
        bound until the directory's unapplied chunks have been indexed by an export)."""
        return len(self._extra_sessions(projects, include_personal)) + (
            self.store.journal.count_pending(
                self.target, projects=projects, include_personal=include_personal
            )
        )

    def _index(self, chunk: ListedChunk, report: ExportReport) -> None:
        """Mark the journal rows a not-yet-applied chunk already holds as delivered here; a
        chunk whose every mutation is already known counts as applied."""
        try:
            decoded, records, _ = self._decode(chunk)
            mids = _mids(decoded, records)
        except (BadChunkError, InvalidMutationError) as exc:
            report.problems.append(ChunkProblem(chunk.id, getattr(exc, "reason", str(exc))))
            return
        report.chunks_indexed += 1
        known = self.store.journal.seqs_for_mids(mids)
        with self.store.db.write():
            report.already_held += self.store.journal.mark_delivered(self.target, known.values())
            if len(known) == len(set(mids)):
                self.store.journal.record_chunk(self.target, chunk.id)

    def _write_chunk(self, chunk: EncodedChunk, items: list[JournalEntry]) -> WrittenChunk:
        path = self.dir.chunks_dir / f"{chunk.id}.jsonl.gz"
        if not path.exists():  # the same content was written before: it is already there
            write_atomic(path, chunk.compressed(), midway=lambda: _test_pause("mid-chunk"))
        _test_pause("after-chunk")
        # Marked only now that the file is durably in place (invariant 4).
        with self.store.db.write():
            self.store.journal.mark_delivered(self.target, [item.seq for item in items])
            self.store.journal.record_chunk(self.target, chunk.id)
        counts = chunk.header.counts
        return WrittenChunk(
            id=chunk.id,
            file=str(path),
            sessions=counts["sessions"],
            observations=counts["observations"],
            prompts=counts["prompts"],
            mutations=counts["mutations"],
        )

    # --- import -------------------------------------------------------------------------

    def import_chunks(self) -> ImportReport:
        """Apply every chunk not applied yet, one transaction each; bad chunks are reported
        and skipped (the next import tries them again)."""
        report = ImportReport(directory=str(self.dir.path), target=self.target)
        if not self.dir.exists():
            report.exists = False
            return report
        with locked(self.dir, required=False):
            manifest = self._read_manifest()
            listed, strangers = self._list(manifest)
            report.warnings.extend(self._manifest_problems(manifest, listed, strangers))
            held = self.store.journal.chunk_ids(self.target)
            pending = [c for c in listed if c.id not in held]
            report.chunks_already = len(listed) - len(pending)
            total = sum(c.header.counts.get("mutations", 0) for c in pending if c.header)
            with self.progress("Importing chunks", total) as advance:
                for chunk in pending:
                    self._apply(chunk, report)
                    advance(chunk.header.counts.get("mutations", 0) if chunk.header else 0)
            if manifest.state == "conflicted":
                # git stopped on it anyway: rebuilding it is the resolution (then `git add`).
                # Otherwise import leaves tracked files alone, so a pull right after an import
                # never finds local changes in the way; the next export rewrites the index.
                report.manifest_rebuilt = self._rebuild_manifest(listed)
        return report

    def _apply(self, chunk: ListedChunk, report: ImportReport) -> None:
        records: list[dict[str, Any]] | None = None
        try:
            decoded, records, skipped = self._decode(chunk)
            items: list[Any] = records if records is not None else decoded.lines
            with self.store.db.write():
                result = self.store.apply_mutations(items, source=self.target)
                self.store.journal.record_chunk(self.target, chunk.id)
        except BadChunkError as exc:
            report.failures.append(ChunkProblem(chunk.id, exc.reason))
            return
        except InvalidMutationError as exc:
            message = str(exc)
            if records is None:  # name the line of the file, counting the header as line 1
                message = _MUTATION_INDEX.sub(
                    lambda m: f"line {int(m.group(1)) + 2}: ", message, count=1
                )
            report.failures.append(ChunkProblem(chunk.id, message))
            return
        report.chunks_imported.append(chunk.id)
        report.applied.add(result)
        report.skipped_relations += skipped

    # --- status -------------------------------------------------------------------------

    def _manifest_problems(
        self, manifest: ManifestReading, listed: list[ListedChunk], strangers: list[str]
    ) -> list[ChunkProblem]:
        problems = [ChunkProblem("manifest.json", text) for text in manifest.problems]
        present = {c.id for c in listed}
        for chunk_id in sorted(set(manifest.entries) - present):
            problems.append(
                ChunkProblem(
                    chunk_id, f"listed in manifest.json but chunks/{chunk_id}.jsonl.gz is missing"
                )
            )
        problems.extend(
            ChunkProblem(name, "not a chunk file (expected <id>.jsonl.gz); ignored")
            for name in strangers
        )
        return problems

    def status(
        self, *, projects: list[str] | None = None, include_personal: bool = False
    ) -> StatusReport:
        """What the directory holds and what this store has applied or still has to export
        (read-only: nothing is written)."""
        journal = self.store.journal
        report = StatusReport(
            directory=str(self.dir.path),
            target=self.target,
            exists=self.dir.exists(),
            projects=projects,
        )
        report.pending_export = self._pending_count(projects, include_personal)
        if not report.exists:
            return report
        manifest = self._read_manifest()
        listed, strangers = self._list(manifest)
        held = journal.chunk_ids(self.target)
        report.problems = self._manifest_problems(manifest, listed, strangers)
        report.problems.extend(ChunkProblem(c.id, c.problem) for c in listed if c.problem)
        usable = [c for c in listed if c.header is not None and c.problem is None]
        report.chunks = len(listed)
        report.applied = sum(1 for c in listed if c.id in held)
        report.pending_import = [c.id for c in listed if c.id not in held]
        entries = [ManifestEntry.from_header(c.id, c.header) for c in usable if c.header]
        report.sessions = sum(e.sessions for e in entries)
        report.memories = sum(e.memories for e in entries)
        report.prompts = sum(e.prompts for e in entries)
        report.contributors = dict(sorted(Counter(e.created_by for e in entries).items()))
        report.manifest = manifest.state
        if manifest.state == "ok" and self.dir.manifest_path.read_bytes() != render_manifest(
            entries
        ):
            report.manifest = "stale"
        missing = self._missing_chunks(listed)
        if missing:
            report.problems.append(
                ChunkProblem(
                    ", ".join(sorted(missing)),
                    "recorded as held here but no longer in the directory (branch switch or "
                    "deleted file?); the next engram sync re-checks what the directory holds",
                )
            )
        return report
