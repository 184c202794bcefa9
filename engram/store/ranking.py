"""Lexical ranking over one FTS5 index: tiers first, BM25 within a tier, bounded work.

Tiers (DESIGN §3 "Search"): 1 — a query word itself is in the row's own text; 2 — only as the
start of a longer word there; 3 — only in the session context. Within a tier, FTS5's BM25 over
the query's phrases (one per word: the word, or the word as a prefix) with the column weights;
scores equal to 9 decimals are ties, broken by rowid.

Bounded work. Broad questions match most of the store, and scoring every match is what made
search slow: BM25 costs per matching row and, for its IDF, a pass over each phrase's rows. So
words are taken most selective first (fewest rows, from the index's vocabulary): step 1 scores
the rows that hold one of the rarest words (up to :data:`GROUP_BUDGET` rows) with every phrase of
the query — BM25 is a sum over phrases, so they get their final score — first those that also
hold a more common word, then, only if they could still matter, those that hold nothing else.
If the k-th best row's own text matched and it scores more than rows holding only the common
words could reach, the rest is skipped; else step 2 scores those rows too. What an unseen word
could add is taken as :data:`PRUNE_FACTOR` × its IDF: a word found once in a row of average
length adds about 1 × IDF, and no phrase adds more than (k1 + 1) × IDF = 2.2 × IDF (FTS5's k1 is
1.2), so with 2.2 skipping would never change the top k; the smaller factor trades that
certainty for speed, and bench/retrieval_bench.py measures how often the top 10 differs from
ranking every match (``Config.search_pruning=False``).

Words from prefixes. Ranking sorts rows whose own text matched (``OWN``) before rows matched
only through their context (``CONTEXT``); telling a word from a prefix inside ``OWN`` is left to
the caller (engram/store/search.py), which reads the few best rows anyway to explain them.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from engram.store.query import QueryWord
from engram.store.terms import upper_bound

#: Most rows step 1 scores (always at least the rarest word's).
GROUP_BUDGET = 1500
#: What a word not yet scored is assumed to add to a row's score at most, in units of its IDF
#: (see the module docstring: 2.2 would be exact).
PRUNE_FACTOR = 1.2
#: An index of at most this many rows, or a query matching at most this many, is scored in one
#: step, without planning.
SMALL_QUERY = 2 * GROUP_BUDGET
#: Scores equal to this many decimals are ties, broken by rowid: the same phrases summed in
#: another order differ in the last bits, and must not reorder results.
SCORE_DECIMALS = 9


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """One FTS5 index as ranking sees it."""

    fts: str
    vocab: str
    columns: tuple[str, ...]
    own_columns: tuple[str, ...]
    weights: tuple[float, ...]

    @property
    def bm25(self) -> str:
        return f"bm25({self.fts}, {', '.join(repr(float(w)) for w in self.weights)})"

    @property
    def own_bm25(self) -> str:
        """BM25 of the row's own text only: below 0 exactly when a query word is in it."""
        weights = (
            w if c in self.own_columns else 0.0
            for c, w in zip(self.columns, self.weights, strict=True)
        )
        return f"bm25({self.fts}, {', '.join(repr(float(w)) for w in weights)})"

    @property
    def has_context(self) -> bool:
        """Whether some weighted column is not the row's own text."""
        return any(
            w > 0
            for c, w in zip(self.columns, self.weights, strict=True)
            if c not in self.own_columns
        )

    def own(self, expression: str) -> str:
        """``expression`` restricted to the row's own text."""
        if set(self.own_columns) == set(self.columns):
            return expression
        return f"{{{' '.join(self.own_columns)}}} : ({expression})"


#: Tiers as ranking returns them: the own text matched (1: a word itself, 2: only as the start
#: of a longer word — ``OWN`` until the caller tells the two apart), or only the context (3).
WORDS, PREFIX, CONTEXT = 1, 2, 3
OWN = WORDS


@dataclass(frozen=True, slots=True)
class Hit:
    rowid: int
    tier: int  # OWN or CONTEXT from rank(); WORDS, PREFIX or CONTEXT from rank_filtered()
    score: float


@dataclass(slots=True)
class Ranking:
    hits: list[Hit]
    complete: bool  # every matching row was considered (none cut by a limit or by pruning)
    steps: int = 0
    pruned: bool = False  # stopped before scoring the rows of the most common words


@dataclass(slots=True)
class _Word:
    word: QueryWord
    expression: str
    docs: int  # rows holding it in some form (an over-estimate for prefixes): orders the words
    bound: float  # the most its phrase may add to a score


def _any(expressions: Sequence[str]) -> str:
    return " OR ".join(expressions)


