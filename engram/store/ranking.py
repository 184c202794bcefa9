"""Lexical ranking over one FTS5 index: tiers first, BM25 within a tier, bounded work.

Tiers (docs/search.md):

1. a query word itself (its Porter stem) is in the row's own text — ranked by BM25 over the
   query's words, every column weighted (the session context at its weight);
2. only as the start of a longer word (a prefix, words of 4+ characters) in its own text —
   ranked by BM25 over the words as prefixes;
3. only in the session context: first rows holding a word itself there, then a prefix.

Scores equal to :data:`SCORE_DECIMALS` decimals are ties, broken by rowid. Tiers 2 and 3 by
prefix are only looked for while tier 1 leaves room: they cannot outrank it.

Bounded work. Broad questions match most of the store, and scoring every match is what made
search slow: BM25 costs per matching row and, for its IDF, a pass over each phrase's rows. So
tier 1 takes the words most selective first (fewest rows, from the index's vocabulary): step 1
scores the rows that hold one of the rarest words (up to :data:`GROUP_BUDGET` rows) with every
word of the query — BM25 is a sum over phrases, so they get their final score — first those
that also hold a more common word, then, only if they could still matter, those that hold
nothing else. If the k-th best row is in tier 1 and scores more than rows holding only the
common words could reach, the rest is skipped; else step 2 scores those rows too. What an unseen
word could add is taken as :data:`PRUNE_FACTOR` × its IDF: a word found once in a row of average
length adds about 1 × IDF, and no phrase adds more than (k1 + 1) × IDF = 2.2 × IDF (FTS5's k1 is
1.2), so with 2.2 skipping would never change the top k; the smaller factor trades that
certainty for speed, and bench/retrieval_bench.py measures how often the top 10 differs from
ranking every match (``Config.search_pruning=False``).

With ``filters`` (an SQL condition on the rows), every step joins the rows and applies it, and
nothing is skipped: exact, and slower — for when the filters reject most of the best rows.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import NamedTuple

from engram.store.query import QueryWord
from engram.store.terms import COMPOUND_TERMS

#: Most rows step 1 scores (always at least the rarest word's).
GROUP_BUDGET = 1500
#: What a word not yet scored is assumed to add to a row's score at most, in units of its IDF
#: (see the module docstring: 2.2 would be exact).
PRUNE_FACTOR = 1.2
#: An index of at most this many rows, or a query whose words are in at most this many, is
#: scored in one step, without planning.
SMALL_QUERY = 2 * GROUP_BUDGET
#: Scores equal to this many decimals are ties, broken by rowid: the same phrases summed in
#: another order differ in the last bits, and must not reorder results.
SCORE_DECIMALS = 9
#: Scores further apart than this never round to the same :data:`SCORE_DECIMALS` decimals.
_TIE_GAP = 2 * 10**-SCORE_DECIMALS
#: The tiers (see the module docstring).
WORDS, PREFIX, CONTEXT = 1, 2, 3


@dataclass(frozen=True)
class IndexSpec:
    """One FTS5 index as ranking sees it (its SQL fragments are built once per spec: a search
    asks for them several times)."""

    fts: str
    vocab: str
    columns: tuple[str, ...]
    own_columns: tuple[str, ...]
    weights: tuple[float, ...]

    @cached_property
    def bm25(self) -> str:
        return f"bm25({self.fts}, {', '.join(repr(float(w)) for w in self.weights)})"

    @cached_property
    def own_bm25(self) -> str:
        """BM25 of the row's own text only: below 0 exactly when a query phrase is in it."""
        weights = (
            w if c in self.own_columns else 0.0
            for c, w in zip(self.columns, self.weights, strict=True)
        )
        return f"bm25({self.fts}, {', '.join(repr(float(w)) for w in weights)})"

    @cached_property
    def has_context(self) -> bool:
        """Whether some weighted column is not the row's own text."""
        return any(
            w > 0
            for c, w in zip(self.columns, self.weights, strict=True)
            if c not in self.own_columns
        )

    @cached_property
    def _own_filter(self) -> str:
        if set(self.own_columns) == set(self.columns):
            return ""
        return f"{{{' '.join(self.own_columns)}}} : "

    def own(self, expression: str) -> str:
        """``expression`` restricted to the row's own text."""
        return f"{self._own_filter}({expression})" if self._own_filter else expression

    def searched(self, expression: str) -> str:
        """``expression`` over the columns that count (the own text only when the context
        column has no weight)."""
        return expression if self.has_context else self.own(expression)


