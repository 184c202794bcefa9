"""The in-memory matrix of vectors (engram/store/vector_index.py): rows added after a refresh,
a memory's new vector taking its old vector's place."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_the_first_load_copies_vectors_at_once_as_row_by_row_would() -> None:
    """Issue 18: a process's first semantic search loads every vector (100,000: 135 ms row by
    row, 50 ms copied at once); both ways give the same matrix, ids, seqs and places."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((1500, DIMENSIONS)).astype("<f4")
    ids = rng.permutation(np.arange(10, 5000))[:1500]
    rows = [(3 * n + 1, int(i), vectors[n].tobytes()) for n, i in enumerate(ids)]
    at_once, row_by_row = VectorIndex("model"), VectorIndex("model")
    at_once._add(rows)
    row_by_row._add(rows[:1])  # not empty any more: the rest goes row by row
    row_by_row._add(rows[1:])
    assert at_once.size == row_by_row.size == 1500
    assert np.array_equal(at_once.matrix[:1500], row_by_row.matrix[:1500])
    assert np.array_equal(at_once.matrix[:1500], vectors)
    assert np.array_equal(at_once.ids[:1500], row_by_row.ids[:1500])
    assert np.array_equal(at_once.seqs[:1500], row_by_row.seqs[:1500])
    assert at_once.row_of == row_by_row.row_of and at_once.last_seq == 3 * 1499 + 1


def test_a_damaged_vector_is_refused_as_before() -> None:
    """A vector row of the wrong length is never copied in with its neighbours shifted: the
    first load leaves it to the row-by-row path, which refuses it."""
    good = np.ones(DIMENSIONS, dtype="<f4").tobytes()
    index = VectorIndex("model")
    with pytest.raises(ValueError):
        index._add([(1, 1, good), (2, 2, good[:-4]), (3, 3, good)])
