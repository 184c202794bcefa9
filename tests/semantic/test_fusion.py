"""The hybrid order: a memory that covers a keyword query keeps its place, a question whose words
only brush the corpus is ranked by meaning (engram/semantic/fusion.py)."""

from __future__ import annotations

from engram.semantic.fusion import LexicalHit, coverage, fuse

WEIGHTS = {"signatureverificationerror": 5.0, "stripe": 2.0, "webhook": 1.0}


def test_coverage_is_the_share_of_the_query_weight_found() -> None:
    full = LexicalHit(1, frozenset(WEIGHTS))
    rare_only = LexicalHit(2, frozenset({"signatureverificationerror"}))
    common_only = LexicalHit(3, frozenset({"webhook"}))
    assert coverage(full, WEIGHTS) == 1.0
    assert coverage(rare_only, WEIGHTS) == 5 / 8
    assert coverage(common_only, WEIGHTS) == 1 / 8
    # Words found only in the session context count half.
    via_context = LexicalHit(4, frozenset(), frozenset({"signatureverificationerror"}))
    assert coverage(via_context, WEIGHTS) == 0.5 * 5 / 8
    assert coverage(full, {}) == 0.0


def test_a_memory_covering_the_keywords_stays_first() -> None:
    lexical = [LexicalHit(1, frozenset(WEIGHTS)), LexicalHit(2, frozenset({"webhook"}))]
    # A semantically closer memory without the words does not push the exact match down.
    fused = fuse(lexical, {1: 0.35, 2: 0.30, 3: 0.55}, WEIGHTS, [3, 1, 2])
    assert [f.id for f in fused][:1] == [1]
    assert fused[0].found_by == ("lexical", "semantic")


def test_a_question_that_only_brushes_the_words_is_ranked_by_meaning() -> None:
    weights = {"keep": 1.0, "people": 1.0, "logged": 1.0}
    # The lexical list matched one common word in unrelated memories.
    lexical = [LexicalHit(10, frozenset({"people"})), LexicalHit(11, frozenset({"keep"}))]
    fused = fuse(lexical, {10: 0.05, 11: 0.08, 20: 0.52}, weights, [20, 11, 10])
    assert fused[0].id == 20
    assert fused[0].found_by == ("semantic",)
    assert fused[0].similarity == 0.52


def test_a_hit_without_a_vector_yet_is_neither_favoured_nor_buried() -> None:
    weights = {"cache": 1.0}
    lexical = [LexicalHit(1, frozenset({"cache"})), LexicalHit(2, frozenset({"cache"}))]
    fused = fuse(lexical, {1: 0.4, 3: 0.1, 4: 0.9}, weights, [4, 1, 3])
    by_id = {f.id: f for f in fused}
    assert by_id[2].similarity is None
    # Memory 2 is scored with the median similarity (0.4), one lexical place below memory 1.
    assert by_id[1].score > by_id[2].score > by_id[3].score


def test_every_candidate_appears_once() -> None:
    lexical = [LexicalHit(1, frozenset({"a"})), LexicalHit(1, frozenset({"a"}))]
    fused = fuse(lexical, {1: 0.2, 2: 0.3}, {"a": 1.0}, [2, 1])
    assert sorted(f.id for f in fused) == [1, 2]
