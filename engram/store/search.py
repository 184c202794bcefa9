"""Full-text search over observations and prompts: natural-language queries, tiered BM25
ranking (engram/store/ranking.py) and, for every result, why it matched; and the entry point of
every search mode: ``lexical`` is here, ``semantic`` and ``hybrid`` (the default with the
semantic extra) in :mod:`engram.store.hybrid`, imported only when used.

One implementation for every face: the CLI, MCP, HTTP and the TUI only render what
:meth:`SearchMixin.search` returns (``Observation.match``, and ``found_by`` with meaning).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from operator import itemgetter
from typing import Any

from engram.errors import ValidationError
from engram.project import project_name
from engram.semantic import resolve_mode
from engram.store import terms
from engram.store.base import StoreBase
from engram.store.checks import check_count
from engram.store.models import Observation, Prompt, SearchMatch
from engram.store.query import QueryWord, check_match_mode, plan_words
from engram.store.ranking import (
    CONTEXT,
    PREFIX,
    WORDS,
    Filters,
    Hit,
    IndexSpec,
    TermCounts,
    rank,
)
from engram.store.schema import OBSERVATIONS_FTS_COLUMNS, OBSERVATIONS_FTS_WEIGHTS
from engram.store.tiebreak import break_ties

TOPIC_FAST_PATH_RANK = -1000.0
#: FTS columns a memory's own text lives in (everything but the session context).
OWN_COLUMNS = tuple(c for c in OBSERVATIONS_FTS_COLUMNS if c != "search_context")
TIER_NAMES = {WORDS: "words", PREFIX: "prefix", CONTEXT: "context"}
PROMPTS_SPEC = IndexSpec(
    fts="prompts_fts",
    vocab="prompts_fts_vocab",
    columns=("content", "project"),
    own_columns=("content", "project"),
    weights=(1.0, 1.0),
)


@lru_cache(maxsize=16)
def observations_spec(context_weight: float) -> IndexSpec:
    """The observations index with the session context weighted ``context_weight`` (≤ 0: off)."""
    return IndexSpec(
        fts="observations_fts",
        vocab="observations_fts_vocab",
        columns=OBSERVATIONS_FTS_COLUMNS,
        own_columns=OWN_COLUMNS,
        weights=(*OBSERVATIONS_FTS_WEIGHTS[:-1], max(float(context_weight), 0.0)),
    )


#: (own text, context text) of a row, made for the columns of one statement.
Texts = Callable[[sqlite3.Row], tuple[str, str]]


@dataclass(frozen=True, slots=True)
class _Table:
    """Where ranked rows come from, and how their texts read when explaining a match."""

    name: str
    alias: str
    build: Callable[[list[sqlite3.Row]], list[Any]]  # the rows of one statement
    texts: Callable[[tuple[str, ...]], Texts]  # given the statement's column names


@lru_cache(maxsize=16)
def _observation_texts(keys: tuple[str, ...], context: bool) -> Texts:
    """The texts of observations rows with these columns, read by position (by name, each
    column of each row was looked up among ~30)."""
    own_texts = itemgetter(*(keys.index(c) for c in OWN_COLUMNS))
    ctx = keys.index("search_context")

    def texts(row: sqlite3.Row) -> tuple[str, str]:
        own = "\n".join(filter(None, own_texts(row)))
        return own, row[ctx] if context else ""

    return texts


def _prompt_texts(row: sqlite3.Row) -> tuple[str, str]:
    return f"{row['content']}\n{row['project']}", ""


def _prompts(rows: list[sqlite3.Row]) -> list[Prompt]:
    return [Prompt.from_row(row) for row in rows]


PROMPTS = _Table("user_prompts", "p", _prompts, lambda keys: _prompt_texts)


class SearchMixin(StoreBase):
    #: Rows per index term, remembered for the store's life (engram/store/ranking.py).
    term_counts: TermCounts

    def _search_limit(self, limit: Any) -> int:
        """``None`` is the default; below 1 is refused; above the maximum reads as it."""
        return check_count(
            limit,
            "limit",
            default=self.config.default_search_limit,
            maximum=self.config.max_search_results,
        )

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
        mode: str | None = None,
        as_of: str | None = None,
        record_access: bool = True,
        include_deleted: bool = False,
        check_conflicts: bool = False,
    ) -> list[Observation]:
        """Observations matching ``query``, best first (importance breaks near ties), each with
        ``match`` saying why (soft-deleted ones too with ``include_deleted``: their
        ``deleted_at`` is set; deleted memories have no vectors, so they are found by their
        words).

        ``mode``: ``lexical`` (words), ``semantic`` (meaning) or ``hybrid`` (both); by default
        hybrid when the semantic extra is installed, else lexical (``ENGRAM_SEARCH_MODE``
        changes the default). A query containing ``/`` first matches topic keys exactly. Any
        text is safe: words are quoted, so FTS5 syntax in the query is only ever searched for,
        never interpreted. Importance breaks near ties (:mod:`engram.store.tiebreak`).
        ``as_of`` (a date, or a date and time) answers with what was true then, by words (see
        :mod:`engram.store.asof`). Each result counts as an access unless ``record_access`` is
        false (docs/importance.md). Results carry their relation notes (issue 20);
        ``check_conflicts`` first runs the queued conflict checks, newest first, for at most
        :data:`engram.store.conflicts.READ_BUDGET_S` — what the faces that show people the
        notes ask for. By default a search takes on no such work: a backlog of checks (after a
        bulk save) cost every read its whole budget, and a search is a read that writes
        nothing (the workers of ``engram mcp`` and ``engram serve`` run the queue).
        """
        if not query or not query.strip():
            raise ValidationError("search: query cannot be empty", field="query")
        found = self._search_any(
            query, type=type, project=project, scope=scope, limit=limit, match_mode=match_mode,
            since=since, until=until, mode=mode, as_of=as_of, include_deleted=include_deleted,
            check_conflicts=check_conflicts,
        )  # fmt: skip
        if self.config.importance_tiebreak and not (as_of and str(as_of).strip()):
            # Within the page the ranking chose: the set of results is the ranking's own, so
            # importance can never bring in a memory the ranking left out.
            found = break_ties(found)
        if record_access:
            self.access.note(found)
        return found

    def _search_any(
        self,
        query: str,
        *,
        type: str | None,
        project: str | None,
        scope: str | None,
        limit: int | None,
        match_mode: str,
        since: str | None,
        until: str | None,
        mode: str | None,
        as_of: str | None,
        include_deleted: bool = False,
        check_conflicts: bool = False,
    ) -> list[Observation]:
        """The results of :meth:`search`, by the kind of search asked for."""
        if as_of is not None and str(as_of).strip():
            from engram.store import asof

            return asof.search(
                self, query, as_of, mode=check_match_mode(match_mode),
                limit=self._search_limit(limit), type=type, project=project, scope=scope,
                since=since, until=until,
            )  # fmt: skip
        search_mode = resolve_mode(mode, self.config.search_mode)
        if search_mode != "lexical" and not include_deleted:
            from engram.store.hybrid import search_by_meaning

            results = search_by_meaning(
                self,  # type: ignore[arg-type]
                query,
                mode=search_mode,
                type=type,
                project=project,
                scope=scope,
                limit=self._search_limit(limit),
                match_mode=match_mode,
                since=since,
                until=until,
            )
        elif not check_conflicts:
            # The ranking and the relation notes read one snapshot, in one transaction.
            with self.db.read():
                return self.annotate_results(self._search_lexical(
                    query, type=type, project=project, scope=scope,
                    limit=self._search_limit(limit), match_mode=match_mode, since=since,
                    until=until, include_deleted=include_deleted,
                ))  # fmt: skip
        else:
            results = self._search_lexical(
                query,
                type=type,
                project=project,
                scope=scope,
                limit=self._search_limit(limit),
                match_mode=match_mode,
                since=since,
                until=until,
                include_deleted=include_deleted,
            )
        # After ranking (issue 20): relation notes, and superseded memories below their successor.
        return self.annotate_results(results, check_conflicts=check_conflicts)

    def _search_lexical(
        self,
        query: str,
        *,
        type: str | None,
        project: str | None,
        scope: str | None,
        limit: int,
        match_mode: str,
        since: str | None,
        until: str | None,
        include_deleted: bool = False,
    ) -> list[Observation]:
        """The lexical order: the ``limit`` best word matches (``limit`` is not capped, so
        hybrid search can take more candidates than a caller may ask for)."""
        mode = check_match_mode(match_mode)
        clauses, params = self._observation_filters(
            project, scope, type, since, until, include_deleted=include_deleted
        )
        where = " AND ".join(clauses)
        raw = query.strip()
        words = plan_words(raw)
        weight = float(self.config.search_context_weight)
        results: list[Observation] = []
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
                table = _Table("observations", "o", Observation.from_rows,
                               partial(_observation_texts, context=weight > 0))  # fmt: skip
                ranked = self._ranked(
                    conn, observations_spec(weight), table, words, mode, limit + len(seen),
                    where, params,
                )  # fmt: skip
                results += [o for o in ranked if o.id not in seen][: limit - len(results)]
        return results

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
            return self._ranked(
                conn, PROMPTS_SPEC, PROMPTS, words, mode, limit, " AND ".join(clauses), params
            )

    def _ranked(
        self,
        conn: sqlite3.Connection,
        spec: IndexSpec,
        table: _Table,
        words: Sequence[QueryWord],
        mode: str,
        limit: int,
        where: str,
        params: list[Any],
        precise: bool = False,
    ) -> list[Any]:
        """The best ``limit`` rows for ``words`` that pass ``where``, built, each with its tier,
        BM25 (``rank``) and matched words.

        Ranking inside FTS alone (engram/store/ranking.py) is several times cheaper than joining
        every match to its row, so rank there first (a few more than needed), then keep the rows
        the filters accept; only when the filters reject too many, rank again with them inside.
        """
        # Room for rows the filters reject: plenty when the caller filters (a project, a
        # type...), a little when only deleted rows can be rejected (a soft delete leaves a
        # memory in the index); too few kept means ranking again with the filters inside.
        fetch = limit * 4 + 20 if params else limit + 10
        match_all = mode == "all"
        ranking = rank(
            conn, spec, words, match_all=match_all, k=limit, fetch=fetch, precise=precise,
            prune=self.config.search_pruning, counts=self.term_counts,
        )  # fmt: skip
        a = table.alias
        rows: dict[int, sqlite3.Row] = {}
        hits: list[Hit] = []
        candidates = ranking.hits
        while candidates and len(hits) < limit:
            # The best candidates' rows, those the filters keep (NOT INDEXED: by rowid, never
            # a scan of a project index): only as many as are still needed when just deleted
            # rows can be rejected, every candidate at once when the caller filters.
            take = candidates if params else candidates[: limit - len(hits)]
            candidates = candidates[len(take) :]
            marks = ", ".join("?" for _ in take)
            rows.update(
                (r["id"], r)
                for r in conn.execute(
                    f"SELECT {a}.* FROM {table.name} {a} NOT INDEXED"
                    f" WHERE {a}.id IN ({marks}) AND {where}",
                    [*(h.rowid for h in take), *params],
                )
            )
            hits += [h for h in take if h.rowid in rows]
        if len(hits) < limit and not ranking.complete:
            filters = Filters(table.name, a, where, tuple(params))
            hits = rank(
                conn, spec, words, match_all=match_all, k=limit, fetch=fetch, precise=precise,
                prune=False, filters=filters,
            ).hits  # fmt: skip
            missing = [h.rowid for h in hits[:limit] if h.rowid not in rows]
            if missing:
                marks = ", ".join("?" for _ in missing)
                rows.update(
                    (r["id"], r)
                    for r in conn.execute(
                        f"SELECT * FROM {table.name} NOT INDEXED WHERE id IN ({marks})", missing
                    )
                )
        best = hits[:limit]
        if not best:
            return []
        chosen = [rows[h.rowid] for h in best]
        texts = table.texts(tuple(chosen[0].keys()))
        found = terms.find([texts(row) for row in chosen], [w.probe for w in words])
        if ranking.provisional and any(
            h.tier == WORDS and not f.words for h, f in zip(best, found, strict=True)
        ):
            # A row holding the words only as prefixes, or only in its session context,
            # ranked among those holding them themselves: rank precisely (the explanations
            # just computed tell).
            return self._ranked(conn, spec, table, words, mode, limit, where, params, True)
        built = table.build(chosen)
        for item, h, match in zip(built, best, found, strict=True):
            item.rank = h.score
            item.match = SearchMatch(
                TIER_NAMES[h.tier], match.words, match.prefix_words, match.context_words
            )
        return built
