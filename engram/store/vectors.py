"""The vector index: one embedding per live memory, derived data like the FTS index.

* **Off the save path.** No write ever runs the model. Writes only *forget* vectors: every
  change to a memory's indexed text (edit, soft or hard delete, a move, a rebuilt index) deletes
  its vector in the same transaction (:func:`engram.store.vector_queue.forget`, called from :mod:`engram.store.fts`), so
  no vector of replaced or deleted text outlives the change. :meth:`VectorsMixin.vectorize`
  fills in what is missing: ``engram vectorize`` in bulk, the background vectorizer of the
  long-running processes (``engram mcp``, ``engram serve``) after each write, and a semantic
  search for a few memories before it runs.
* **Never synced.** Each machine embeds its own memories (exports and the journal never
  mention vectors).
* A vector is written only if its memory's text is still exactly what was embedded (the model
  runs outside any transaction, and the memory may change meanwhile).

This module does not import numpy (the store imports it on every path); vectors arrive as
float32 bytes from :mod:`engram.semantic.model` and are read back by
:mod:`engram.store.vector_index`.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from engram.errors import StoreUnavailableError
from engram.project import project_name
from engram.store.base import StoreBase
from engram.store.vector_queue import PENDING, QUEUE, TABLE, chunks

if TYPE_CHECKING:
    from engram.semantic.model import Embedder
    from engram.sync.progress import ProgressFactory


#: Memories embedded per write transaction in bulk runs (a transaction per batch keeps other
#: writers waiting at most one batch).
WRITE_BATCH = 64
#: The vectors another model made (``?1``: the installed model). Not ``model != ?``: for that
#: SQLite reads the whole model index, before every semantic search (2.6 ms at 100,000
#: vectors); the two ranges are two seeks.
_OTHER_MODEL = f"FROM {TABLE} WHERE model < ?1 OR model > ?1"
#: Queue rows of memories deleted since they were queued (a change queues its memory before it
#: knows whether the memory stays). Reads the whole queue: full runs only.
_DROP_DELETED = (
    f"DELETE FROM {PENDING} WHERE obs_id NOT IN"
    " (SELECT id FROM observations WHERE deleted_at IS NULL)"
)


def embedding_text(title: str, content: str) -> str:
    """What a memory's vector is made from: its title and content."""
    return f"{title}\n{content}"


def _digest(title: str, content: str) -> bytes:
    return hashlib.blake2b(embedding_text(title, content).encode(), digest_size=16).digest()


@dataclass(slots=True)
class VectorCoverage:
    """How many live memories have an up-to-date vector."""

    memories: int
    vectorized: int
    available: bool  # whether the semantic extra is installed (nothing is embedded without it)

    @property
    def missing(self) -> int:
        return max(0, self.memories - self.vectorized)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "missing": self.missing}


