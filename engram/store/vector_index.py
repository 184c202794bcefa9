"""Nearest memories by meaning: every vector in one contiguous float32 matrix, searched by brute
force (one matrix-vector product), which ``bench/semantic_bench.py`` measures at a few
milliseconds per 100,000 memories — no approximate index is needed at this scale.

The matrix is loaded on a process's first semantic search and then kept up to date by reading
only vector rows newer than the last ``seq`` it saw (vectors are never updated in place: a new
vector is a new row). A row that was deleted since (its memory changed or went) may linger in
memory, so every candidate is checked against the database — still there, same ``seq``, and
matching the search's filters — before it is returned. When more than a quarter of the rows in
memory are such leftovers, the matrix is reloaded.
"""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from engram.semantic.model import DIMENSIONS
from engram.store.vector_queue import TABLE

#: Candidates examined per round before falling back to filtering the whole matrix.
FIRST_ROUND = 200


@dataclass(slots=True)
class Neighbor:
    id: int
    similarity: float


class VectorIndex:
    """The vectors of one model, in memory."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.matrix = np.zeros((0, DIMENSIONS), dtype=np.float32)
        self.ids = np.zeros(0, dtype=np.int64)
        self.seqs = np.zeros(0, dtype=np.int64)
        self.size = 0
        self.last_seq = 0
        self.row_of: dict[int, int] = {}

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Read vector rows written since the last refresh (all of them the first time)."""
        rows = conn.execute(
            f"SELECT seq, obs_id, vector FROM {TABLE} WHERE seq > ? AND model = ? ORDER BY seq",
            (self.last_seq, self.model),
        ).fetchall()
        if not rows:
            return
        self._add(rows)
        # New rows usually replace deleted ones (an edit): reload when a quarter of the rows in
        # memory are leftovers (checked only after changes; leftovers are never returned).
        live = conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
        if self.size > 32 and live < self.size * 3 // 4:
            self.__init__(self.model)  # type: ignore[misc]
            self.refresh(conn)

    def _add(self, rows: list[Any]) -> None:
        if self.size == 0 and self._load(rows):
            return
        # A row replacing a memory's vector reuses its place: only new memories need room.
        needed = self.size + len({obs_id for _, obs_id, _ in rows if obs_id not in self.row_of})
        if needed > len(self.matrix):
            capacity = _room(needed, len(self.matrix))
            self.matrix = _grow(self.matrix, capacity)
            self.ids = _grow(self.ids, capacity)
            self.seqs = _grow(self.seqs, capacity)
        for seq, obs_id, blob in rows:
            row = self.row_of.get(obs_id)
            if row is None:
                row = self.row_of[obs_id] = self.size
                self.size += 1
            self.matrix[row] = np.frombuffer(blob, dtype="<f4", count=DIMENSIONS)
            self.ids[row] = obs_id
            self.seqs[row] = seq
            self.last_seq = max(self.last_seq, seq)

    def _load(self, rows: list[Any]) -> bool:
        """The first refresh's rows into an empty index at once, each vector's bytes copied
        straight into the matrix (a memory has one vector row, so each is a new row): at
        100,000 vectors ~50 ms instead of 135 ms row by row. False, and nothing done, when a
        vector is not :data:`DIMENSIONS` little-endian floats (the row-by-row path then
        converts or refuses it as before)."""
        width = DIMENSIONS * 4
        if not rows or sys.byteorder != "little" or any(len(r[2]) != width for r in rows):
            return False
        count = len(rows)
        matrix = np.zeros((_room(count, 0), DIMENSIONS), dtype=np.float32)
        target = matrix.reshape(-1).view(np.uint8).data
        for row, (_, _, blob) in enumerate(rows):
            target[row * width : (row + 1) * width] = blob
        self.matrix = matrix
        self.ids = _grow(np.fromiter((r[1] for r in rows), np.int64, count), len(matrix))
        self.seqs = _grow(np.fromiter((r[0] for r in rows), np.int64, count), len(matrix))
        self.row_of = dict(zip(self.ids[:count].tolist(), range(count), strict=True))
        self.size = count
        self.last_seq = int(self.seqs[:count].max())
        return True

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of ``query`` (a unit vector) to every row, in row order.

        einsum rather than ``@``: a matrix-vector product is bound by memory bandwidth, and
        BLAS's worker threads only add contention (10x slower on a busy two-core machine)."""
        scores: np.ndarray = np.einsum("ij,j->i", self.matrix[: self.size], query)
        return scores

    def nearest(
        self,
        conn: sqlite3.Connection,
        query: np.ndarray,
        k: int,
        where: str,
        params: list[Any],
    ) -> list[Neighbor]:
        """The ``k`` live memories closest to ``query`` that pass ``where`` (over ``o``)."""
        if self.size == 0 or k <= 0:
            return []
        sims = self.similarities(query)
        first = min(self.size, max(FIRST_ROUND, 4 * k))
        rows = _top(sims, first)
        found = self._check(conn, rows, sims, where, params)
        if len(found) < k and first < self.size:
            # A narrow filter (one small project, a date range): rank only the rows it allows.
            allowed = np.fromiter(
                (
                    r[0]
                    for r in conn.execute(f"SELECT o.id FROM observations o WHERE {where}", params)
                ),
                dtype=np.int64,
            )
            mask = np.isin(self.ids[: self.size], allowed)
            rows = _top(np.where(mask, sims, -np.inf), min(int(mask.sum()), max(first, 4 * k)))
            found = self._check(conn, rows, sims, where, params)
        found.sort(key=lambda n: (-n.similarity, -n.id))
        return found[:k]

    def similarity_of(
        self, conn: sqlite3.Connection, query: np.ndarray, ids: list[int]
    ) -> dict[int, float]:
        """Cosine similarity of ``query`` to these memories' current vectors (those without
        one are left out)."""
        rows = [self.row_of[i] for i in ids if i in self.row_of]
        if not rows:
            return {}
        current = self._current(conn, [int(self.ids[r]) for r in rows])
        sims = np.einsum("ij,j->i", self.matrix[rows], query)
        return {
            int(self.ids[r]): float(s)
            for r, s in zip(rows, sims, strict=True)
            if current.get(int(self.ids[r])) == int(self.seqs[r])
        }

    def _current(self, conn: sqlite3.Connection, ids: list[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" * len(part))
            out.update(
                conn.execute(f"SELECT obs_id, seq FROM {TABLE} WHERE obs_id IN ({marks})", part)
            )
        return out

    def _check(
        self,
        conn: sqlite3.Connection,
        rows: np.ndarray,
        sims: np.ndarray,
        where: str,
        params: list[Any],
    ) -> list[Neighbor]:
        """The candidate rows whose vector is still current and whose memory passes
        ``where``, with their similarity from ``sims``."""
        if len(rows) == 0:
            return []
        by_id = {int(self.ids[r]): (int(self.seqs[r]), float(sims[r])) for r in rows}
        found: list[Neighbor] = []
        ids = list(by_id)
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" * len(part))
            for obs_id, seq in conn.execute(
                f"""SELECT o.id, v.seq FROM observations o JOIN {TABLE} v ON v.obs_id = o.id
                    WHERE o.id IN ({marks}) AND {where}""",
                [*part, *params],
            ):
                held_seq, similarity = by_id[obs_id]
                if seq == held_seq:
                    found.append(Neighbor(obs_id, similarity))
        return found


def _room(needed: int, held: int) -> int:
    """Rows to allocate for ``needed`` when ``held`` are allocated: half as many again, so a
    growing index copies its matrix rarely, and never fewer than 1,024."""
    return max(needed, held * 3 // 2, 1024)


def _grow(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` highest scores, best first (finite scores only)."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    n = min(n, len(scores))
    part = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
    order = part[np.argsort(-scores[part], kind="stable")]
    best: np.ndarray = order[np.isfinite(scores[order])]
    return best
