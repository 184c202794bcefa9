"""Git sync services: export, import and status of one sync directory (``engram sync`` calls
these; so can any other face).

* **Export** writes every journal mutation of the selection that no chunk in the directory
  holds into ``log/``, in chunks of at most 4 MiB, each written atomically and only then marked
  delivered, and rewrites our index (``log/index.jsonl``). Before selecting, it reads the chunks
  it has not applied yet (a teammate's, pulled by git) and marks the mutations they share with
  the local journal as held, so a mutation that reached this machine by another route (the
  cloud) is not written into the directory a second time. It moves chunks an earlier version of
  Engram wrote into ``chunks/`` to ``log/``, takes their entries out of the Go manifest, repairs
  a Go manifest git left unreadable, and with ``--go-compat`` also writes what the Go tool's
  users lack as Go-format chunks (:mod:`engram.sync.git.go_compat`). It warns about projects
  the directory is not bound to.
* **Import** applies every chunk not applied yet (``log/``, ``chunks/``, and Go directories
  elsewhere in the repository: :mod:`engram.sync.git.nested`), one transaction per chunk,
  after checking its hash; a bad chunk is reported by name and skipped, the others still
  import. Only records of the projects the directory is bound to here are applied
  (:mod:`engram.sync.git.scope`); the rest is counted, named and applied by a later import once
  accepted (:mod:`engram.sync.git.importer`). It changes no tracked file, except a Go manifest
  that git left with conflict markers (repaired: that is the resolution).
* **Status** reports chunks, what is applied and pending, contributors, the directory's scope
  and what it holds back.
* **Bindings**: :meth:`GitSync.bind`, :meth:`GitSync.unbind`,
  :meth:`GitSync.accept_config` and :meth:`GitSync.set_go_compat` record this machine's
  decisions (:mod:`engram.bindings`).

The directory is the truth: if a chunk this machine recorded has vanished from it (a branch
switch, a deleted file), the delivery marks of this target are forgotten and rebuilt from the
chunks that are there, so nothing is silently left unexported.

Size: over 500 lines on purpose: the three services share one object's state (the directory,
the target, the lock, the scope) and the order of their steps is what keeps the invariants;
every part that stands alone lives beside it already (listing, importer, index, ledger,
go_compat, nested, reports).
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from engram.bindings import Bindings
from engram.errors import NotFoundError, ValidationError
from engram.files import fsync_directory, write_atomic
from engram.project import ConfigSuggestion, project_name, read_config_suggestion
from engram.store.journal import held_by
from engram.sync.git.chunk import MAX_CHUNK_BYTES, BadChunkError, EncodedChunk, pack_chunks
from engram.sync.git.gitdir import (
    CHUNKS,
    LOG,
    MANIFEST,
    SyncDir,
    ensure_layout,
    locked,
    refuse_symlinks,
    remove_stale_temp_files,
)
from engram.sync.git.go_compat import entry_time, select_for_go
from engram.sync.git.importer import ChunkImporter, may_apply_now, record_keys
from engram.sync.git.index import IndexEntry, render_index
from engram.sync.git.ledger import ChunkLedger
from engram.sync.git.listing import ListedChunk, list_chunks
from engram.sync.git.manifest import ManifestEntry, ManifestReading, read_manifest, render_manifest
from engram.sync.git.nested import NestedGoDir, nested_go_dirs
from engram.sync.git.reader import ChunkReader
from engram.sync.git.reports import (
    ChunkProblem,
    ExportReport,
    HeldRecords,
    ImportReport,
    ManifestChange,
    StatusReport,
    WrittenChunk,
    held_summary,
)
from engram.sync.git.scope import DirectoryScope, describe_source, directory_scope
from engram.sync.git.stream import ChunkTooLargeError, open_chunk_file
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

#: A Go manifest lists one short entry per chunk: a file larger than this is not one.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024


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

    def go_compat_enabled(self) -> bool:
        """Whether ``engram sync`` writes Go-format chunks here by default on this machine."""
        return self.bindings.get(self.dir.path).go_compat

    def set_go_compat(self, on: bool) -> bool:
        """Remember (``on``) or forget the Go-format writing for this directory on this
        machine; False when that was already the setting."""
        refuse_symlinks(self.dir)
        return self.bindings.set_go_compat(self.dir.path, on)

    # --- listing ------------------------------------------------------------------------

    def _manifests(self) -> Manifests:
        """The Go manifest of this directory and of the Go directories elsewhere in the
        repository."""
        nested = [
            (folder, _read_manifest_file(folder.sync_dir)) for folder in nested_go_dirs(self.dir)
        ]
        return Manifests(_read_manifest_file(self.dir), nested)

    def _list(self, manifests: Manifests) -> tuple[list[ListedChunk], list[str]]:
        """Every chunk file with its header, sorted by (created_at, id)."""
        return list_chunks(self.dir, manifests.known(), self.ledger, manifests.folders())

    def _rebuild_index(self, listed: Iterable[ListedChunk]) -> bool:
        """Rewrite our index from the headers of our chunks if it differs; True when written."""
        data = render_index(_index_entries(listed))
        try:
            if self.dir.index_path.read_bytes() == data:
                return False
        except FileNotFoundError:
            pass
        write_atomic(self.dir.index_path, data)
        return True

    def _missing_chunks(self, listed: list[ListedChunk]) -> set[str]:
        """Chunks recorded as held here whose files are no longer in the directory."""
        present = {c.id for c in listed}
        return self.store.journal.chunk_ids(self.target) - present

    def _move_misplaced(self, listed: list[ListedChunk]) -> list[str]:
        """Move the chunks an earlier version of Engram wrote into ``chunks/`` (the Go tool's
        folder, where they stop it) to ``log/``; returns their ids."""
        moved = []
        for chunk in listed:
            if not chunk.misplaced or chunk.problem:
                continue
            target = self.dir.log_dir / chunk.path.name
            if target.exists():
                chunk.path.unlink()
            else:
                os.replace(chunk.path, target)
            moved.append(chunk.id)
        if moved:
            fsync_directory(self.dir.log_dir)
            fsync_directory(self.dir.chunks_dir)
        return moved

    # --- the Go manifests ---------------------------------------------------------------

    def _tend_manifests(
        self,
        manifests: Manifests,
        listed: list[ListedChunk],
        change: ManifestChange,
        *,
        appended: list[ManifestEntry] = (),  # type: ignore[assignment]
        go_compat: bool = False,
        repair_only_conflicts: bool = False,
    ) -> None:
        """Write the Go manifest when (and only when) it must change: to take out entries of
        our chunks, to repair what git left unreadable, and with ``go_compat`` to append our
        Go-format chunks and list again Go chunk files a merge dropped from it."""
        top = manifests.top
        broken = not top.readable and not (repair_only_conflicts and top.state != "conflicted")
        entries = list(top.entries.values())
        if not repair_only_conflicts:
            change.removed = top.ours
            entries = [e for e in entries if not e.ours]
        if go_compat:
            listed_ids = {e.id for e in entries} | {e.id for e in appended}
            dropped = [
                c for c in listed
                if c.place == CHUNKS and c.go_format and c.problem is None and c.header
                and c.id not in listed_ids
            ]  # fmt: skip
            change.relisted = [c.id for c in dropped]
            for chunk in dropped:
                entries = relist(entries, chunk)
        change.appended = [e.id for e in appended]
        entries += appended
        if broken:
            change.repaired = top.state
        if broken or change.removed or change.relisted or change.appended:
            write_atomic(self.dir.manifest_path, render_manifest(entries, top.version))
            change.written = True
        for folder, reading in manifests.nested:
            if reading.readable or (repair_only_conflicts and reading.state != "conflicted"):
                continue
            if folder.sync_dir.manifest_path.is_symlink():
                continue  # never written through (nor over) a link; reported when read
            data = render_manifest(reading.entries.values(), reading.version)
            write_atomic(folder.sync_dir.manifest_path, data)
            change.nested_repaired.append(f"{folder.rel}/{MANIFEST}")

    # --- export -------------------------------------------------------------------------

    def export(
        self,
        *,
        projects: list[str] | None = None,
        include_personal: bool = False,
        go_compat: bool | None = None,
    ) -> ExportReport:
        """Write every mutation of the selection that no chunk here holds (``projects=None``:
        every project). Nothing new ⇒ no file. ``go_compat`` (default: this directory's
        setting here) also writes what the Go tool's users lack as Go-format chunks."""
        report = ExportReport(
            directory=str(self.dir.path),
            target=self.target,
            projects=projects,
            include_personal=include_personal,
        )
        refuse_symlinks(self.dir)
        scope = self.scope()
        report.go_compat = self.go_compat_enabled() if go_compat is None else go_compat
        if projects is not None:
            report.unbound_projects = [p for p in projects if not scope.allows(p)]
        journal = self.store.journal
        if (
            not self.dir.exists()
            and not report.go_compat
            and not self._extra_sessions(projects, include_personal)
            and not journal.pending(
                self.target, projects=projects, include_personal=include_personal, limit=1
            )
        ):
            return report  # nothing to write and nowhere yet: create nothing
        written: set[str] = set()
        with locked(self.dir):
            report.files_written = ensure_layout(self.dir)
            remove_stale_temp_files(self.dir)
            manifests = self._manifests()
            report.go_dirs = [folder.rel for folder, _ in manifests.nested]
            listed, _ = self._list(manifests)
            report.moved = self._move_misplaced(listed)
            if report.moved:
                listed, _ = self._list(manifests)
            if self._missing_chunks(listed):
                journal.forget_target(self.target)
                report.rescanned = True
            held = journal.chunk_ids(self.target)
            for chunk in listed:
                if chunk.id not in held:
                    self._index(chunk, report, scope)
            extra = self._extra_sessions(projects, include_personal)
            # Counting costs a scan of the journal: only when someone shows progress (as the
            # cloud push does); without it, an empty selection is simply an empty stream.
            total = (
                len(extra)
                + journal.count_pending(
                    self.target, projects=projects, include_personal=include_personal
                )
                if self.progress is not no_progress
                else None
            )
            if total != 0:
                batches = journal.iter_pending(
                    self.target, projects=projects, include_personal=include_personal
                )
                stream = chain(extra, chain.from_iterable(batches))
                with self.progress("Exporting mutations", total or 0) as advance:
                    for encoded, items in pack_chunks(
                        stream,
                        created_by=self.author,
                        created_at=rfc3339(),
                        limit=self.chunk_limit,
                    ):
                        report.chunks.append(self._write_chunk(encoded, items))
                        written.update(item.project for item in items if item.entity != "session")
                        advance(len(items))
                if report.chunks:
                    listed, _ = self._list(manifests)
            report.index_rebuilt = self._rebuild_index(listed)
            appended: list[ManifestEntry] = []
            if report.go_compat:
                appended = self._export_go(report, scope, listed, include_personal)
                if appended:
                    listed, _ = self._list(manifests)
            self._tend_manifests(
                manifests, listed, report.manifest, appended=appended, go_compat=report.go_compat
            )
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

    def _read_chunk(self, chunk: ListedChunk, scope: DirectoryScope) -> list[str]:
        """The mids a chunk holds (Go-format rows as this directory converts them); the keys
        of a Go-format chunk are recorded on the way."""
        if chunk.problem:
            raise BadChunkError(chunk.id, chunk.problem)
        mids: list[str] = []
        keys: set[tuple[str, str]] = set()
        reader = ChunkReader(chunk.id, chunk.path, project=scope.repository_project)
        for batch in reader.batches():
            if reader.go_format:
                keys.update(record_keys(batch.records))
            for record, line in zip(batch.records, batch.lines, strict=True):
                mid = record.get("mid") if record is not None else None
                if not isinstance(mid, str):
                    raise BadChunkError(chunk.id, f"line {line}: a mutation without a mid")
                mids.append(mid)
        if reader.go_format:
            self.ledger.note_go_keys(chunk.id, keys)
        return mids

    def _index(self, chunk: ListedChunk, report: ExportReport, scope: DirectoryScope) -> None:
        """Mark the journal rows a not-yet-applied chunk already holds as delivered here; a
        chunk whose every mutation is already known counts as applied."""
        try:
            mids = self._read_chunk(chunk, scope)
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
        path = self.dir.log_dir / f"{chunk.id}.jsonl.gz"
        if not path.exists():  # the same content was written before: it is already there
            write_atomic(path, chunk.compressed())
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
            relations=counts.get("relations", 0),
        )

    # --- Go-format chunks ---------------------------------------------------------------

    def _go_keys(self, listed: list[ListedChunk], scope: DirectoryScope) -> dict[str, set[str]]:
        """entity → keys the directory's Go-format chunks hold (chunks not read for it yet,
        e.g. applied by an earlier version, are read now)."""
        go = [c for c in listed if c.go_format and c.problem is None]
        known = self.ledger.go_chunks_read()
        for chunk in go:
            if chunk.id not in known:
                try:
                    self._read_chunk(chunk, scope)
                except BadChunkError:
                    continue  # reported by import and status; it holds nothing usable
        return dict(self.ledger.go_keys(c.id for c in go))

    def _export_go(
        self,
        report: ExportReport,
        scope: DirectoryScope,
        listed: list[ListedChunk],
        include_personal: bool,
    ) -> list[ManifestEntry]:
        """Write what no Go-format chunk here holds yet as Go-format chunks in ``chunks/``, and
        apply them here as teammates will (so every replica holds the same records)."""
        project = scope.repository_project
        if project is None:
            report.go_skipped = (
                "the repository's own project cannot be told (several candidates); accept a "
                "config.json suggestion or run engram sync from inside the repository"
            )
            return []
        report.go_project = project
        selection = select_for_go(
            self.store, project, self._go_keys(listed, scope), include_personal=include_personal
        )
        if selection.empty():
            return []
        entries = []
        self.dir.chunks_dir.mkdir(parents=True, exist_ok=True)
        for chunk in selection.chunks(self.chunk_limit):
            path = self.dir.chunks_dir / f"{chunk.id}.jsonl.gz"
            if not path.exists():
                write_atomic(path, chunk.compressed())
            report.go_chunks.append(
                WrittenChunk(
                    id=chunk.id,
                    file=str(path),
                    sessions=chunk.sessions,
                    observations=chunk.observations,
                    prompts=chunk.prompts,
                    mutations=0,
                )
            )
            entries.append(
                ManifestEntry(
                    chunk.id,
                    created_by=self.author,
                    created_at=entry_time(chunk.newest),
                    sessions=chunk.sessions,
                    memories=chunk.observations,
                    prompts=chunk.prompts,
                )
            )
        self._apply_own_go_chunks({e.id for e in entries}, scope)
        return entries

    def _apply_own_go_chunks(self, ids: set[str], scope: DirectoryScope) -> None:
        """Apply the Go-format chunks just written, as every teammate's import will."""
        listed = [
            ListedChunk(cid, self.dir.chunks_dir / f"{cid}.jsonl.gz", CHUNKS) for cid in sorted(ids)
        ]
        importer = ChunkImporter(self.store, self.target, scope, self.ledger, no_progress)
        ignored = ImportReport(directory=str(self.dir.path), target=self.target)
        for chunk in listed:
            if chunk.id not in self.store.journal.chunk_ids(self.target):
                importer.apply(chunk, ignored)

    # --- import -------------------------------------------------------------------------

    def import_chunks(self, *, include_personal: bool = False) -> ImportReport:
        """Apply every chunk not applied yet (see :mod:`engram.sync.git.importer`: a few chunks
        a transaction, each rolling back alone when it is bad), keeping to the directory's
        scope (``include_personal``: also apply personal-scope records); bad chunks are
        reported and skipped (the next import tries them again, unless refused for size)."""
        report = ImportReport(directory=str(self.dir.path), target=self.target)
        refuse_symlinks(self.dir)
        scope = self.scope(include_personal=include_personal)
        report.scope = scope.to_dict()
        # Go teammates may have synced only from subdirectories (the Go tool writes where it
        # runs): their directories are read even when this one does not exist, and then
        # nothing is created here (not even the lock file).
        nested_only = not self.dir.exists()
        if nested_only and not nested_go_dirs(self.dir):
            report.exists = False
            return report
        with contextlib.nullcontext() if nested_only else locked(self.dir, required=False):
            manifests = self._manifests()
            report.go_dirs = [folder.rel for folder, _ in manifests.nested]
            listed, strangers = self._list(manifests)
            report.warnings.extend(self._manifest_problems(manifests, listed, strangers))
            importer = ChunkImporter(self.store, self.target, scope, self.ledger, self.progress)
            importer.run(listed, report)
            # git stopped on a conflicted manifest anyway: repairing it is the resolution (then
            # `git add`). Otherwise import leaves tracked files alone, so a pull right after an
            # import never finds local changes in the way; the next export tends the rest.
            self._tend_manifests(manifests, listed, report.manifest, repair_only_conflicts=True)
        return report

    # --- status -------------------------------------------------------------------------

    def _manifest_problems(
        self, manifests: Manifests, listed: list[ListedChunk], strangers: list[str]
    ) -> list[ChunkProblem]:
        problems = [ChunkProblem(MANIFEST, text) for text in manifests.top.problems]
        for folder, reading in manifests.nested:
            where = f"{folder.rel}/{MANIFEST}"
            problems += [ChunkProblem(where, text) for text in reading.problems]
        present = {c.id for c in listed}
        for chunk_id in sorted(set(manifests.top.entries) - present):
            problems.append(
                ChunkProblem(
                    chunk_id,
                    f"listed in manifest.json but no chunk file {chunk_id}.jsonl.gz is here",
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
        with self.store.db.read() as conn:
            held, values = held_by(conn, self.target)
            return int(
                conn.execute(
                    f"""SELECT COUNT(DISTINCT o.id) FROM sync_journal j
                        JOIN observations o ON o.project = j.project AND o.sync_id = j.key
                        WHERE j.entity = 'observation' AND j.project IN ({marks})
                          AND o.deleted_at IS NULL AND {held}""",
                    [*projects, *values],
                ).fetchone()[0]
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
            go_compat=self.go_compat_enabled(),
        )
        report.pending_export = self._pending_count(projects, include_personal)
        if not report.exists and not nested_go_dirs(self.dir):
            return report
        manifests = self._manifests()
        report.go_dirs = [folder.rel for folder, _ in manifests.nested]
        listed, strangers = self._list(manifests)
        held = journal.chunk_ids(self.target)
        report.problems = self._manifest_problems(manifests, listed, strangers)
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
        headers = [c.header for c in usable if c.header is not None]
        report.sessions = sum(h.counts.get("sessions", 0) for h in headers)
        report.memories = sum(h.counts.get("observations", 0) for h in headers)
        report.prompts = sum(h.counts.get("prompts", 0) for h in headers)
        report.contributors = dict(sorted(Counter(h.created_by for h in headers).items()))
        report.project_memories = self._memories_held(projects)
        report.go_chunks = sum(1 for c in usable if c.go_format)
        report.old_layout = sum(1 for c in usable if c.misplaced)
        top = manifests.top
        report.manifest = "lists-ours" if top.readable and top.ours else top.state
        report.index = _index_state(self.dir, usable)
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


@dataclass(slots=True)
class Manifests:
    """The Go manifests a sync reads: this directory's and the nested Go directories'."""

    top: ManifestReading
    nested: list[tuple[NestedGoDir, ManifestReading]] = field(default_factory=list)

    def known(self) -> dict[str, ManifestEntry]:
        """Every entry by id (this directory's first)."""
        found = dict(self.top.entries)
        for _, reading in self.nested:
            for chunk_id, entry in reading.entries.items():
                found.setdefault(chunk_id, entry)
        return found

    def folders(self) -> list[NestedGoDir]:
        return [folder for folder, _ in self.nested]


def relist(entries: list[ManifestEntry], chunk: ListedChunk) -> list[ManifestEntry]:
    """``entries`` with a Go chunk file that a merge dropped from the manifest listed again.

    The Go tool imports in manifest order (a chunk may name sessions an earlier one holds), so
    the entry goes where its time puts it: before the first entry written after its newest
    row. Its author is unknown (the file does not say); its time is that newest row's, which
    also keeps the Go tool's watermark from passing rows it has not exported."""
    assert chunk.header is not None
    counts = chunk.header.counts
    entry = ManifestEntry(
        chunk.id,
        created_by="unknown",
        created_at=chunk.header.created_at,
        sessions=counts.get("sessions", 0),
        memories=counts.get("observations", 0),
        prompts=counts.get("prompts", 0),
    )
    if not entry.created_at:
        return [*entries, entry]
    at = next((i for i, e in enumerate(entries) if e.created_at > entry.created_at), len(entries))
    return [*entries[:at], entry, *entries[at:]]


def _read_manifest_file(sync_dir: SyncDir) -> ManifestReading:
    """A Go manifest, read without following a link and with a size cap."""
    path = sync_dir.manifest_path
    if path.is_symlink():
        return ManifestReading("invalid", problems=["is a symbolic link; refused"])
    try:
        with open_chunk_file(path) as handle:
            raw = handle.read(MAX_MANIFEST_BYTES + 1)
    except BadChunkError as exc:
        if path.exists():
            return ManifestReading("invalid", problems=[exc.reason])
        return read_manifest(None)
    if len(raw) > MAX_MANIFEST_BYTES:
        return ManifestReading(
            "invalid",
            problems=[f"is larger than {MAX_MANIFEST_BYTES} bytes; ignored"],
        )
    return read_manifest(raw)


def _index_entries(listed: Iterable[ListedChunk]) -> list[IndexEntry]:
    """Our chunks in ``log/`` (the index lists nothing else)."""
    return [
        IndexEntry.from_header(c.id, c.header)
        for c in listed
        if c.header is not None and c.problem is None and c.place == LOG and not c.go_format
    ]


def _index_state(sync_dir: SyncDir, usable: list[ListedChunk]) -> str:
    try:
        raw = sync_dir.index_path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return "missing" if _index_entries(usable) else "ok"
    return "ok" if raw == render_index(_index_entries(usable)) else "stale"