@dataclass(frozen=True, slots=True)
class Filters:
    """An SQL condition on the ranked rows: ``table`` aliased ``alias``, ``where`` with
    ``params``."""

    table: str
    alias: str
    where: str
    params: tuple[object, ...]


class Hit(NamedTuple):  # (a tuple: built from each ranked row as it comes, 20 per search)
    rowid: int
    tier: int  # WORDS, PREFIX or CONTEXT
    score: float  # BM25 (lower is better) within its tier


@dataclass(slots=True)
class Ranking:
    hits: list[Hit]  # best first
    complete: bool  # no matching row was left out (by a limit or by pruning)
    steps: int = 0  # ranking statements run
    pruned: bool = False  # stopped before scoring the rows of the most common words
    provisional: bool = False  # tier 1 may hold prefix-only rows (see rank)


@dataclass(slots=True)
class _Word:
    phrase: str
    docs: int  # rows holding the word (a phrase of several terms: its rarest term's)
    bound: float  # the most it may add to a score (see PRUNE_FACTOR)


def _any(expressions: Sequence[str]) -> str:
    return " OR ".join(expressions)


def _order(hit: Hit) -> tuple[int, float, int]:
    return (hit.tier, round(hit.score, SCORE_DECIMALS), hit.rowid)


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
    #: Most stems :meth:`extended` looks up for one search (~0.02 ms each): a keyword query's
    #: words are asked again and again, a long question of new words mostly once, and its
    #: look-ups would cost more than they save.
    LOOKUPS = 3

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}
        self._extended: dict[tuple[str, str], bool] = {}
        self._version: tuple[int, int] | None = None

    def extended(self, conn: sqlite3.Connection, spec: IndexSpec, stems: Iterable[str]) -> set[str]:
        """Which of ``stems`` the index holds a longer term starting with: for the others a
        word's prefix form ``"word"*`` matches exactly the rows, instances and IDF of the word
        itself, at a tenth to a quarter more cost (FTS5 merges a prefix's doclists, for the
        query and again for BM25's IDF). Run inside the search's read snapshot.

        Remembered while the database is unchanged (``PRAGMA data_version``, which the
        snapshot fixes, and this connection's own changes): any write may add a longer term,
        so a stem found without one is asked again after it; one found with one stays so (a
        prefix form is never wrong, only slower)."""
        version = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        if version != self._version:
            self._extended = {key: True for key, held in self._extended.items() if held}
            self._version = version
        missing = sorted(stem for stem in stems if (spec.fts, stem) not in self._extended)
        if 0 < len(missing) <= self.LOOKUPS:
            if len(self._extended) + len(missing) > self.LIMIT:
                self._extended.clear()
            # Terms after the stem itself ("\x01": no term holds a smaller character; from the
            # stem, FTS5's vocabulary would first count every row holding it), one statement.
            parts = [
                f"(SELECT 1 FROM {spec.vocab} WHERE term >= ? AND term < ? LIMIT 1)"
                for _ in missing
            ]
            bounds = [b for stem in missing for b in (stem + "\x01", stem + "\U0010ffff")]
            held = conn.execute(f"SELECT {', '.join(parts)}", bounds).fetchone()
            for stem, one in zip(missing, held, strict=True):
                self._extended[(spec.fts, stem)] = one is not None
        # (Stems not looked up keep their prefix form.)
        return {stem for stem in stems if self._extended.get((spec.fts, stem), True)}

    def get(self, fts: str, term: str, total: int) -> int | None:
        held = self._counts.get((fts, term))
        if held is None or abs(total - held[1]) > self.DRIFT * max(held[1], 1):
            return None
        return held[0]

    def put(self, fts: str, term: str, total: int, docs: int) -> None:
        if docs <= 0:
            return
        if len(self._counts) >= self.LIMIT:
            self._counts.clear()
        self._counts[(fts, term)] = (docs, total)


