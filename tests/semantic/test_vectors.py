"""Vectors are derived data: computed off the save path with the real model, forgotten in the
same transaction as any change to their memory's text, never left describing old text."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engram import semantic
from engram.cli.main import main
from engram.semantic import model
from engram.semantic.model import Embedder, shared_embedder
from engram.settings import Config
from engram.store import Store
from engram.store.vectors import PENDING, TABLE, embedding_text
from tests.store.replicas import exchange
from tests.support.semantic import MEMORIES, needs_model, save

pytestmark = needs_model


def test_a_quick_start_embedder_gives_the_same_vectors() -> None:
    """``engram search`` loads the model without graph optimizations (it starts ~0.1 s
    sooner): the vectors must be the ones every other process makes."""
    texts = [embedding_text(*m) for m in MEMORIES] + ["how do we keep people logged in?", ""]
    quick = Embedder(quick_start=True).embed(texts)
    assert np.allclose(quick, shared_embedder().embed(texts), atol=1e-5)


def test_engram_search_loads_the_model_for_a_quick_start(
    data_dir, default_mode: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's one-shot search asks for the quick start; a store opened by any other
    process (a server, a bulk run) keeps the optimized model."""
    monkeypatch.setattr(model, "_shared", {})
    monkeypatch.setattr(semantic, "one_shot", False)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(data_dir))
    with Store.open(config=Config(data_dir=data_dir)) as store:
        save(store, *MEMORIES[0])
        store.search("how do we keep people logged in?")
    assert [e.quick_start for e in model._shared.values()] == [False]
    model._shared.clear()
    assert main(["search", "how do we keep people logged in?", "--json"]) == 0
    assert [e.quick_start for e in model._shared.values()] == [True]


def _vector_count(store: Store) -> int:
    return int(store.db.scalar(f"SELECT COUNT(*) FROM {TABLE}") or 0)


def _semantic_ids(store: Store, query: str, **filters) -> list[int]:
    return [o.id for o in store.search(query, mode="semantic", **filters)]


def test_the_model_gives_unit_vectors_that_know_paraphrases() -> None:
    embedder = shared_embedder()
    vectors = embedder.embed(
        ["how do we keep people logged in?", MEMORIES[0][0], MEMORIES[1][0], ""]
    )
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    question, session, docker, _ = vectors
    assert question @ session > question @ docker + 0.15
    assert embedder.embed([]).shape == (0, 384)


def test_saving_queues_a_memory_and_vectorize_embeds_it(store: Store) -> None:
    ids = [save(store, title, content) for title, content in MEMORIES]
    coverage = store.vector_coverage()
    assert (coverage.memories, coverage.vectorized, coverage.missing) == (4, 0, 4)
    assert _vector_count(store) == 0  # a save never runs the model
    result = store.vectorize()
    assert (result.embedded, result.skipped, result.remaining) == (4, 0, 0)
    assert store.vector_coverage().vectorized == 4
    assert store.db.scalar(f"SELECT COUNT(*) FROM {PENDING}") == 0
    assert _semantic_ids(store, "how do we keep people logged in?")[0] == ids[0]
    # Nothing left to do: a second run embeds nothing and loads nothing new.
    assert store.vectorize().embedded == 0


def test_an_edit_forgets_the_vector_and_the_next_search_uses_the_new_text(store: Store) -> None:
    oid = save(store, *MEMORIES[0])
    docker = save(store, *MEMORIES[1])
    store.vectorize()
    store.update_observation(
        oid,
        title="Moved the frontend to Vite",
        content="**What**: webpack builds took four minutes; Vite takes twenty seconds.",
    )
    assert store.vector_coverage().missing == 1  # forgotten in the edit's own transaction
    # The search embeds what waits first, so it already sees the memory's new meaning.
    found = _semantic_ids(store, "how do we keep people logged in?")
    assert found[:1] != [oid]
    assert _semantic_ids(store, "which bundler compiles our javascript?")[0] == oid
    assert docker in _semantic_ids(store, "continuous integration machine disk space")


def test_deletes_remove_vectors_and_results(store: Store) -> None:
    soft = save(store, *MEMORIES[0])
    hard = save(store, *MEMORIES[2])
    kept = save(store, *MEMORIES[3])
    store.vectorize()
    store.delete_observation(soft)
    store.delete_observation(hard, hard=True)
    assert _vector_count(store) == 1
    assert store.vector_coverage().memories == 1
    assert soft not in _semantic_ids(store, "how do we keep people logged in?")
    assert hard not in _semantic_ids(store, "payment provider callback verification")
    assert store.vectorize().embedded == 0  # the deleted ones left the queue
    assert store.db.scalar(f"SELECT COUNT(*) FROM {PENDING}") == 0
    assert _semantic_ids(store, "database migration blocked writes")[0] == kept


