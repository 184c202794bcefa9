"""Full-text search over observations and prompts (FTS5, BM25, natural-language queries), and
the entry point of every search mode: ``lexical`` is here, ``semantic`` and ``hybrid`` (the
default with the semantic extra) in :mod:`engram.store.hybrid`, imported only when used."""

from __future__ import annotations

from typing import Any

from engram.errors import ValidationError
from engram.project import project_name
from engram.semantic import resolve_mode
from engram.store.base import StoreBase
from engram.store.checks import check_count
from engram.store.models import Observation, Prompt
from engram.store.query import build_match, check_match_mode
from engram.store.schema import OBSERVATIONS_FTS_WEIGHTS

TOPIC_FAST_PATH_RANK = -1000.0
#: FTS columns a memory's own text lives in (everything but the session context).
OWN_COLUMNS = "{title content tool_name type project topic_key}"


class SearchMixin(StoreBase):
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
        include_deleted: bool = False,
    ) -> list[Observation]:
        """Observations matching ``query``, best first (soft-deleted ones too with
        ``include_deleted``: their ``deleted_at`` is set; deleted memories have no vectors, so
        they are found by their words).

        ``mode``: ``lexical`` (words), ``semantic`` (meaning) or ``hybrid`` (both); by default
        hybrid when the semantic extra is installed, else lexical (``ENGRAM_SEARCH_MODE``
        changes the default). A query containing ``/`` first matches topic keys exactly. Any
        text is safe: words are quoted, so FTS5 syntax in the query is only ever searched for,
        never interpreted.
        """
        if not query or not query.strip():
            raise ValidationError("search: query cannot be empty", field="query")
        search_mode = resolve_mode(mode, self.config.search_mode)
        if search_mode != "lexical" and not include_deleted:
            from engram.store.hybrid import search_by_meaning

            return search_by_meaning(
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
        return self._search_lexical(
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
        clauses, params = self._observation_filters(  # type: ignore[attr-defined]
            project, scope, type, since, until, include_deleted=include_deleted
        )
        where = " AND ".join(clauses)
        results: list[Observation] = []
        seen: set[int] = set()
        raw = query.strip()
        if "/" in raw:
            rows = self.db.rows(
                f"""SELECT o.*, {TOPIC_FAST_PATH_RANK} AS rank FROM observations o
                    WHERE o.topic_key = ? AND {where}
                    ORDER BY o.updated_at DESC LIMIT ?""",
                [raw.lower(), *params, limit],
            )
            for row in rows:
                seen.add(row["id"])
                results.append(Observation.from_row(row))
        match = build_match(raw, mode)
        if match is not None and len(results) < limit:
            for row in self._ranked(match, where, params, limit + len(seen)):
                if row["id"] not in seen and len(results) < limit:
                    results.append(Observation.from_row(row))
        return results

    def _ranked(self, match: str, where: str, params: list[Any], limit: int) -> list:
        """The best ``limit`` live rows for an FTS expression, filtered by ``where``.

        Ranking inside FTS alone is several times cheaper than joining every match to its row
        before sorting, so first rank a few more candidates than needed in FTS, then filter those
        rows; only when filters reject too many candidates fall back to the full join.
        """
        weight = float(self.config.search_context_weight)
        if weight <= 0:
            match = f"{OWN_COLUMNS} : ({match})"
        weights = ", ".join(str(w) for w in (*OBSERVATIONS_FTS_WEIGHTS[:-1], max(weight, 0.0)))
        score = f"bm25(observations_fts, {weights})"
        overfetch = limit * 4 + 20
        candidates = self.db.rows(
            f"""SELECT rowid, {score} AS score FROM observations_fts
                WHERE observations_fts MATCH ? ORDER BY score LIMIT ?""",
            [match, overfetch],
        )
        if not candidates:
            return []
        scores = {r[0]: r[1] for r in candidates}
        marks = ", ".join("?" for _ in scores)
        rows = self.db.rows(
            f"SELECT o.* FROM observations o WHERE o.id IN ({marks}) AND {where}",
            [*scores, *params],
        )
        if len(rows) < limit and len(candidates) == overfetch:
            return self.db.rows(
                f"""SELECT o.*, {score} AS rank
                    FROM observations_fts JOIN observations o ON o.id = observations_fts.rowid
                    WHERE observations_fts MATCH ? AND {where}
                    ORDER BY rank LIMIT ?""",
                [match, *params, limit],
            )
        ranked = sorted(rows, key=lambda r: (scores[r["id"]], r["id"]))[:limit]
        return [_with_rank(r, scores[r["id"]]) for r in ranked]

    def search_prompts(
        self,
        query: str,
        *,
        project: str | None = None,
        limit: int | None = None,
        match_mode: str = "any",
    ) -> list[Prompt]:
        if not query or not query.strip():
            raise ValidationError("search: query cannot be empty", field="query")
        match = build_match(query, check_match_mode(match_mode))
        if match is None:
            return []
        clauses, params = ["prompts_fts MATCH ?"], [match]
        if project:
            clauses.append("p.project = ?")
            params.append(project_name(project))
        rows = self.db.rows(
            f"""SELECT p.*, prompts_fts.rank AS rank
                FROM prompts_fts JOIN user_prompts p ON p.id = prompts_fts.rowid
                WHERE {" AND ".join(clauses)} ORDER BY prompts_fts.rank LIMIT ?""",
            [*params, self._search_limit(limit)],
        )
        return [Prompt.from_row(r) for r in rows]


def _with_rank(row: Any, rank: float) -> dict[str, Any]:
    data = dict(row)
    data["rank"] = rank
    return data