def _statistics(
    conn: sqlite3.Connection,
    spec: IndexSpec,
    words: Sequence[QueryWord],
    total: int,
    counts: TermCounts,
) -> list[_Word]:
    """How many rows hold each word, from the index's vocabulary (one statement for the terms
    ``counts`` does not hold). A word of several terms is a phrase: its rows may be as few as
    none, so its bound assumes that."""
    terms = {stem for word in words for stem in word.stems}
    docs = {term: counts.get(spec.fts, term, total) for term in terms}
    missing = sorted(term for term, held in docs.items() if held is None)
    found: dict[int, int] = {}
    for start in range(0, len(missing), COMPOUND_TERMS):  # (a long question: in pieces)
        batch = range(start, min(start + COMPOUND_TERMS, len(missing)))
        parts = [f"SELECT {n}, doc FROM {spec.vocab} WHERE term = ?" for n in batch]
        found.update(conn.execute(" UNION ALL ".join(parts), missing[start : batch.stop]))
    if missing:
        for n, term in enumerate(missing):
            holding = int(found.get(n, 0))
            docs[term] = holding
            counts.put(spec.fts, term, total, holding)
    stats = []
    for word in words:
        rows = min(docs[stem] or 0 for stem in word.stems)
        fewest = rows if len(word.stems) == 1 else 0
        stats.append(_Word(spec.searched(word.exact), rows, PRUNE_FACTOR * _idf(total, fewest)))
    return stats


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
    filters: Filters | None = None,
    precise: bool = False,
) -> Ranking:
    """The best ``fetch`` rows for ``words``, in tier order; pruning stops once the best ``k``
    cannot change (see the module doc). Run inside a read snapshot.

    Without ``precise`` the first statement gives every row it finds tier 1
    (``Ranking.provisional``), also those holding the query words only in their session
    context (when it counts) or, with ``match_all``, only as prefixes in their own text. Telling them apart row by row cost a sixth to a third of the query, and the caller
    can tell from the few rows it explains anyway: when one of them is not a tier-1 row, it
    ranks again, ``precise``."""
    if not words:
        return Ranking([], True)
    exact = [spec.searched(w.exact) for w in words]
    prefixes = [spec.searched(w.prefix_phrase) for w in words if w.prefix]
    if match_all:
        # Any form: a word's prefix phrase matches the word itself too (its Porter stem starts
        # it), so one phrase per word finds the same rows as both, at half the BM25 work; and
        # the word itself where the index holds no longer term starting with it (the same
        # rows and scores: see TermCounts.extended).
        stems = {w.stems[-1] for w in words if w.prefix}
        longer = stems if counts is None or not stems else counts.extended(conn, spec, stems)
        every = " AND ".join(
            f"({spec.searched(w.prefix_phrase if w.prefix and w.stems[-1] in longer else w.exact)})"
            for w in words
        )
        if precise:
            found = _step(conn, spec, every, fetch, filters, tier_of=_any(exact))
            return Ranking(found, len(found) < fetch, 1)
        # Every row tier 1 for now: the caller explains the best rows anyway, and ranks again
        # precisely when one of them holds no query word itself in its own text (a prefix
        # only, or the session context only).
        found = _step(conn, spec, every, fetch, filters, provisional=True)
        return Ranking(found, len(found) < fetch, 1, provisional=True)
    counts = counts or TermCounts()
    prune = prune and filters is None
    provisional = not precise and spec.has_context
    first = _tier_one(conn, spec, words, exact, k, fetch, prune, counts, filters, provisional)
    if first.provisional and prefixes and len(first.hits) < k:
        # Fewer rows than asked for: prefixes come next, which need the true tiers.
        first = _tier_one(conn, spec, words, exact, k, fetch, prune, counts, filters)
    best = [h for h in first.hits if h.tier == WORDS]
    context = [h for h in first.hits if h.tier == CONTEXT]
    if not prefixes:
        return first
    if len(best) >= k:
        # Prefix matches rank below the k best already found; only if filters later reject
        # some of those could they matter: then the ranking is not complete.
        return Ranking(first.hits, False, first.steps, first.pruned, first.provisional)
    # Prefixes: own text first (tier 2), then context rows with neither a word nor a prefix
    # in their own text. Rows with a word itself somewhere are already in `first`.
    expression, words_expr = _any(prefixes), _any(exact)
    own_prefix = _step(
        conn, spec, f"({spec.own(expression)}) NOT ({spec.own(words_expr)})", fetch, filters,
        tier=PREFIX,
    )  # fmt: skip
    steps, complete = first.steps + 1, first.complete and len(own_prefix) < fetch
    promoted = {h.rowid for h in own_prefix}
    hits = [*best, *own_prefix, *(h for h in context if h.rowid not in promoted)]
    if len(hits) < fetch and spec.has_context:
        room = fetch - len(hits)
        only = f"({expression}) NOT ({words_expr}) NOT ({spec.own(expression)})"
        more = _step(conn, spec, only, room, filters, tier=CONTEXT)
        hits += more
        steps, complete = steps + 1, complete and len(more) < room
    return Ranking(hits[:fetch], complete and len(hits) <= fetch, steps, first.pruned)


