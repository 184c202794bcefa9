"""The in-memory matrix of vectors (engram/store/vector_index.py): rows added after a refresh,
a memory's new vector taking its old vector's place."""

from __future__ import annotations

import numpy as np

from engram.semantic.model import DIMENSIONS
from engram.store.vector_index import VectorIndex


def _rows(ids: range, start_seq: int, value: float) -> list[tuple[int, int, bytes]]:
    vector = np.full(DIMENSIONS, value, dtype="<f4").tobytes()
    return [(start_seq + n, obs_id, vector) for n, obs_id in enumerate(ids)]


def test_a_replaced_vector_takes_its_old_place_without_growing_the_matrix() -> None:
    """Issue 18: a full matrix grew by half (a copy of every vector: 40 ms and 77 MB more at
    100,000 memories) when a search's catch-up replaced four vectors."""
    index = VectorIndex("model")
    index._add(_rows(range(1, 1025), 1, 0.5))
    capacity = len(index.matrix)
    assert index.size == capacity == 1024
    index._add(_rows(range(1, 5), 2000, 0.25))
    assert len(index.matrix) == capacity and index.size == 1024
    assert index.matrix[index.row_of[3]][0] == np.float32(0.25)
    assert index.seqs[index.row_of[3]] == 2002 and index.last_seq == 2003
    index._add(_rows(range(1025, 1027), 3000, 1.0))  # new memories do need room
    assert index.size == 1026 and len(index.matrix) > capacity
