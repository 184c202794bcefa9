"""Hybrid search embeds the question in a thread beside its lexical half: what either side
raises reaches the caller, and the thread is done before the search goes on."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engram.store import Store
from engram.store.hybrid import _beside
from tests.support.semantic import MEMORIES, needs_model, save


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


@needs_model
@pytest.mark.parametrize(
    "question",
    [
        'NEAR("session" ttl) OR title:* AND "unclosed',  # FTS syntax is searched for, not run
        "how do we keep people logged in? " * 2000,  # ~14,000 words: far larger than it looks
        "\x00 session \ufffd ttl \u202e",  # a NUL, a replacement and a direction mark
    ],
)
def test_hostile_questions_through_both_halves(store: Store, question: str) -> None:
    oid = save(store, *MEMORIES[0])
    save(store, *MEMORIES[1])
    store.vectorize()
    for match_mode in ("any", "all"):
        found = store.search(question, mode="hybrid", match_mode=match_mode)
        assert all(o.found_by for o in found)
    found = store.search(question, mode="hybrid")
    if "logged in" in question:
        assert found and found[0].id == oid  # the meaning still counts
    assert not [t for t in threading.enumerate() if t.name == "engram-question"]


@needs_model
def test_an_edited_memory_is_found_by_its_new_meaning_only(store: Store) -> None:
    """The question's embedding and the word ranking run at once: neither sees replaced text."""
    oid = save(store, *MEMORIES[0])
    store.vectorize()
    store.update_observation(oid, title="Docker cache pruned", content="**What**: buildx prune.")
    assert oid not in [o.id for o in store.search("how long do logins last?", mode="hybrid")]
    found = store.search("ci runner out of disk space", mode="hybrid")
    assert found and found[0].id == oid