def _tier_one(
    conn: sqlite3.Connection,
    spec: IndexSpec,
    words: Sequence[QueryWord],
    exact: list[str],
    k: int,
    fetch: int,
    prune: bool,
    counts: TermCounts,
    filters: Filters | None,
    provisional: bool = False,
) -> Ranking:
    """Rows holding a query word itself: in their own text (tier 1), else in their context.
    ``provisional``: the one-statement cases give all of them tier 1 (see :func:`rank`)."""
    total = row_count(conn, spec.fts)
    if not prune or total <= SMALL_QUERY:  # small, or exact: no planning needed
        found = _step(conn, spec, _any(exact), fetch, filters, provisional=provisional)
        return Ranking(found, len(found) < fetch, 1, provisional=provisional)
    # Words no row holds cannot match: leave them out of every expression.
    stats = sorted(
        (s for s in _statistics(conn, spec, words, total, counts) if s.docs),
        key=lambda s: s.docs,
    )
    if not stats:
        return Ranking([], True)
    if sum(s.docs for s in stats) <= SMALL_QUERY:
        found = _step(
            conn, spec, _any([s.phrase for s in stats]), fetch, filters, provisional=provisional
        )
        return Ranking(found, len(found) < fetch, 1, provisional=provisional)
    # Step 1: the rows holding one of the rarest words (up to GROUP_BUDGET rows), scored with
    # every word. Step 2, only if rows without them could still be among the best k: the rest.
    group = [stats[0]]
    while (
        len(group) < len(stats)
        and sum(s.docs for s in group) + stats[len(group)].docs <= GROUP_BUDGET
    ):
        group.append(stats[len(group)])
    rest = stats[len(group) :]
    docs = _any([s.phrase for s in group])
    if not rest:
        found = _step(conn, spec, docs, fetch, filters, provisional=provisional)
        return Ranking(found, len(found) < fetch, 1, provisional=provisional)
    others = _any([s.phrase for s in rest])
    hits = _step(conn, spec, f"({docs}) AND ({others})", fetch, filters)
    complete, steps = len(hits) < fetch, 1
    # Rows holding only the rare words score at most their bound: scored only if that could
    # still put them among the best k.
    if _settled(hits, k, sum(s.bound for s in group)):
        complete = False
    else:
        alone = _step(conn, spec, f"({docs}) NOT ({others})", fetch, filters)
        complete, steps = complete and len(alone) < fetch, steps + 1
        hits = sorted([*hits, *alone], key=_order)[:fetch]
    if _settled(hits, k, sum(s.bound for s in rest)):
        return Ranking(hits, False, steps, pruned=True)
    more = _step(conn, spec, f"({others}) NOT ({docs})", fetch, filters)
    complete = complete and len(more) < fetch
    return Ranking(sorted([*hits, *more], key=_order)[:fetch], complete, steps + 1)


