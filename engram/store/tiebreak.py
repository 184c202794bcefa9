"""Importance as a tie-breaker in search (docs/importance.md, "Search").

Ranking decides; importance only reorders, within the page of results the ranking returned,
results whose relevance is practically equal: a run of consecutive results (same match tier,
when the ranking has tiers) whose BM25 scores are within
:data:`TIE_BAND` of the run's best one is ordered by importance, highest first, keeping the
ranking's order among equals. A result can therefore only move above results that scored within
0.2 % of it, never above a clearly better match. ``bench/retrieval_bench.py`` measures it with
and without (docs/importance.md): at 0.2 % nothing is lost (wider bands, 0.5-2 %, cost a hit@1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: How close two BM25 scores must be (relative to the better one) to count as a tie.
TIE_BAND = 0.002
#: Extra results the as-of search ranks so that a tie at its last place can still be broken
#: (live search breaks ties within the page its ranking returns: pruned ranking is exact for
#: that page only).
TIE_EXTRA = 5


def _tier(result: Any) -> object:
    match = getattr(result, "match", None)
    return getattr(match, "tier", None)


def tied(best: Any, other: Any, band: float = TIE_BAND) -> bool:
    """Whether ``other`` ranks practically equal to ``best`` (ranks: lower is better)."""
    if best.rank is None or other.rank is None or _tier(best) != _tier(other):
        return False
    return bool(abs(other.rank - best.rank) <= band * max(abs(best.rank), 1e-9))


def break_ties(results: Sequence[Any], band: float = TIE_BAND) -> list[Any]:
    """``results`` (best first) with each run of tied results ordered by importance."""
    # What tied() asks of each pair, read once per result (most pages have runs to look at).
    ranks = [getattr(r, "rank", None) for r in results]
    tiers = [_tier(r) for r in results]
    ordered: list[Any] = []
    start, count = 0, len(results)
    while start < count:
        best, tier = ranks[start], tiers[start]
        end = start + 1
        if best is not None:
            close = band * max(abs(best), 1e-9)
            while (
                end < count
                and ranks[end] is not None
                and tiers[end] == tier
                and abs(ranks[end] - best) <= close
            ):
                end += 1
        if end - start == 1:
            ordered.append(results[start])
        else:
            ordered += sorted(results[start:end], key=_importance)
        start = end
    return ordered


def _importance(result: Any) -> float:
    return -float(getattr(result, "importance", 0.0) or 0.0)
