"""Search by meaning: ``semantic`` (nearest memories to the question's vector) and ``hybrid``
(the lexical order and the nearest memories, fused by :mod:`engram.semantic.fusion`).

Before it searches, a semantic search embeds a few memories still waiting for a vector, the
newest (:data:`CATCH_UP`), so a memory saved by a one-shot ``engram save`` is found by the next
search without anything running in the background, even behind a backlog. A hybrid search
embeds the question while it ranks by words (:func:`_beside`). Filters (project, scope, type,
dates) apply to both lists. Every result says which signals found it (``found_by``) and its
similarity.

Importing this module imports numpy and the model: only semantic searches do.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from engram.errors import ValidationError
from engram.semantic.fusion import LexicalHit, fuse
from engram.semantic.model import default_threads, shared_embedder
from engram.store.models import Observation
from engram.store.query import check_match_mode, query_words
from engram.store.vector_index import VectorIndex

if TYPE_CHECKING:
    from engram.store.store import Store

#: Candidates taken from each list before fusing (the bench finds no gain beyond this).
CANDIDATES = 50
#: Waiting memories a search embeds first, the newest first (~15 ms each on two cores: behind
#: a backlog — thousands received by an import — 16 cost every search ~0.27 s; the rest wait
#: for ``engram vectorize``, the background vectorizer of ``engram mcp`` and ``engram serve``,
#: or the next search).
CATCH_UP = 4
#: A hybrid result says "semantic" when it is among this many nearest memories.
SEMANTIC_TOP = 10
#: A memory found only by meaning must be at least this similar to the question: below it,
#: results are unrelated (on the bench every answer scores above 0.13, and the tenth nearest
#: memory of a question 0.19 or more), and an empty answer beats a list of noise.
MIN_SIMILARITY = 0.1
#: BM25 rank given to exact topic-key matches by the lexical search (kept first here too).
TOPIC_RANK = -1000.0
OWN_COLUMNS = "{title content tool_name type project topic_key}"
T = TypeVar("T")


def search_by_meaning(
    store: Store,
    query: str,
    *,
    mode: str,
    type: str | None,
    project: str | None,
    scope: str | None,
    limit: int,
    match_mode: str,
    since: str | None,
    until: str | None,
) -> list[Observation]:
    """The ``limit`` best memories for ``query`` in ``mode`` (``semantic`` or ``hybrid``)."""
    strict = check_match_mode(match_mode) == "all"
    if strict and mode == "semantic":
        raise ValidationError(
            "match_mode 'all' selects memories by their words: use it with mode hybrid or "
            "lexical, not semantic",
            field="match_mode",
        )
    clauses, params = store._observation_filters(project, scope, type, since, until)
    where = " AND ".join(clauses)
    store.catch_up_vectors(CATCH_UP)
    embedder = shared_embedder(default_threads())
    lexical: list[Observation] = []
    if mode == "semantic":
        question = embedder.embed_one(query.strip())
    else:
        question, lexical = _beside(
            lambda: embedder.embed_one(query.strip()),
            lambda: store._search_lexical(
                query, type=type, project=project, scope=scope, limit=CANDIDATES,
                match_mode=match_mode, since=since, until=until,
            ),
        )  # fmt: skip
    index = _index(store, embedder.model_id)
    with store.db.read() as conn:
        index.refresh(conn)
        neighbors = index.nearest(
            conn, question, limit if mode == "semantic" else CANDIDATES, where, params
        )
    neighbors = [n for n in neighbors if n.similarity >= MIN_SIMILARITY]
    if mode == "semantic":
        found = _fetch(store, [n.id for n in neighbors])
        results = []
        for n in neighbors:
            if n.id in found:
                obs = found[n.id]
                obs.rank, obs.similarity, obs.found_by = -n.similarity, n.similarity, ["semantic"]
                results.append(obs)
        return results

    pinned = [o for o in lexical if o.rank == TOPIC_RANK]
    words = query_words(query)
    hits = _lexical_hits(lexical)
    with store.db.read() as conn:
        weights = _word_weights(conn, words)
        similarity = index.similarity_of(conn, question, [o.id for o in lexical])
    nearest = [] if strict else neighbors  # all-words matching: only reorder the word matches
    similarity.update((n.id, n.similarity) for n in nearest)
    fused = fuse(hits, similarity, weights, [n.id for n in nearest[:SEMANTIC_TOP]])
    by_id = {o.id: o for o in lexical}
    missing = [f.id for f in fused[: limit + len(pinned)] if f.id not in by_id]
    by_id.update(_fetch(store, missing))
    results = []
    for obs in pinned[:limit]:
        obs.found_by, obs.similarity = ["lexical"], similarity.get(obs.id)
        results.append(obs)
    pinned_ids = {o.id for o in pinned}
    for f in fused:
        if len(results) >= limit:
            break
        candidate = by_id.get(f.id)
        if candidate is None or candidate.id in pinned_ids:
            continue
        candidate.rank, candidate.similarity, candidate.found_by = (
            -f.score,
            f.similarity,
            list(f.found_by),
        )
        results.append(candidate)
    return results


def _beside(embed: Callable[[], np.ndarray], work: Callable[[], T]) -> tuple[np.ndarray, T]:
    """``embed()`` in a thread of its own while ``work()`` runs here: the question's embedding
    and the lexical half leave the GIL while they run (ONNX Runtime for its whole run, SQLite
    while it steps), so the two overlap. (A thread per question rather than a pool: a pool's
    idle worker would not survive a fork.)"""
    outcome: list[np.ndarray | BaseException] = []

    def run() -> None:
        try:
            outcome.append(embed())
        except BaseException as exc:  # handed to the caller below
            outcome.append(exc)

    thread = threading.Thread(target=run, name="engram-question", daemon=True)
    thread.start()
    try:
        done = work()
    finally:
        thread.join()
    (vector,) = outcome
    if isinstance(vector, BaseException):
        raise vector
    return vector, done


def _index(store: Store, model: str) -> VectorIndex:
    """The store's in-memory vectors (a new index if the model changed)."""
    index = store.vector_index
    if not isinstance(index, VectorIndex) or index.model != model:
        index = store.vector_index = VectorIndex(model)
    return index