def _settled(hits: list[Hit], k: int, bound: float) -> bool:
    """Whether rows scoring at most ``bound`` can no longer enter the best ``k`` of ``hits``
    (sorted): the k-th is in tier 1 and scores more (BM25 scores are negative)."""
    if len(hits) < k:
        return False
    kth = hits[k - 1]
    return kth.tier == WORDS and -kth.score > bound


def _step(
    conn: sqlite3.Connection,
    spec: IndexSpec,
    expression: str,
    fetch: int,
    filters: Filters | None,
    *,
    tier: int | None = None,
    tier_of: str | None = None,
    provisional: bool = False,
) -> list[Hit]:
    """The best ``fetch`` rows of ``expression`` by BM25, each given its tier: ``tier``, or
    WORDS when its own text matched (``tier_of``, if given, in its own text) and CONTEXT
    otherwise; ``provisional``: WORDS (one BM25 per row, see :func:`rank`)."""
    fts = spec.fts
    source = f"{fts} WHERE {fts} MATCH ?"
    params: list[object] = [expression]
    if filters is not None:
        f = filters
        source = (
            f"{fts} JOIN {f.table} {f.alias} ON {f.alias}.id = {fts}.rowid"
            f" WHERE {fts} MATCH ? AND {f.where}"
        )
        params += f.params
    prelude, case = "", f"CASE WHEN own < 0 THEN {WORDS} ELSE {CONTEXT} END"
    if tier is not None or provisional:
        case = str(WORDS if tier is None else tier)
    elif tier_of is not None:  # strict mode: a word itself in the own text, else a prefix
        prelude = f"WITH t1(r) AS MATERIALIZED (SELECT rowid FROM {fts} WHERE {fts} MATCH ?) "
        params.insert(0, spec.own(tier_of))
        case = f"CASE WHEN id IN t1 THEN {WORDS} WHEN own < 0 THEN {PREFIX} ELSE {CONTEXT} END"
    own = f", {spec.own_bm25} AS own" if "own" in case else ""  # a second BM25 only if read
    # Sorted by score alone when the tier is one number: every matching row goes through the
    # sort, and each key compared cost ~3% of the statement. Equal keys keep the order FTS5
    # gives the rows in (rowid order; SQLite numbers them as they come), which tie_ordered
    # checks, re-sorting the few kept when that does not hold.
    order = "score" if case.isdigit() else "tier, score"
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples, made Hits as they are
    hits = list(map(Hit._make, cursor.execute(
        f"""{prelude}SELECT id, {case} AS tier, score FROM (
                SELECT {fts}.rowid AS id, {spec.bm25} AS score{own} FROM {source})
            ORDER BY {order} LIMIT ?""",
        [*params, fetch],
    )))  # fmt: skip
    return tie_ordered(hits)


def tie_ordered(hits: list[Hit]) -> list[Hit]:
    """``hits`` in (tier, BM25) order with ties (to :data:`SCORE_DECIMALS`) by rowid. Ordered
    here, on the few rows kept (rounding every row in SQL cost a fifth of the query), and only
    when two of them tie and are out of rowid order: the statement gives equal scores in rowid
    order, so its order is the final one unless two scores differ in their last bits only
    (rounding keeps the order otherwise, so rows that tie are next to each other)."""
    for before, after in pairwise(hits):
        # (Rounding only pairs that could need it: equal scores are common, and two rounds
        # per pair were a hundredth of a search.)
        if (
            before.rowid > after.rowid
            and after.score - before.score < _TIE_GAP
            and before.tier == after.tier
            and round(before.score, SCORE_DECIMALS) == round(after.score, SCORE_DECIMALS)
        ):
            return sorted(hits, key=_order)
    return hits