def test_a_long_lived_store_never_returns_a_vector_of_replaced_text(
    store: Store, config: Config
) -> None:
    oid = save(store, *MEMORIES[0])
    store.vectorize()
    assert _semantic_ids(store, "how do we keep people logged in?")[0] == oid  # matrix loaded
    # Another process edits the memory; nobody embeds it yet.
    with Store.open(config=config) as other:
        other.update_observation(oid, title="Cache warmup", content="Warm the CDN after deploys.")
    # Without catching up (nothing may embed), the old vector held in memory is not used.
    store.catch_up_vectors = lambda limit: None  # type: ignore[method-assign]
    assert _semantic_ids(store, "how do we keep people logged in?") == []


def test_changes_applied_from_another_replica_forget_vectors(make_store) -> None:
    first, second = make_store("first"), make_store("second")
    oid = save(first, *MEMORIES[0])
    assert exchange(first, second) > 0
    remote = second.get_observation_by_sync_id(first.get_observation(oid).sync_id).id
    second.vectorize()
    assert second.vector_coverage().missing == 0
    first.update_observation(oid, content="**What**: sessions now last a week.")
    assert exchange(first, second) > 0
    assert second.vector_coverage().missing == 1
    assert _vector_count(second) == 0
    assert second.vectorize().embedded == 1
    assert remote in _semantic_ids(second, "how long do logins last")


def test_a_memory_edited_while_being_embedded_is_not_given_the_old_vector(
    store: Store, config: Config
) -> None:
    oid = save(store, *MEMORIES[0])

    class EditsMeanwhile(Embedder):
        def embed(self, texts):
            vectors = super().embed(texts)
            with Store.open(config=config) as other:
                other.update_observation(oid, content="**What**: a different text now.")
            return vectors

    result = store.vectorize(embedder=EditsMeanwhile())
    assert (result.embedded, result.skipped) == (0, 1)
    assert _vector_count(store) == 0
    assert store.vectorize().embedded == 1  # still queued: embedded with its new text


def test_a_save_never_waits_for_the_model(store: Store, config: Config) -> None:
    save(store, *MEMORIES[0])
    inside, release = threading.Event(), threading.Event()

    class Slow(Embedder):
        def embed(self, texts):
            inside.set()
            assert release.wait(60)
            return super().embed(texts)

    worker = threading.Thread(target=lambda: store.vectorize(embedder=Slow()))
    worker.start()
    try:
        assert inside.wait(60)
        # The model is busy (mid-batch, no transaction open): another process saves at once.
        with Store.open(config=Config(data_dir=config.data_dir, busy_timeout_ms=200)) as other:
            saved = other.add_observation(title="Saved meanwhile", content="x", project="acme")
        assert saved.action == "created"
    finally:
        release.set()
        worker.join(60)
    assert store.vector_coverage().missing == 1  # the new memory waits for the next run


# (Model ids that sort after the installed one's and before it: the probe is two ranges.)
@pytest.mark.parametrize("older", ["some-older-model", "a-older-model", ""])
@pytest.mark.parametrize("by", ["vectorize", "search"])
def test_vectors_of_another_model_are_replaced(store: Store, older: str, by: str) -> None:
    oid = save(store, *MEMORIES[0])
    store.vectorize()
    store.db.conn.execute(f"UPDATE {TABLE} SET model = ? WHERE obs_id = ?", (older, oid))
    assert store.vector_coverage().vectorized == 0
    if by == "vectorize":
        assert store.vectorize().embedded == 1
    else:  # a search catches up before it ranks
        assert _semantic_ids(store, "how do we keep people logged in?") == [oid]
    model = store.db.scalar(f"SELECT model FROM {TABLE} WHERE obs_id = ?", (oid,))
    assert model == shared_embedder().model_id


def test_vectorize_for_one_project_and_rebuild(store: Store) -> None:
    mine = [save(store, t, c, project="mine") for t, c in MEMORIES[:2]]
    theirs = save(store, *MEMORIES[2], project="theirs")
    assert store.vectorize(project="mine").embedded == 2
    assert store.vector_coverage("mine").missing == 0
    assert store.vector_coverage("theirs").missing == 1
    before = dict(store.db.conn.execute(f"SELECT obs_id, seq FROM {TABLE}").fetchall())
    assert store.vectorize(project="mine", rebuild=True).embedded == 2
    after = dict(store.db.conn.execute(f"SELECT obs_id, seq FROM {TABLE}").fetchall())
    assert set(after) == set(mine) and all(after[i] > before[i] for i in mine)
    assert theirs not in after


def test_semantic_results_respect_filters_even_far_down_the_order(store: Store) -> None:
    for i in range(300):
        save(store, f"Session handling note {i}", f"Users stay signed in for {i} hours.")
    target = save(store, "Docker disk full", "Prune the buildx cache.", project="small")
    store.vectorize()
    found = store.search("how do we keep people logged in?", mode="semantic", project="small")
    assert [o.id for o in found] == [target] or found == []
    assert all(o.project == "small" for o in found)
    assert [
        o.id for o in store.search("ci runner out of disk", mode="semantic", project="small")
    ] == [target]


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_a_search_catches_up_on_a_few_waiting_memories(store: Store, mode: str) -> None:
    oid = save(store, *MEMORIES[0])
    found = store.search("how do we keep people logged in?", mode=mode)
    assert found and found[0].id == oid
    assert store.vector_coverage().missing == 0