def _fetch(store: Store, ids: list[int]) -> dict[int, Observation]:
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    rows = store.db.rows(f"SELECT * FROM observations WHERE id IN ({marks})", ids)
    return {r["id"]: Observation.from_row(r) for r in rows}


def _term(word: str) -> str:
    """The FTS5 term of a query word as a whole word (quoted: never syntax)."""
    return '"' + word.replace('"', '""') + '"'


def _lexical_hits(lexical: list[Observation]) -> list[LexicalHit]:
    """Which query words each lexical result holds in its own text (as a word or as the start of
    a longer one) and in its session context, in the lexical order: what the lexical search
    already found out to explain its match."""
    hits = []
    for obs in lexical:
        match = obs.match
        if match is None:
            hits.append(LexicalHit(obs.id, frozenset()))
            continue
        own = frozenset((*match.words, *match.prefix_words))
        hits.append(LexicalHit(obs.id, own, frozenset(match.context_words)))
    return hits


def _word_weights(conn: sqlite3.Connection, words: list[str]) -> dict[str, float]:
    """Inverse document frequency of each query word over the memories' own text: a rare word
    says more about what the question is after than a common one. (Counted as whole words:
    counting prefix matches over the whole index costs too much for what it changes.)"""
    total = conn.execute("SELECT COUNT(*) FROM observations").fetchone()[0] or 1
    weights: dict[str, float] = {}
    for word in words:
        count = conn.execute(
            "SELECT COUNT(*) FROM observations_fts WHERE observations_fts MATCH ?",
            [f"{OWN_COLUMNS} : {_term(word)}"],
        ).fetchone()[0]
        weights[word] = math.log(1 + total / (1 + count))
    return weights
