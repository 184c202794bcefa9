"""Hybrid ranking: one order from the lexical list (words) and vector similarity (meaning).

Measured on ``bench/retrieval_bench.py`` (the figures are in ``docs/search.md``): reciprocal
rank fusion, the usual default, gained on paraphrased questions but cost keyword and
conversational questions some of their first places, because the lexical list always has
*something* — a question that shares one common word with a thousand memories still yields a
confident-looking top ten. What worked is weighting each lexical hit by how much of the question
it actually covers:

    lexical(d)  = K / (K + rank(d) - 1) × coverage(d)
    coverage(d) = share of the query words' weight (IDF) found in d's own text, plus
                  CONTEXT_SHARE of the weight of words found only in its session context
    score(d)    = LEXICAL_WEIGHT × lexical(d) + (1 - LEXICAL_WEIGHT) × cosine(d, question)

so a memory that matches most of a keyword query keeps its place, and a question whose words
only brush the corpus is ranked by meaning. The constants are the measured optimum, chosen
from a flat region (neighbouring values lose at most ~0.01 MRR).

Pure Python over plain numbers: no numpy, no store, no model.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

LEXICAL_WEIGHT = 0.4
RANK_K = 10
CONTEXT_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class LexicalHit:
    """One memory of the lexical list (in its order) and the query words it matched."""

    id: int
    own_words: frozenset[str]
    context_words: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Fused:
    """A memory's place in the hybrid order and what found it."""

    id: int
    score: float
    similarity: float | None
    found_by: tuple[str, ...]


def coverage(hit: LexicalHit, word_weights: Mapping[str, float]) -> float:
    """The share of the query's word weight that ``hit`` matched (context words count less)."""
    total = sum(word_weights.values())
    if total <= 0:
        return 0.0
    own = sum(word_weights.get(w, 0.0) for w in hit.own_words)
    context = sum(word_weights.get(w, 0.0) for w in hit.context_words - hit.own_words)
    return min(1.0, (own + CONTEXT_SHARE * context) / total)


def fuse(
    lexical: Sequence[LexicalHit],
    similarity: Mapping[int, float],
    word_weights: Mapping[str, float],
    semantic_ids: Collection[int],
) -> list[Fused]:
    """Every memory of ``lexical`` or ``semantic_ids``, best first.

    ``similarity`` holds the cosine of each candidate that has a vector; one without (saved a
    moment ago, not embedded yet) gets the median of the others, so it is neither favoured nor
    buried. ``semantic_ids`` are the nearest memories by meaning: they say "semantic" in
    ``found_by`` (lexical hits say "lexical").
    """
    known = sorted(similarity.values())
    neutral = known[len(known) // 2] if known else 0.0
    lexical_scores: dict[int, float] = {}
    for rank, hit in enumerate(lexical):
        if hit.id not in lexical_scores:
            lexical_scores[hit.id] = RANK_K / (RANK_K + rank) * coverage(hit, word_weights)
    semantic = set(semantic_ids)
    fused = []
    for doc in dict.fromkeys([*lexical_scores, *semantic_ids]):
        cosine = similarity.get(doc)
        score = LEXICAL_WEIGHT * lexical_scores.get(doc, 0.0) + (1 - LEXICAL_WEIGHT) * (
            neutral if cosine is None else cosine
        )
        found_by = tuple(
            name
            for name, present in (("lexical", doc in lexical_scores), ("semantic", doc in semantic))
            if present
        )
        fused.append(Fused(doc, score, cosine, found_by))
    # Ties (rare with real numbers) keep the lexical order, then the newer memory first.
    position = {doc: i for i, doc in enumerate(lexical_scores)}
    fused.sort(key=lambda f: (-f.score, position.get(f.id, len(position)), -f.id))
    return fused