def test_behind_a_backlog_a_search_embeds_the_newest_memories_first(store: Store) -> None:
    """Thousands of memories received by an import wait for vectors: a search embeds only a
    few (each costs the model's time), and those are the newest, so the memory just saved is
    found by its meaning."""
    from engram.store.hybrid import CATCH_UP

    backlog = [save(store, f"Docker layer {i} rebuilt", f"**What**: cache key {i}.") for i in
               range(CATCH_UP + 2)]  # fmt: skip
    newest = save(store, *MEMORIES[0])
    assert _semantic_ids(store, "how do we keep people logged in?")[0] == newest
    assert store.vector_coverage().missing == len(backlog) + 1 - CATCH_UP
    with_vectors = {r[0] for r in store.db.rows(f"SELECT obs_id FROM {TABLE}")}
    assert with_vectors == {newest, *backlog[-(CATCH_UP - 1) :]}
    assert store.vectorize().embedded == len(backlog) + 1 - CATCH_UP  # the oldest, left waiting


def test_behind_a_backlog_deleted_and_edited_memories_are_not_embedded(store: Store) -> None:
    """The newest waiting memories are the first a search embeds: a deleted one is skipped
    (and leaves the queue), an edited one is embedded with its new text."""
    from engram.store.hybrid import CATCH_UP

    older = [save(store, f"Docker layer {i} rebuilt", f"**What**: cache key {i}.") for i in
             range(CATCH_UP)]  # fmt: skip
    edited = save(store, "Cron job moved", "**What**: the nightly export runs at 2am.")
    deleted = [save(store, *m) for m in MEMORIES[1:3]]
    for oid in deleted:
        store.delete_observation(oid)
    store.update_observation(edited, title=MEMORIES[0][0], content=MEMORIES[0][1])
    assert _semantic_ids(store, "how do we keep people logged in?")[0] == edited
    with_vectors = {r[0] for r in store.db.rows(f"SELECT obs_id FROM {TABLE}")}
    assert with_vectors == {edited, *older[-(CATCH_UP - 1) :]}
    assert not set(deleted) & {r[0] for r in store.db.rows(f"SELECT obs_id FROM {PENDING}")}


def test_a_search_embeds_no_more_than_its_catch_up_from_the_queue_and_above_its_mark(
    store: Store,
) -> None:
    """Memories wait in two places — queued (edited) and saved since the queue's mark — and a
    search's catch-up counts each no further than it embeds (issue 18: counting a backlog of
    100,000 took every search 25 ms): it still embeds :data:`CATCH_UP` in all, not that many
    from each."""
    from engram.store.hybrid import CATCH_UP

    edited = [save(store, f"Docker layer {i} rebuilt", f"**What**: cache key {i}.") for i in
              range(CATCH_UP - 1)]  # fmt: skip
    store.vectorize()
    for oid in edited:
        store.update_observation(oid, content=f"**What**: cache key {oid} moved.")
    fresh = [save(store, *m) for m in MEMORIES[: CATCH_UP - 1]]
    assert store.vector_coverage().missing == len(edited) + len(fresh)
    store.search("how do we keep people logged in?", mode="hybrid")
    assert store.vector_coverage().missing == len(edited) + len(fresh) - CATCH_UP
    assert store.vectorize().embedded == len(edited) + len(fresh) - CATCH_UP


def test_a_queue_left_with_deleted_memories_only_is_emptied_by_the_next_search(
    store: Store,
) -> None:
    """An edit queues its memory before anyone knows it will be deleted: once only such rows
    are left, a search's catch-up clears them (a bounded run does not read the whole queue
    otherwise), so nothing seems to wait any more."""
    kept, gone = save(store, *MEMORIES[0]), save(store, *MEMORIES[1])
    store.vectorize()
    store.update_observation(gone, content="**What**: about to go.")
    store.delete_observation(gone)
    assert store.vectors_pending()
    assert store.search("how do we keep people logged in?", mode="hybrid")[0].id == kept
    assert not store.vectors_pending()
    assert store.db.rows(f"SELECT obs_id FROM {PENDING}") == []


def test_a_re_derived_session_context_keeps_the_memory_s_vector(store: Store) -> None:
    """A vector is made from a memory's title and content: when only its session context is
    re-derived (the memory before it was edited), it keeps its vector and is not queued."""
    first = save(store, *MEMORIES[0], session_id="s1")
    second = save(store, *MEMORIES[1], session_id="s1")
    store.vectorize()
    context = "SELECT search_context FROM observations WHERE id = ?"
    before = store.db.scalar(context, (second,))
    store.update_observation(first, content="**What**: the deploy now waits for health checks")
    assert store.db.scalar(context, (second,)) != before
    assert store.db.scalar(f"SELECT COUNT(*) FROM {TABLE} WHERE obs_id = ?", (second,)) == 1
    queued = {r[0] for r in store.db.rows(f"SELECT obs_id FROM {PENDING}")}
    assert queued == {first}
