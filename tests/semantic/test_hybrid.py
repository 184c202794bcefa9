"""Hybrid search embeds the question in a thread beside its lexical half: what either side
raises reaches the caller, and the thread is done before the search goes on."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engram.store.hybrid import _beside


def test_both_sides_run_and_their_results_come_back() -> None:
    threads: list[str] = []

    def embed() -> np.ndarray:
        threads.append(threading.current_thread().name)
        return np.ones(3, dtype=np.float32)

    vector, words = _beside(embed, lambda: ["lexical"])
    assert vector.tolist() == [1.0, 1.0, 1.0] and words == ["lexical"]
    assert threads == ["engram-question"]  # (the lexical half runs in the caller's thread)


def test_a_failing_embedding_is_raised_after_the_lexical_half() -> None:
    ran: list[str] = []

    def embed() -> np.ndarray:
        raise RuntimeError("the model broke")

    with pytest.raises(RuntimeError, match="the model broke"):
        _beside(embed, lambda: ran.append("lexical"))
    assert ran == ["lexical"]


def test_a_failing_lexical_half_waits_for_the_embedding() -> None:
    finished = threading.Event()

    def embed() -> np.ndarray:
        finished.wait(0.05)
        finished.set()
        return np.zeros(3, dtype=np.float32)

    def work() -> list[str]:
        raise ValueError("bad query")

    with pytest.raises(ValueError, match="bad query"):
        _beside(embed, work)
    assert finished.is_set()  # no thread left running behind the error
    assert not [t for t in threading.enumerate() if t.name == "engram-question"]