def row_count(conn: sqlite3.Connection, fts: str) -> int:
    """Rows in an FTS5 index, read from its averages record (FTS5's own count, no scan)."""
    row = conn.execute(f"SELECT block FROM {fts}_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0
    value = 0
    for i, byte in enumerate(bytes(row[0])[:9]):  # an SQLite varint
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value


def _idf(total: int, docs: int) -> float:
    """FTS5's BM25 IDF (never below its floor of 1e-6)."""
    return max(1e-6, math.log((total - docs + 0.5) / (docs + 0.5)))


class TermCounts:
    """Rows per index term, remembered between searches (a process searching often, like
    ``engram mcp``, asks for the same words again and again).

    The counts only order words and bound scores, so a remembered count is used until the
    index's row count has moved by more than :attr:`DRIFT` since it was read; a zero is never
    remembered (a word must not be left out of a query because it was absent a while ago).
    """

    DRIFT = 0.05
    LIMIT = 20_000

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, bool], tuple[int, int, int]] = {}

    def get(self, fts: str, term: str, prefix: bool, total: int) -> tuple[int, int] | None:
        held = self._counts.get((fts, term, prefix))
        if held is None or abs(total - held[2]) > self.DRIFT * max(held[2], 1):
            return None
        return held[0], held[1]

    def put(self, fts: str, term: str, prefix: bool, total: int, counts: tuple[int, int]) -> None:
        if counts[0] <= 0:
            return
        if len(self._counts) >= self.LIMIT:
            self._counts.clear()
        self._counts[(fts, term, prefix)] = (counts[0], counts[1], total)


def _statistics(
    conn: sqlite3.Connection,
    spec: IndexSpec,
    words: Sequence[QueryWord],
    total: int,
    cache: TermCounts | None = None,
) -> list[_Word]:
    """How many rows hold each word, from the index's vocabulary (one statement for the terms
    ``cache`` does not hold).

    A prefix covers several terms: their summed counts over-estimate its rows (good enough to
    order words), their largest count under-estimates them, which over-estimates its IDF and so
    keeps the bound safe. A word of several terms is a phrase: its rows could be as few as none.
    """
    cache = cache or TermCounts()
    wanted = {
        (stem, word.prefix and position == len(word.stems) - 1)
        for word in words
        for position, stem in enumerate(word.stems)
    }
    counts = {key: cache.get(spec.fts, *key, total) for key in wanted}
    missing = sorted(key for key, held in counts.items() if held is None)
    if missing:
        parts, params = [], []
        for n, (stem, prefix) in enumerate(missing):
            if prefix:
                parts.append(
                    f"SELECT {n}, sum(doc), max(doc) FROM {spec.vocab} WHERE term >= ? AND term < ?"
                )
                params += [stem, upper_bound(stem)]
            else:
                parts.append(f"SELECT {n}, sum(doc), max(doc) FROM {spec.vocab} WHERE term = ?")
                params.append(stem)
        for n, summed, largest in conn.execute(" UNION ALL ".join(parts), params):
            found = (int(summed or 0), int(largest or 0))
            counts[missing[n]] = found
            cache.put(spec.fts, *missing[n], total, found)
    stats = []
    for word in words:
        most = least = total
        for position, stem in enumerate(word.stems):
            summed, largest = counts[(stem, word.prefix and position == len(word.stems) - 1)] or (
                0,
                0,
            )
            most, least = min(most, summed), min(least, largest)
        fewest = least if len(word.stems) == 1 else 0
        bound = PRUNE_FACTOR * _idf(total, fewest)
        stats.append(_Word(word, spec_expression(spec, word), most, bound))
    return stats


def spec_expression(spec: IndexSpec, word: QueryWord) -> str:
    """A word's expression; restricted to the own text when the context column has no weight."""
    return word.expression if spec.has_context else spec.own(word.expression)


