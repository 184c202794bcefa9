"""Lexical ranking over one FTS5 index: tiers first, BM25 within a tier, bounded work.

Tiers (DESIGN §3 "Search"): 1 — a query word matches the row's own text; 2 — only as a prefix of
a longer word there; 3 — only through the session context. Within a tier, FTS5's BM25 over every
phrase of the query (each word exactly and, when allowed, as a prefix) with the column weights.

Bounded work. Broad questions match most of the store, and scoring every match is what made
search slow (BM25 costs ~1-2 µs per matching row). So words are taken most selective first
(fewest documents), in groups of at most :data:`GROUP_BUDGET` documents. Each step fully scores
the rows that contain a word of its group and none of the earlier groups (BM25 is a sum over
phrases, so those rows get their exact final score). After a step, if the k-th best row is in
tier 1 and beats what the unseen rows could still reach — the sum over the remaining words of
:data:`PRUNE_FACTOR` × their phrases' IDF — the rest is skipped: rows that hold only very common
words cannot enter the top k. With the exact BM25 bound (k1 + 1 = 2.2) the result would never
change; the smaller factor trades a little exactness (measured by bench/retrieval_bench.py) for
speed.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from engram.store.query import QueryWord
from engram.store.terms import upper_bound

#: Most documents one step scores (a word more common than that is a step of its own).
GROUP_BUDGET = 1500
#: What an unseen word is assumed to add to a row's score at most, per phrase, in IDF units. A
#: word matched once in a row of average length adds ~1.0 × IDF; the exact bound is 2.2.
PRUNE_FACTOR = 1.2
#: Fewer matching documents than this (in all) are simply scored in one step.
SMALL_QUERY = 2 * GROUP_BUDGET


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


@dataclass(frozen=True, slots=True)
class Hit:
    rowid: int
    tier: int
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
    docs: int  # documents holding it in some form (an over-estimate for prefixes)
    bound: float  # most it may add to a score (see PRUNE_FACTOR)


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


def _statistics(
    conn: sqlite3.Connection, spec: IndexSpec, words: Sequence[QueryWord], total: int
) -> list[_Word]:
    """How many rows hold each word in any form, from the index's vocabulary in one statement
    (summed over the terms a prefix covers: an over-estimate; a word of several terms counts
    by its rarest one)."""
    parts, params = [], []
    for i, word in enumerate(words):
        for position, stem in enumerate(word.stems):
            if word.prefix and position == len(word.stems) - 1:
                parts.append(f"SELECT {i}, sum(doc) FROM {spec.vocab} WHERE term >= ? AND term < ?")
                params += [stem, upper_bound(stem)]
            else:
                parts.append(f"SELECT {i}, sum(doc) FROM {spec.vocab} WHERE term = ?")
                params.append(stem)
    docs: dict[int, int] = {}
    for i, count in conn.execute(" UNION ALL ".join(parts), params):
        docs[i] = min(docs.get(i, total), int(count or 0))
    return [
        # One phrase per word: FTS5 weighs it by the rows holding the word in any form.
        _Word(
            w, spec_expression(spec, w), docs.get(i, 0), PRUNE_FACTOR * _idf(total, docs.get(i, 0))
        )
        for i, w in enumerate(words)
    ]


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
) -> Ranking:
    """The best ``fetch`` rows for ``words`` by (tier, BM25), rowid breaking ties; pruning
    stops once the best ``k`` cannot change (see the module doc). Run inside a read snapshot."""
    if not words:
        return Ranking([], True)
    exprs = [spec_expression(spec, w) for w in words]
    exacts = _any([w.exact for w in words])
    phrases = _any(exprs)
    tiers = (spec.own(exacts), spec.own(phrases)) if spec.has_context else (exacts, None)
    if match_all:
        return _single(conn, spec, " AND ".join(f"({e})" for e in exprs), tiers, fetch)
    total = row_count(conn, spec.fts)
    # Words no row holds cannot match: leave them out of every expression.
    stats = sorted(
        (s for s in _statistics(conn, spec, words, total) if s.docs), key=lambda s: s.docs
    )
    if not stats:
        return Ranking([], True)
    if not prune or sum(s.docs for s in stats) <= SMALL_QUERY:
        return _single(conn, spec, _any([s.expression for s in stats]), tiers, fetch)
    hits: list[Hit] = []
    complete, steps, done = True, 0, 0
    while done < len(stats):
        group = [stats[done]]
        budget = stats[done].docs
        while (
            done + len(group) < len(stats)
            and budget + stats[done + len(group)].docs <= GROUP_BUDGET
        ):
            budget += stats[done + len(group)].docs
            group.append(stats[done + len(group)])
        seen, rest = stats[:done], stats[done + len(group) :]
        docs = _any([s.expression for s in group])
        if seen:
            docs = f"({docs}) NOT ({_any([s.expression for s in seen])})"
        arms = [docs]
        if rest:
            others = _any([s.expression for s in rest])
            arms = [f"({docs}) AND ({others})", f"({docs}) NOT ({others})"]
        found = _step(conn, spec, arms, docs, tiers, fetch)
        steps += 1
        complete = complete and len(found) < fetch
        hits = sorted([*hits, *found], key=_order)[:fetch]
        done += len(group)
        if rest and len(hits) >= k:
            kth = hits[k - 1]
            if kth.tier == 1 and -kth.score > sum(s.bound for s in rest):
                return Ranking(hits, False, steps, pruned=True)
    return Ranking(hits, complete, steps)


def _order(hit: Hit) -> tuple[int, float, int]:
    return (hit.tier, hit.score, hit.rowid)


def _single(
    conn: sqlite3.Connection,
    spec: IndexSpec,
    expression: str,
    tiers: tuple[str, str | None],
    fetch: int,
) -> Ranking:
    found = _step(conn, spec, [expression], expression, tiers, fetch)
    return Ranking(found, len(found) < fetch, 1)


def _tier_sql(
    spec: IndexSpec, tiers: tuple[str, str | None], docs: str
) -> tuple[str, str, list[str]]:
    """CTEs naming the rows of tier 1 (and 2) among ``docs``, and the CASE giving a row's tier."""
    exact, prefix = tiers
    ctes = [f"t1(r) AS MATERIALIZED (SELECT rowid FROM {spec.fts} WHERE {spec.fts} MATCH ?)"]
    params = [f"({exact}) AND ({docs})"]
    case = "CASE WHEN id IN t1 THEN 1 ELSE 2 END"
    if prefix is not None:
        ctes.append(
            f"t2(r) AS MATERIALIZED (SELECT rowid FROM {spec.fts} WHERE {spec.fts} MATCH ?)"
        )
        params.append(f"({prefix}) AND ({docs})")
        case = "CASE WHEN id IN t1 THEN 1 WHEN id IN t2 THEN 2 ELSE 3 END"
    return "WITH " + ", ".join(ctes), case, params