@dataclass(slots=True)
class VectorizeResult:
    """What one vectorize run did."""

    embedded: int
    skipped: int  # changed while being embedded: still queued, picked up next time
    remaining: int  # live memories still waiting for a vector (a run with a limit stops early)
    seconds: float
    model: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class VectorsMixin(StoreBase):
    def vector_coverage(self, project: str | None = None) -> VectorCoverage:
        """Live memories and how many of them have a vector of the installed model (without
        the extra, which ``available`` says: how many have any vector)."""
        from engram import semantic

        available = semantic.available()
        model = semantic.model_id() if available else None
        where, params = _live(project)
        with self.db.read() as conn:
            memories = conn.execute(
                f"SELECT COUNT(*) FROM observations o WHERE {where}", params
            ).fetchone()[0]
            vectorized = conn.execute(
                f"""SELECT COUNT(*) FROM observations o JOIN {TABLE} v ON v.obs_id = o.id
                    WHERE {where} {"AND v.model = ?" if model else ""}""",
                [*params, *([model] if model else [])],
            ).fetchone()[0]
        return VectorCoverage(memories, vectorized, available)

    def vectors_pending(self) -> bool:
        """Whether any memory waits for a vector: queued, or inserted since the queue's mark
        (cheap: an indexed row or two; a vectorize run then moves the mark)."""
        return bool(self.db.scalar(QUEUE.waiting))

    def vectorize(
        self,
        *,
        project: str | None = None,
        rebuild: bool = False,
        limit: int | None = None,
        progress: ProgressFactory | None = None,
        embedder: Embedder | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> VectorizeResult:
        """Embed the live memories waiting for a vector (``rebuild``: every live memory,
        replacing its vector), at most ``limit``, the newest first (behind a backlog, what was
        just saved is what a search is likeliest to look for); only those of ``project`` if
        given.

        Needs the semantic extra (:class:`engram.errors.FeatureUnavailableError` without it).
        ``progress(label, total)`` is the CLI's bar; ``should_stop()`` lets a background
        thread give up between batches.
        """
        from engram import semantic

        semantic.require()
        started = time.perf_counter()
        model = embedder.model_id if embedder is not None else semantic.model_id()
        embedded, skipped = self._embed_waiting(
            model,
            project=project,
            rebuild=rebuild,
            limit=limit,
            progress=progress,
            embedder=embedder,
            should_stop=should_stop,
        )
        remaining = self._waiting(project)
        return VectorizeResult(
            embedded, skipped, remaining, round(time.perf_counter() - started, 3), model
        )

    def _embed_waiting(
        self,
        model: str,
        *,
        project: str | None,
        rebuild: bool,
        limit: int | None,
        progress: ProgressFactory | None = None,
        embedder: Embedder | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> tuple[int, int]:
        """:meth:`vectorize`'s work: embed up to ``limit`` waiting memories, the newest first;
        returns (embedded, skipped). With a ``limit`` it reads no more of the queue than it
        embeds: behind a backlog of 100,000, counting the queue and clearing it of deleted
        memories took a search's catch-up 60 ms."""
        self._queue_outdated(model, project, rebuild)
        if self.vectors_pending():
            with self.db.write() as conn:  # new memories join the queue
                QUEUE.take_new(conn)
                if limit is None:  # deleted memories leave it (a bounded run drops those it meets)
                    conn.execute(_DROP_DELETED)
        total = self._waiting(project, at_most=limit)
        if limit is not None:
            total = min(total, max(0, int(limit)))  # (each of its two counts is bounded alone)
        if not total:
            if limit and self.vectors_pending():
                # Nothing live waits: what the queue still holds are deleted memories.
                with self.db.write() as conn:
                    conn.execute(_DROP_DELETED)
            return 0, 0
        if embedder is None:
            # Only now numpy, ONNX Runtime and the model: a run with nothing to do is instant.
            from engram.semantic.model import default_threads, shared_embedder

            embedder = shared_embedder(default_threads())
        embedded = skipped = 0
        bar = progress("Vectorizing memories", total) if progress else nullcontext()
        with bar as advance:
            for rows in self._pending_batches(project, total):
                if should_stop is not None and should_stop():
                    break
                vectors = embedder.embed([embedding_text(r["title"], r["content"]) for r in rows])
                wrote = self._store_vectors(model, rows, vectors)
                embedded += wrote
                skipped += len(rows) - wrote
                if advance is not None:
                    advance(len(rows))
        return embedded, skipped

    def _waiting(self, project: str | None, at_most: int | None = None) -> int:
        """Live memories in the queue or saved since its mark, counting no further than
        ``at_most`` when given (cheap: the queue is short once vectors exist, and the memories
        above the mark are the newest)."""
        where, params = _live(project)
        bound = "" if at_most is None else f" LIMIT {max(0, int(at_most))}"
        return int(
            self.db.scalar(
                f"""SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {PENDING} p JOIN observations o
                                ON o.id = p.obs_id WHERE {where}{bound}))
                         + (SELECT COUNT(*) FROM (SELECT 1 {QUEUE.waiting_above(where)}{bound}))""",
                [*params, *params],
            )
            or 0
        )

    def _queue_outdated(self, model: str, project: str | None, rebuild: bool) -> None:
        """Queue every live memory (``rebuild``) or those whose vector another model made."""
        outdated = self._outdated_vectors(model)
        if not rebuild and not outdated:
            return
        where, params = _live(project)
        with self.db.write() as conn:
            if outdated:
                conn.execute(
                    f"INSERT OR IGNORE INTO {PENDING}(obs_id) SELECT obs_id {_OTHER_MODEL}",
                    (model,),
                )
            if rebuild:
                conn.execute(
                    f"INSERT OR IGNORE INTO {PENDING}(obs_id)"
                    f" SELECT o.id FROM observations o WHERE {where}",
                    params,
                )

    def _pending_batches(self, project: str | None, total: int) -> Iterator[list[sqlite3.Row]]:
        """Queued live memories, the newest first, :data:`WRITE_BATCH` at a time, ``total`` in
        all. Queued ids of deleted memories are dropped from the queue on the way."""
        before, left = 2**63 - 1, total  # (SQLite's largest rowid)
        while left > 0:
            rows = self.db.rows(
                f"""SELECT p.obs_id AS id, o.title, o.content, o.deleted_at, o.project
                    FROM {PENDING} p LEFT JOIN observations o ON o.id = p.obs_id
                    WHERE p.obs_id < ? ORDER BY p.obs_id DESC LIMIT ?""",
                [before, WRITE_BATCH],
            )
            if not rows:
                return
            before = rows[-1]["id"]
            gone = [r["id"] for r in rows if r["title"] is None or r["deleted_at"] is not None]
            if gone:
                with self.db.write() as conn:
                    for part in chunks(gone):
                        conn.execute(
                            f"DELETE FROM {PENDING} WHERE obs_id IN ({', '.join('?' * len(part))})"
                            " AND obs_id NOT IN (SELECT id FROM observations"
                            " WHERE deleted_at IS NULL)",
                            part,
                        )
            wanted = project_name(project) if project else None
            live = [
                r
                for r in rows
                if r["title"] is not None
                and r["deleted_at"] is None
                and (wanted is None or r["project"] == wanted)
            ][:left]
            if live:
                left -= len(live)
                yield live

    def _store_vectors(self, model: str, rows: list[sqlite3.Row], vectors: Any) -> int:
        """Write the vectors whose memory still has the embedded text and leave the queue;
        returns how many. A memory edited meanwhile stays queued."""
        embedded = {r["id"]: _digest(r["title"], r["content"]) for r in rows}
        wrote = 0
        with self.db.write() as conn:
            marks = ", ".join("?" * len(embedded))
            current = {
                r[0]: _digest(r[1], r[2])
                for r in conn.execute(
                    f"""SELECT id, title, content FROM observations
                        WHERE id IN ({marks}) AND deleted_at IS NULL""",
                    list(embedded),
                )
            }
            for row, vector in zip(rows, vectors, strict=True):
                oid = row["id"]
                if current.get(oid) != embedded[oid]:
                    continue  # edited or deleted meanwhile: this vector would describe old text
                conn.execute(
                    f"INSERT OR REPLACE INTO {TABLE}(obs_id, model, vector) VALUES (?, ?, ?)",
                    (oid, model, vector.astype("<f4").tobytes()),
                )
                conn.execute(f"DELETE FROM {PENDING} WHERE obs_id = ?", (oid,))
                wrote += 1
        return wrote

    def catch_up_vectors(self, limit: int) -> None:
        """Embed up to ``limit`` waiting memories (the newest) before a semantic search, so a
        memory just saved is found by its meaning even behind a backlog. A locked or read-only
        database is not an error here: the search uses the vectors there are."""
        from engram.semantic import model_id

        model = model_id()
        if not self.vectors_pending() and not self._outdated_vectors(model):
            return
        try:
            self._embed_waiting(model, project=None, rebuild=False, limit=limit)
        except StoreUnavailableError:
            return

    def _outdated_vectors(self, model: str) -> bool:
        """Whether any vector was made by another model than ``model``."""
        return self.db.one(f"SELECT 1 {_OTHER_MODEL} LIMIT 1", (model,)) is not None


def _live(project: str | None) -> tuple[str, list[Any]]:
    if project:
        return "o.deleted_at IS NULL AND o.project = ?", [project_name(project)]
    return "o.deleted_at IS NULL", []
