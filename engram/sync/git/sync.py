"""Git sync services: export, import and status of one sync directory (``engram sync`` calls
these; so can any other face).

* **Export** writes every journal mutation of the selection that no chunk in the directory
  holds, in chunks of at most 4 MiB, each written atomically and only then marked delivered.
  Before selecting, it reads the chunks it has not applied yet (a teammate's, pulled by git) and
  marks the mutations they share with the local journal as held, so a mutation that reached this
  machine by another route (the cloud) is not written into the directory a second time.
* **Import** applies every chunk not applied yet, one transaction per chunk, after checking its
  hash; a bad chunk is reported by name and skipped, the others still import. Only records of
  the projects the directory is bound to here are applied (:mod:`engram.sync.git.scope`);
  the rest is counted, named and applied by a later import once accepted
  (:mod:`engram.sync.git.importer`). It changes no tracked file, except a manifest that git
  left with conflict markers (rebuilt: that is the resolution). Export rebuilds the manifest
  every time, and warns about projects the directory is not bound to.
* **Status** reports chunks, what is applied and pending, contributors, the directory's scope
  and what it holds back.
* **Bindings**: :meth:`GitSync.bind`, :meth:`GitSync.unbind` and
  :meth:`GitSync.accept_config` record this machine's decisions (:mod:`engram.bindings`).

The directory is the truth: if a chunk this machine recorded has vanished from it (a branch
switch, a deleted file), the delivery marks of this target are forgotten and rebuilt from the
chunks that are there, so nothing is silently left unexported.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterable
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from engram.bindings import Bindings
from engram.errors import NotFoundError, ValidationError
from engram.files import write_atomic
from engram.project import ConfigSuggestion, project_name, read_config_suggestion
from engram.sync.git.chunk import MAX_CHUNK_BYTES, BadChunkError, EncodedChunk, pack_chunks
from engram.sync.git.gitdir import (
    SyncDir,
    ensure_layout,
    locked,
    refuse_symlinks,
    remove_stale_temp_files,
)
from engram.sync.git.importer import ChunkImporter, may_apply_now
from engram.sync.git.ledger import ChunkLedger
from engram.sync.git.listing import ListedChunk, list_chunks
from engram.sync.git.manifest import ManifestEntry, ManifestReading, read_manifest, render_manifest
from engram.sync.git.reader import ChunkReader
from engram.sync.git.reports import (
    ChunkProblem,
    ExportReport,
    HeldRecords,
    ImportReport,
    StatusReport,
    WrittenChunk,
    held_summary,
)
from engram.sync.git.scope import DirectoryScope, describe_source, directory_scope
from engram.sync.git.stream import ChunkTooLargeError
from engram.sync.progress import ProgressFactory, default_author, no_progress
from engram.times import rfc3339

if TYPE_CHECKING:
    from engram.store import Store
    from engram.store.journal import JournalEntry

__all__ = [
    "ChunkProblem",
    "ExportReport",
    "GitSync",
    "HeldRecords",
    "ImportReport",
    "StatusReport",
    "WrittenChunk",
]

#: Test-only seam: ``mid-chunk`` pauses an export half-way through writing a chunk file,
#: ``after-chunk`` right after a chunk is renamed into place but before it is marked delivered.
#: The crash tests kill the paused process with SIGKILL. Never set it in real use.
TEST_PAUSE_ENV = "ENGRAM_TEST_PAUSE_EXPORT"


def _test_pause(point: str) -> None:
    if os.environ.get(TEST_PAUSE_ENV) != point:
        return
    sys.stderr.write(f"engram: test pause at {point}\n")
    sys.stderr.flush()
    time.sleep(60)


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
        bindings: Bindings | None = None,
    ) -> None:
        self.store = store
        self.chunk_limit = chunk_limit
        self.dir = sync_dir
        self.target = sync_dir.target
        self.progress = progress
        self.author = author or default_author()
        #: This machine's decisions; beside the store's database (the data directory).
        self.bindings = bindings or Bindings(store.db.path.parent)
        self.ledger = ChunkLedger(store.db, self.target)

    # --- scope and bindings -----------------------------------------------------------------

    def scope(self, *, include_personal: bool = False) -> DirectoryScope:
        """What this directory may write here (see :mod:`engram.sync.git.scope`)."""
        return directory_scope(self.dir, self.bindings, include_personal=include_personal)

    def bind(self, project: str) -> bool:
        """Let this directory's chunks write ``project`` here; False if they already could.
        The next import applies the records it held back for that project."""
        name = project_name(project)
        if not name:
            raise ValidationError("a project name is required: engram sync --bind NAME")
        refuse_symlinks(self.dir)
        return self.bindings.bind(self.dir.path, name)

    def unbind(self, project: str) -> bool:
        """Withdraw a binding made with :meth:`bind` (or an accepted config suggestion)."""
        name = project_name(project)
        scope = self.scope()
        if name and name == scope.detected and name not in scope.bound:
            raise ValidationError(
                f'"{name}" is this repository\'s own project '
                f"({describe_source(scope.detected_source)}); it stays bound"
            )
        return self.bindings.unbind(self.dir.path, name)

    def accept_config(self, engram_dir: Path | None = None) -> ConfigSuggestion:
        """Accept the project named by ``engram_dir/config.json`` (default: this directory's)
        as this machine's choice: saves made there, and this directory's imports and exports,
        use it from now on. Accepting covers that exact name only."""
        folder = engram_dir or self.dir.path
        if engram_dir is None:
            refuse_symlinks(self.dir)
        suggestion = read_config_suggestion(folder)
        if suggestion is None:
            raise NotFoundError(
                f"no project suggestion to accept: {folder / 'config.json'} is missing, not a "
                'regular file, or has no "project_name"'
            )
        self.bindings.accept_config(folder, suggestion.project)
        return suggestion

    # --- listing ------------------------------------------------------------------------

    def _read_manifest(self) -> ManifestReading:
        try:
            raw = self.dir.manifest_path.read_bytes()
        except FileNotFoundError:
            raw = None
        return read_manifest(raw)

    def _list(self, manifest: ManifestReading) -> tuple[list[ListedChunk], list[str]]:
        """Every chunk file in the directory with its header, sorted by (created_at, id)."""
        return list_chunks(self.dir, manifest, self.ledger)

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
        refuse_symlinks(self.dir)
        scope = self.scope()
        if projects is not None:
            report.unbound_projects = [p for p in projects if not scope.allows(p)]
        journal = self.store.journal
        if not self.dir.exists() and not self._pending_count(projects, include_personal):
            return report  # nothing to write and nowhere yet: create nothing
        written: set[str] = set()
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
                    self._index(chunk, report, scope)
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
                        written.update(item.project for item in items if item.entity != "session")
                        advance(len(items))
                listed, _ = self._list(manifest)
            report.manifest_rebuilt = self._rebuild_manifest(listed)
        if projects is None:
            report.unbound_projects = sorted(p for p in written if not scope.allows(p))
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

    def _mids(self, chunk: ListedChunk, scope: DirectoryScope) -> list[str]:
        """The mids a chunk holds (Go-format rows as this directory converts them)."""
        if chunk.problem:
            raise BadChunkError(chunk.id, chunk.problem)
        mids: list[str] = []
        reader = ChunkReader(chunk.id, chunk.path, project=scope.repository_project)
        for batch in reader.batches():
            for record, line in zip(batch.records, batch.lines, strict=True):
                mid = record.get("mid") if record is not None else None
                if not isinstance(mid, str):
                    raise BadChunkError(chunk.id, f"line {line}: a mutation without a mid")
                mids.append(mid)
        return mids

    def _index(self, chunk: ListedChunk, report: ExportReport, scope: DirectoryScope) -> None:
        """Mark the journal rows a not-yet-applied chunk already holds as delivered here; a
        chunk whose every mutation is already known counts as applied."""
        try:
            mids = self._mids(chunk, scope)
        except ChunkTooLargeError as exc:
            self.ledger.note_refused(chunk.id, chunk.path, exc.reason)
            report.problems.append(ChunkProblem(chunk.id, exc.reason))
            return
        except BadChunkError as exc:
            report.problems.append(ChunkProblem(chunk.id, exc.reason))
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

    def import_chunks(self, *, include_personal: bool = False) -> ImportReport:
        """Apply every chunk not applied yet, one transaction each, keeping to the directory's
        scope (``include_personal``: also apply personal-scope records); bad chunks are
        reported and skipped (the next import tries them again, unless refused for size)."""
        report = ImportReport(directory=str(self.dir.path), target=self.target)
        refuse_symlinks(self.dir)
        scope = self.scope(include_personal=include_personal)
        report.scope = scope.to_dict()
        if not self.dir.exists():
            report.exists = False
            return report
        with locked(self.dir, required=False):
            manifest = self._read_manifest()
            listed, strangers = self._list(manifest)
            report.warnings.extend(self._manifest_problems(manifest, listed, strangers))
            importer = ChunkImporter(self.store, self.target, scope, self.ledger, self.progress)
            importer.run(listed, report)
            if manifest.state == "conflicted":
                # git stopped on it anyway: rebuilding it is the resolution (then `git add`).
                # Otherwise import leaves tracked files alone, so a pull right after an import
                # never finds local changes in the way; the next export rewrites the index.
                report.manifest_rebuilt = self._rebuild_manifest(listed)
        return report

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

    def held(self) -> list[HeldRecords]:
        """What the directory's chunks hold that this store has not applied, by project (as
        of the last import)."""
        counts: Counter[tuple[str, bool]] = Counter()
        for note in self.ledger.held():
            counts[(note.project, note.personal)] += note.records
        return held_summary(counts)

    def _memories_held(self, projects: list[str] | None) -> int | None:
        """The live memories of ``projects`` whose mutations this directory holds (exported
        there or applied from there): chunk headers count every project's, so the selected
        project's are counted from the journal's deliveries to this target."""
        if projects is None:
            return None
        marks = ", ".join("?" for _ in projects)
        return int(
            self.store.db.scalar(
                f"""SELECT COUNT(DISTINCT o.id) FROM sync_journal j
                    JOIN sync_delivery d ON d.seq = j.seq AND d.target = ?
                    JOIN observations o ON o.project = j.project AND o.sync_id = j.key
                    WHERE j.entity = 'observation' AND j.project IN ({marks})
                      AND o.deleted_at IS NULL""",
                [self.target, *projects],
            )
            or 0
        )

    def status(
        self, *, projects: list[str] | None = None, include_personal: bool = False
    ) -> StatusReport:
        """What the directory holds and what this store has applied or still has to export
        (read-only: nothing is written to the directory)."""
        journal = self.store.journal
        refuse_symlinks(self.dir)
        scope = self.scope(include_personal=include_personal)
        report = StatusReport(
            directory=str(self.dir.path),
            target=self.target,
            exists=self.dir.exists(),
            projects=projects,
            scope=scope.to_dict(),
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
        present = {c.id for c in listed}
        notes = [n for n in self.ledger.held() if n.chunk_id in present]
        waiting = {n.chunk_id for n in notes if may_apply_now(n, scope)}
        report.pending_import += sorted(waiting - set(report.pending_import))
        report.held = self.held()
        entries = [ManifestEntry.from_header(c.id, c.header) for c in usable if c.header]
        report.sessions = sum(e.sessions for e in entries)
        report.memories = sum(e.memories for e in entries)
        report.prompts = sum(e.prompts for e in entries)
        report.contributors = dict(sorted(Counter(e.created_by for e in entries).items()))
        report.project_memories = self._memories_held(projects)
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