def _step(
    conn: sqlite3.Connection,
    spec: IndexSpec,
    arms: Sequence[str],
    docs: str,
    tiers: tuple[str, str | None],
    fetch: int,
) -> list[Hit]:
    """The best ``fetch`` rows of ``arms`` (disjoint FTS5 expressions), fully scored."""
    with_sql, case, params = _tier_sql(spec, tiers, docs)
    union = " UNION ALL ".join(
        f"SELECT rowid AS id, {spec.bm25} AS score FROM {spec.fts} WHERE {spec.fts} MATCH ?"
        for _ in arms
    )
    rows = conn.execute(
        f"""{with_sql}
            SELECT id, {case} AS tier, score FROM ({union})
            ORDER BY tier, score, id LIMIT ?""",
        [*params, *arms, fetch],
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
    """Every match ranked with ``table``'s filters applied inside the query (exact, slower): for
    when the filters reject most of the best rows of the whole index."""
    exprs = [spec_expression(spec, w) for w in words]
    expression = " AND ".join(f"({e})" for e in exprs) if match_all else _any(exprs)
    exacts = _any([w.exact for w in words])
    tiers = (spec.own(exacts), spec.own(_any(exprs))) if spec.has_context else (exacts, None)
    with_sql, case, tier_params = _tier_sql(spec, tiers, expression)
    case = case.replace("id IN", f"{alias}.id IN")
    return conn.execute(
        f"""{with_sql}
            SELECT {alias}.*, {case} AS tier, {spec.bm25} AS rank
            FROM {spec.fts} JOIN {table} {alias} ON {alias}.id = {spec.fts}.rowid
            WHERE {spec.fts} MATCH ? AND {where}
            ORDER BY tier, rank, {alias}.id LIMIT ?""",
        [*tier_params, expression, *params, limit],
    ).fetchall()
