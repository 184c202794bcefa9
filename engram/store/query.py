"""Turning any user text into a safe FTS5 query.

Agents search with questions ("how did we fix the login timeout?"). The words left after a small
stoplist of function and question words become quoted FTS5 terms — OR-ed by default, so BM25 ranks
partial matches; AND-ed with ``match_mode="all"``. Quoting every term means no user text can be
FTS5 syntax (``NEAR``, ``-``, ``:``, ``*``, unbalanced quotes are all just words or nothing).
"""

from __future__ import annotations

import re

from engram.errors import ValidationError

MATCH_MODES = ("any", "all")

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don down
    during each few for from further had hadn has hasn have haven having he her here hers herself
    him himself his how i if in into is isn it its itself just let me more most mustn my myself
    no nor not now of off on once only or other ought our ours ourselves out over own same shan
    she should shouldn so some such than that the their theirs them themselves then there these
    they this those through to too under until up upon very was wasn we were weren what when
    where which while who whom whose why will with won would wouldn you your yours yourself
    yourselves s t ll re ve d m also anyone anything get got know tell remember recall us
    """.split()
)

_WORD = re.compile(r"\w+", re.UNICODE)


def query_words(text: str) -> list[str]:
    """Lowercased words of ``text`` without stopwords (all words if only stopwords remain)."""
    words = [w.lower() for w in _WORD.findall(text)]
    kept = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(kept))


def check_match_mode(match_mode: str | None) -> str:
    mode = (match_mode or "any").strip().lower()
    if mode not in MATCH_MODES:
        raise ValidationError(
            f"match_mode must be 'any' or 'all', got {match_mode!r}", field="match_mode"
        )
    return mode


def build_match(text: str, match_mode: str = "any") -> str | None:
    """The FTS5 MATCH expression for ``text``, or ``None`` when it holds no searchable word."""
    mode = check_match_mode(match_mode)
    terms = [f'"{w}"' for w in query_words(text)]
    if not terms:
        return None
    return (" OR " if mode == "any" else " ").join(terms)
