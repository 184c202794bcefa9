"""Full-text search over observations and prompts: natural-language queries, tiered BM25
ranking (engram/store/ranking.py) and, for every result, why it matched.

One implementation for every face: the CLI, MCP, HTTP and the TUI only render what
:meth:`SearchMixin.search` returns (``Observation.match``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from engram.errors import ValidationError
from engram.project import project_name
from engram.store import terms
from engram.store.base import StoreBase
from engram.store.models import Observation, Prompt, SearchMatch
from engram.store.query import QueryWord, check_match_mode, plan_words
from engram.store.ranking import Hit, IndexSpec, rank, rank_filtered
from engram.store.schema import OBSERVATIONS_FTS_COLUMNS, OBSERVATIONS_FTS_WEIGHTS

TOPIC_FAST_PATH_RANK = -1000.0
#: FTS columns a memory's own text lives in (everything but the session context).
OWN_COLUMNS = tuple(c for c in OBSERVATIONS_FTS_COLUMNS if c != "search_context")
TIER_NAMES = {1: "words", 2: "prefix", 3: "context"}
PROMPTS_SPEC = IndexSpec(
    fts="prompts_fts",
    vocab="prompts_fts_vocab",
    columns=("content", "project"),
    own_columns=("content", "project"),
    weights=(1.0, 1.0),
)

T = TypeVar("T", Observation, Prompt)


def observations_spec(context_weight: float) -> IndexSpec:
    """The observations index with the session context weighted ``context_weight`` (≤ 0: off)."""
    return IndexSpec(
        fts="observations_fts",
        vocab="observations_fts_vocab",
        columns=OBSERVATIONS_FTS_COLUMNS,
        own_columns=OWN_COLUMNS,
        weights=(*OBSERVATIONS_FTS_WEIGHTS[:-1], max(float(context_weight), 0.0)),
    )


def _own_text(obs: Observation) -> str:
    return "\n".join(
        v
        for v in (obs.title, obs.content, obs.tool_name, obs.type, obs.project, obs.topic_key)
        if v
    )


class SearchMixin(StoreBase):
    def _search_limit(self, limit: Any) -> int:
        try:
            value = int(limit) if limit is not None else self.config.default_search_limit
        except (TypeError, ValueError):
            raise ValidationError(
                f"limit must be an integer, got {limit!r}", field="limit"
            ) from None
        if value < 1:
            value = self.config.default_search_limit
        return min(value, self.config.max_search_results)

    def search(
        self,
        query: str,
        *,
        type: str | None = None,
        project: str | None = None,
        scope: str | None = None,
        limit: int | None = None,
        match_mode: str = "any",
        since: str | None = None,
        until: str | None = None,
    ) -> list[Observation]:
        """Observations matching ``query``, best first, each with ``match`` saying why.

        A query containing ``/`` first matches topic keys exactly. Any text is safe: words are
        quoted, so FTS5 syntax in the query is only ever searched for, never interpreted.
        """
        if not query or not query.strip():
            raise ValidationError("search: query cannot be empty", field="query")
        mode = check_match_mode(match_mode)
        limit = self._search_limit(limit)
        clauses, params = self._observation_filters(  # type: ignore[attr-defined]
            project, scope, type, since, until
        )
        where = " AND ".join(clauses)
        raw = query.strip()
        words = plan_words(raw)
        weight = float(self.config.search_context_weight)
        results: list[Observation] = []
        contexts: dict[int, str] = {}
        with self.db.read() as conn:
            if "/" in raw:
                rows = conn.execute(
                    f"""SELECT o.*, {TOPIC_FAST_PATH_RANK} AS rank FROM observations o
                        WHERE o.topic_key = ? AND {where}
                        ORDER BY o.updated_at DESC LIMIT ?""",
                    [raw.lower(), *params, limit],
                ).fetchall()
                for row in rows:
                    obs = Observation.from_row(row)
                    obs.match = SearchMatch("topic")
                    results.append(obs)
            if words and len(results) < limit:
                seen = {o.id for o in results}
                ranked = self._ranked(
                    conn,
                    observations_spec(weight),
                    words,
                    mode,
                    limit + len(seen),
                    "observations",
                    "o",
                    where,
                    params,
                    Observation.from_row,
                )
                for obs, row in ranked:
                    if obs.id not in seen and len(results) < limit:
                        results.append(obs)
                        contexts[obs.id] = row["search_context"] if weight > 0 else ""
        _explain(
            [o for o in results if o.id in contexts],
            words,
            lambda o: (_own_text(o), contexts[o.id]),
        )
        return results

    def _ranked(
        self,
        conn: sqlite3.Connection,
        spec: IndexSpec,
        words: Sequence[QueryWord],
        mode: str,
        limit: int,
        table: str,
        alias: str,
        where: str,
        params: list[Any],
        build: Callable[[sqlite3.Row], T],
    ) -> list[tuple[T, sqlite3.Row]]:
        """The best ``limit`` rows for ``words`` passing ``where`` (built, with their tier and
        BM25 set, and the raw row).

        Ranking inside FTS alone is several times cheaper than joining every match to its row,
        so rank in FTS first (a few more than needed), then filter those rows; only when the
        filters reject too many fall back to ranking with the filters inside the query.
        """
        fetch = limit * 4 + 20
        ranking = rank(
            conn,
            spec,
            words,
            match_all=mode == "all",
            k=limit,
            fetch=fetch,
            prune=self.config.search_pruning,
        )
        hits = {h.rowid: h for h in ranking.hits}
        found: list[tuple[T, sqlite3.Row]] = []
        if hits:
            marks = ", ".join("?" for _ in hits)
            rows = {
                r["id"]: r
                for r in conn.execute(
                    # NOT INDEXED: look the ids up by rowid, never scan a project index.
                    f"SELECT {alias}.* FROM {table} {alias} NOT INDEXED"
                    f" WHERE {alias}.id IN ({marks}) AND {where}",
                    [*hits, *params],
                )
            }
            for hit in ranking.hits:
                if hit.rowid in rows and len(found) < limit:
                    found.append((_built(build, rows[hit.rowid], hit), rows[hit.rowid]))
        if len(found) < limit and not ranking.complete:
            found = [
                (_built(build, row, Hit(row["id"], row["tier"], row["rank"])), row)
                for row in rank_filtered(
                    conn,
                    spec,
                    words,
                    match_all=mode == "all",
                    table=table,
                    alias=alias,
                    where=where,
                    params=params,
                    limit=limit,
                )
            ]
        return found

    def search_prompts(
        self,
        query: str,
        *,
        project: str | None = None,
        limit: int | None = None,
        match_mode: str = "any",
    ) -> list[Prompt]:
        """Prompts matching ``query`` (words, then prefixes; BM25 within each), with ``match``."""
        if not query or not query.strip():
            raise ValidationError("search: query cannot be empty", field="query")
        mode = check_match_mode(match_mode)
        limit = self._search_limit(limit)
        words = plan_words(query)
        if not words:
            return []
        clauses, params = ["1"], []
        if project:
            clauses.append("p.project = ?")
            params.append(project_name(project))
        with self.db.read() as conn:
            ranked = self._ranked(
                conn,
                PROMPTS_SPEC,
                words,
                mode,
                limit,
                "user_prompts",
                "p",
                " AND ".join(clauses),
                params,
                Prompt.from_row,
            )
        found = [prompt for prompt, _ in ranked]
        _explain(found, words, lambda p: (f"{p.content}\n{p.project}", ""))
        return found


def _built(build: Callable[[sqlite3.Row], T], row: sqlite3.Row, hit: Hit) -> T:
    item = build(row)
    item.rank = hit.score
    item.match = SearchMatch(TIER_NAMES.get(hit.tier, "context"))
    return item


def _explain(
    items: Sequence[Observation | Prompt],
    words: Sequence[QueryWord],
    texts: Callable[[Any], tuple[str, str]],
) -> None:
    """Fill in each result's matched words (its tier came from the ranking)."""
    if not items or not words:
        return
    found = terms.find([texts(item) for item in items], [w.probe for w in words])
    for item, hit in zip(items, found, strict=True):
        if item.match is None:
            item.match = SearchMatch("words")
        item.match.words = hit.words
        item.match.prefix_words = hit.prefix_words
        item.match.context_words = hit.context_words
