"""Applying a sync directory's chunks to the store, within the directory's scope.

Consecutive chunks are applied in one transaction, up to a bound (:data:`GROUP_MUTATIONS`,
:data:`GROUP_SECONDS`); the ledger of applied chunks is written in the same transaction as
their rows, so a killed import loses only the group it was in and the next import applies that
group again. A bad chunk is applied (and refused) on its own, never with a group. A chunk's records are read in batches
(:mod:`engram.sync.git.reader`), judged by :func:`engram.sync.git.scope.judge`, and only the
allowed ones go to :meth:`~engram.store.Store.apply_mutations`. A chunk that turns out bad
(damaged, not matching its id, too large, an invalid line) rolls back whole and is reported by
name; one refused for its size is remembered and not read again until its file changes.

What a chunk holds back (another project's records, personal scope) is counted per chunk in
the :class:`~engram.sync.git.ledger.ChunkLedger`; when the scope later allows some of it, the
next import re-reads exactly those chunks (applying a mutation twice is a no-op). The keys a
Go-format chunk holds are recorded as it is applied, whatever the gate decides (see
:mod:`engram.sync.git.go_compat`).
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engram import collector
from engram.errors import InvalidMutationError
from engram.store.models import ApplyResult
from engram.sync.git.chunk import BadChunkError
from engram.sync.git.ledger import ChunkLedger, HeldNote
from engram.sync.git.listing import ListedChunk
from engram.sync.git.reader import ChunkReader, RecordBatch
from engram.sync.git.reports import ChunkProblem, ImportReport, held_summary
from engram.sync.git.scope import DirectoryScope, judge
from engram.sync.git.stream import ChunkTooLargeError
from engram.sync.progress import ProgressFactory

if TYPE_CHECKING:
    from engram.store import Store

_MUTATION_INDEX = re.compile(r"^mutation\[(\d+)\]: ")

#: An import commits a group of consecutive chunks at once when the group reaches this many
#: mutations or has taken this many seconds (checked between chunks), whichever comes first:
#: fewer commits write each shared page (indexes, full-text segments) to the log fewer times,
#: and another process's write waits for the lock at most about this long plus one chunk.
GROUP_MUTATIONS = 20_000
GROUP_SECONDS = 1.0


def record_keys(records: Iterable[dict[str, Any] | None]) -> Iterator[tuple[str, str]]:
    """(entity, key) of every well-formed record."""
    for record in records:
        if record is not None and isinstance(record.get("key"), str):
            yield str(record.get("entity")), record["key"]


def may_apply_now(note: HeldNote, scope: DirectoryScope) -> bool:
    """Whether records held back under ``note`` could be applied with ``scope``."""
    return scope.allows(note.project) and (not note.personal or scope.include_personal)


def _locate(exc: InvalidMutationError, batch: RecordBatch, allowed: list[int]) -> str:
    """The store's message with the position in the batch turned into the file's line."""
    message = str(exc)

    def line(match: re.Match[str]) -> str:
        index = int(match.group(1))
        number = batch.lines[allowed[index]] if index < len(allowed) else 0
        return f"line {number}: " if number else match.group(0)

    return _MUTATION_INDEX.sub(line, message, count=1)


class ChunkImporter:
    """Applies chunks of one directory to one store, within ``scope``."""

    def __init__(
        self,
        store: Store,
        target: str,
        scope: DirectoryScope,
        ledger: ChunkLedger,
        progress: ProgressFactory,
    ) -> None:
        self.store = store
        self.target = target
        self.scope = scope
        self.ledger = ledger
        self.progress = progress

    def run(self, listed: list[ListedChunk], report: ImportReport) -> None:
        """Apply every chunk not applied yet, and re-read those whose held-back records the
        scope now allows; then report what the directory still holds back."""
        present = {c.id: c for c in listed}
        notes: dict[str, list[HeldNote]] = defaultdict(list)
        for note in self.ledger.held():
            notes[note.chunk_id].append(note)
        self.ledger.forget_held(cid for cid in notes if cid not in present)
        reread = {
            cid
            for cid, held in notes.items()
            if cid in present and any(may_apply_now(n, self.scope) for n in held)
        }
        done = self.store.journal.chunk_ids(self.target)
        pending = [c for c in listed if c.id not in done]
        report.chunks_already = len(listed) - len(pending)
        work = [c for c in listed if c.id in reread or c.id not in done]
        with (
            self.progress("Importing chunks", sum(c.mutations for c in work)) as advance,
            self.store.db.bulk_writes(),
            collector.paused(),  # (engram/collector.py: ~4% of an import's CPU)
        ):
            self._groups(deque(work), report, done, advance)
        totals: Counter[tuple[str, bool]] = Counter()
        for note in self.ledger.held():
            totals[(note.project, note.personal)] += note.records
        report.held = held_summary(totals)

    def _groups(
        self,
        queue: deque[ListedChunk],
        report: ImportReport,
        done: set[str],
        advance: Callable[[int], None],
    ) -> None:
        """Apply the chunks of ``queue`` in order, consecutive ones in one transaction up to
        the group's bound; the report learns of a group's chunks once it has committed.

        A chunk that turns out bad inside a group rolls the whole group back (a savepoint
        per chunk would let it roll back alone, but SQLite then copies every page a chunk
        changes into a sub-journal: more CPU and memory than the commits it saves). The
        chunks before it are applied again as a group, and the bad one on its own, as
        before grouping; bad chunks are rare, so the work done twice is too."""
        alone = {chunk.id for chunk in queue if chunk.problem}
        advanced: set[str] = set()
        while queue:
            if queue[0].id in alone:
                chunk = queue.popleft()
                self._apply(chunk, report, again=chunk.id in done)
                if chunk.id not in advanced:
                    advance(chunk.mutations)
                continue
            group: list[tuple[ListedChunk, _Applied]] = []
            started, size = time.monotonic(), 0
            try:
                with self.store.db.write():
                    while queue and queue[0].id not in alone:
                        chunk = queue[0]
                        if group and (
                            size + chunk.mutations > GROUP_MUTATIONS
                            or time.monotonic() - started >= GROUP_SECONDS
                        ):
                            break
                        group.append((chunk, self._applied(chunk)))
                        queue.popleft()
                        size += chunk.mutations
                        if chunk.id not in advanced:
                            advanced.add(chunk.id)
                            advance(chunk.mutations)
            except (BadChunkError, ChunkTooLargeError):
                # (rolled back) queue[0] is the bad one: it goes alone, the others again.
                alone.add(queue[0].id)
                queue.extendleft(chunk for chunk, _ in reversed(group))
                continue
            for chunk, applied in group:
                applied.report(report, again=chunk.id in done)

    def apply(self, chunk: ListedChunk, report: ImportReport) -> None:
        """Apply one chunk (not applied yet) on its own."""
        self._apply(chunk, report, again=False)

    def _apply(self, chunk: ListedChunk, report: ImportReport, *, again: bool) -> None:
        """Apply one chunk in a transaction of its own; a bad one is reported, not raised."""
        if chunk.problem:
            report.failures.append(ChunkProblem(chunk.id, chunk.problem))
            return
        try:
            with self.store.db.write():
                applied = self._applied(chunk)
        except ChunkTooLargeError as exc:
            self.ledger.note_refused(chunk.id, chunk.path, exc.reason)
            report.failures.append(ChunkProblem(chunk.id, exc.reason))
            return
        except BadChunkError as exc:
            report.failures.append(ChunkProblem(chunk.id, exc.reason))
            return
        applied.report(report, again=again)

    def _applied(self, chunk: ListedChunk) -> _Applied:
        """Inside the caller's write transaction: apply ``chunk``'s allowed records, note
        what it holds back and that it is applied; raises ``BadChunkError`` or
        ``ChunkTooLargeError`` (the caller rolls back) for a bad chunk."""
        if chunk.problem:
            raise BadChunkError(chunk.id, chunk.problem)
        reader = ChunkReader(chunk.id, chunk.path, project=self.scope.repository_project)
        result = ApplyResult()
        held: Counter[tuple[str, bool]] = Counter()
        go_keys: set[tuple[str, str]] = set()
        conn = self.store.db.conn
        for batch in reader.batches():
            if reader.go_format:
                go_keys.update(record_keys(batch.records))
            verdicts = judge(conn, self.scope, batch.records)
            held.update(verdicts.held)
            allowed = verdicts.allowed
            if not allowed:
                continue
            everything = len(allowed) == len(batch.items)  # (the common case: no copy)
            items = batch.items if everything else [batch.items[i] for i in allowed]
            try:
                result.add(self.store.apply_mutations(items, source=self.target))
            except InvalidMutationError as exc:
                reason = _locate(exc, batch, verdicts.allowed)
                raise BadChunkError(chunk.id, reason) from None
        self.ledger.replace_held(chunk.id, held)
        if reader.go_format:
            self.ledger.note_go_keys(chunk.id, go_keys)
        self.store.journal.record_chunk(self.target, chunk.id)
        return _Applied(chunk.id, result, reader.skipped)


@dataclass(slots=True)
class _Applied:
    """What one applied chunk adds to the report (once its transaction has committed)."""

    chunk_id: str
    result: ApplyResult
    skipped: int

    def report(self, report: ImportReport, *, again: bool) -> None:
        (report.chunks_reread if again else report.chunks_imported).append(self.chunk_id)
        report.applied.add(self.result)
        report.skipped_relations += self.skipped
