"""Turning any user text into a safe FTS5 query.

Agents search with questions ("how did we fix the login timeout?"). The words left after a small
stoplist of function and question words become quoted FTS5 terms — OR-ed by default, so BM25 ranks
partial matches; AND-ed with ``match_mode="all"``. Quoting every term means no user text can be
FTS5 syntax (``NEAR``, ``-``, ``:``, ``*``, unbalanced quotes are all just words or nothing).

Word forms people type: each word also matches as a prefix when it has 4 or more characters and
its Porter stem too (so "postgres" finds "PostgreSQL" and "auth" finds "authentication", while
"k8s" stays literal and "uses" does not turn into every word starting with "us").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from engram.errors import ValidationError
from engram.store.terms import Probe, stems_of

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


#: Shortest word (and stem) that also matches as a prefix.
PREFIX_MIN_CHARS = 4


@dataclass(frozen=True, slots=True)
class QueryWord:
    """One searchable word of a query and its FTS5 phrases (quoted: never syntax)."""

    text: str
    stems: tuple[str, ...]
    prefix: bool

    @property
    def exact(self) -> str:
        return f'"{self.text}"'

    @property
    def prefix_phrase(self) -> str:
        """The word as the start of a longer word (only meaningful when ``prefix``)."""
        return f'"{self.text}"*'

    @property
    def expression(self) -> str:
        """The word in any accepted form: itself (Porter-stemmed) or, if allowed, a prefix."""
        return f"({self.exact} OR {self.prefix_phrase})" if self.prefix else self.exact

    @property
    def probe(self) -> Probe:
        return Probe(self.text, self.stems, self.prefix)


def plan_words(text: str) -> list[QueryWord]:
    """The searchable words of ``text``, in order (words the index cannot hold are dropped)."""
    return list(_planned(text))


@lru_cache(maxsize=1024)
def _planned(text: str) -> tuple[QueryWord, ...]:
    # Cached per text: an agent asks the same questions again, and planning (the words, their
    # stems) was a hundredth of a search. QueryWords are frozen: sharing them is safe.
    words = query_words(text)
    planned = []
    for word, terms in zip(words, stems_of(words), strict=True):
        if not terms:
            continue
        prefix = len(word) >= PREFIX_MIN_CHARS and len(terms[-1]) >= PREFIX_MIN_CHARS
        planned.append(QueryWord(word, terms, prefix))
    return tuple(planned)


def build_match(text: str, match_mode: str = "any") -> str | None:
    """The FTS5 MATCH expression for ``text``, or ``None`` when it holds no searchable word."""
    mode = check_match_mode(match_mode)
    terms = [f'"{w}"' for w in query_words(text)]
    if not terms:
        return None
    return (" OR " if mode == "any" else " ").join(terms)