def rank(
    conn: sqlite3.Connection,
    spec: IndexSpec,
    words: Sequence[QueryWord],
    *,
    match_all: bool,
    k: int,
    fetch: int,
    prune: bool = True,
    counts: TermCounts | None = None,
) -> Ranking:
    """The best ``fetch`` rows for ``words`` by (tier, BM25), rowid breaking ties; pruning
    stops once the best ``k`` cannot change (see the module doc). Run inside a read snapshot."""
    if not words:
        return Ranking([], True)
    exprs = [spec_expression(spec, w) for w in words]
    if match_all:
        return _single(conn, spec, " AND ".join(f"({e})" for e in exprs), fetch)
    total = row_count(conn, spec.fts)
    if not prune or total <= SMALL_QUERY:  # small: no planning needed
        return _single(conn, spec, _any(exprs), fetch)
    # Words no row holds cannot match: leave them out of every expression.
    stats = sorted(
        (s for s in _statistics(conn, spec, words, total, counts) if s.docs), key=lambda s: s.docs
    )
    if not stats:
        return Ranking([], True)
    if sum(s.docs for s in stats) <= SMALL_QUERY:
        return _single(conn, spec, _any([s.expression for s in stats]), fetch)
    # Step 1: the rows holding one of the rarest words (up to GROUP_BUDGET rows), scored with
    # every phrase. Step 2, only if rows without them could still be among the best k: the rest.
    group = [stats[0]]
    while (
        len(group) < len(stats)
        and sum(s.docs for s in group) + stats[len(group)].docs <= GROUP_BUDGET
    ):
        group.append(stats[len(group)])
    rest = stats[len(group) :]
    docs = _any([s.expression for s in group])
    if not rest:
        found = _step(conn, spec, docs, fetch)
        return Ranking(found, len(found) < fetch, 1)
    others = _any([s.expression for s in rest])
    hits = _step(conn, spec, f"({docs}) AND ({others})", fetch)
    complete = len(hits) < fetch
    # Rows holding only the rare words score at most their bound: scored only if that could
    # still put them among the best k.
    if _settled(hits, k, sum(s.bound for s in group)):
        complete = False
    else:
        alone = _step(conn, spec, f"({docs}) NOT ({others})", fetch)
        complete = complete and len(alone) < fetch
        hits = sorted([*hits, *alone], key=_order)[:fetch]
    if _settled(hits, k, sum(s.bound for s in rest)):
        return Ranking(hits, False, 2, pruned=True)
    more = _step(conn, spec, f"({others}) NOT ({docs})", fetch)
    complete = complete and len(more) < fetch
    return Ranking(sorted([*hits, *more], key=_order)[:fetch], complete, 3)


def _settled(hits: list[Hit], k: int, bound: float) -> bool:
    """Whether rows scoring at most ``bound`` can no longer enter the best ``k`` of ``hits``
    (sorted): the k-th is in tier 1 and scores more (BM25 scores are negative)."""
    if len(hits) < k:
        return False
    kth = sorted(hits, key=_order)[k - 1]
    return kth.tier == 1 and -kth.score > bound


def _order(hit: Hit) -> tuple[int, float, int]:
    return (hit.tier, round(hit.score, SCORE_DECIMALS), hit.rowid)


def _single(conn: sqlite3.Connection, spec: IndexSpec, expression: str, fetch: int) -> Ranking:
    found = _step(conn, spec, expression, fetch)
    return Ranking(found, len(found) < fetch, 1)


def _step(conn: sqlite3.Connection, spec: IndexSpec, expression: str, fetch: int) -> list[Hit]:
    """The best ``fetch`` rows of ``expression``: those whose own text matched first (telling a
    word from a prefix is left to the caller, which reads the few rows it keeps), each group
    by BM25."""
    rows = conn.execute(
        f"""SELECT id, CASE WHEN own < 0 THEN {OWN} ELSE {CONTEXT} END AS tier, score FROM (
                SELECT rowid AS id, {spec.bm25} AS score, {spec.own_bm25} AS own
                FROM {spec.fts} WHERE {spec.fts} MATCH ?)
            ORDER BY tier, round(score, {SCORE_DECIMALS}), id LIMIT ?""",
        [expression, fetch],
    ).fetchall()
    return [Hit(int(r[0]), int(r[1]), float(r[2])) for r in rows]


def rank_filtered(
    conn: sqlite3.Connection,
    spec: IndexSpec,
    words: Sequence[QueryWord],
    *,
    match_all: bool,
    table: str,
    alias: str,
    where: str,
    params: Sequence[object],
    limit: int,
) -> list[sqlite3.Row]:
    """Every match ranked with ``table``'s filters applied inside the query, the three tiers told
    apart in SQL (exact, slower): for when the filters, or prefix-only matches, leave too few of
    the best rows :func:`rank` found."""
    exprs = [spec_expression(spec, w) for w in words]
    expression = " AND ".join(f"({e})" for e in exprs) if match_all else _any(exprs)
    own_exact = spec.own(_any([w.exact for w in words]))
    tier = f"CASE WHEN id IN t1 THEN {WORDS} WHEN own < 0 THEN {PREFIX} ELSE {CONTEXT} END"
    return conn.execute(
        f"""WITH t1(r) AS MATERIALIZED (SELECT rowid FROM {spec.fts} WHERE {spec.fts} MATCH ?)
            SELECT *, {tier} AS tier FROM (
                SELECT {alias}.*, {spec.bm25} AS rank, {spec.own_bm25} AS own
                FROM {spec.fts} JOIN {table} {alias} ON {alias}.id = {spec.fts}.rowid
                WHERE {spec.fts} MATCH ? AND {where})
            ORDER BY tier, round(rank, {SCORE_DECIMALS}), id LIMIT ?""",
        [own_exact, expression, *params, limit],
    ).fetchall()
