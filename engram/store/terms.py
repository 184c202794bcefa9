"""Terms as the full-text index sees them: the stems of query words, and which query words a
handful of texts contain.

A private in-memory FTS5 table with the index's own tokenizer does the work, so Python never
re-implements (and never disagrees with) SQLite's Porter stemmer and unicode61 word breaking.
One scratch database per thread (the TUI searches on worker threads).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

#: The tokenizer of both FTS5 indexes (engram/store/schema.py builds them with it).
TOKENIZER = "porter unicode61"

_local = threading.local()


def _scratch() -> sqlite3.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=True)
        conn.execute(f"CREATE VIRTUAL TABLE scratch USING fts5(own, ctx, tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE scratch_terms USING fts5vocab(scratch, 'instance')")
        _local.conn = conn
    return conn


@lru_cache(maxsize=8192)
def stems(word: str) -> tuple[str, ...]:
    """The index terms of one query word, in order ("postgres" → ("postgr",), "k8s_pods" →
    ("k8", "pod"), a lone "_" → ())."""
    conn = _scratch()
    conn.execute("BEGIN")
    try:
        conn.execute("INSERT INTO scratch(rowid, own) VALUES (1, ?)", (word,))
        rows = conn.execute("SELECT term FROM scratch_terms ORDER BY offset").fetchall()
    finally:
        conn.execute("ROLLBACK")
    return tuple(r[0] for r in rows)


def upper_bound(stem: str) -> str:
    """The smallest string greater than every string starting with ``stem``."""
    return stem[:-1] + chr(ord(stem[-1]) + 1) if stem else "\U0010ffff"


@dataclass(frozen=True, slots=True)
class Probe:
    """One query word to look for: its stems, and whether its last stem may be a prefix."""

    word: str
    stems: tuple[str, ...]
    prefix: bool


@dataclass(slots=True)
class Found:
    """Which query words one text pair holds: exactly (as a stem), only as the start of a
    longer word, and in the context text."""

    words: list[str]
    prefix_words: list[str]
    context_words: list[str]


def find(texts: Sequence[tuple[str, str]], probes: Sequence[Probe]) -> list[Found]:
    """For each ``(own text, context text)``, the probes it matches, as FTS5 matches phrases:
    a probe's terms one after the other in one text, the last one possibly as a prefix."""
    found = [Found([], [], []) for _ in texts]
    if not texts or not probes:
        return found
    # One statement for every term of every probe: the last term of a prefix probe is a range.
    parts, params = [], []
    for i, probe in enumerate(probes):
        for position, stem in enumerate(probe.stems):
            if probe.prefix and position == len(probe.stems) - 1:
                parts.append(
                    f"SELECT {i}, {position}, doc, col, offset, term = ? FROM scratch_terms"
                    " WHERE term >= ? AND term < ?"
                )
                params += [stem, stem, upper_bound(stem)]
            else:
                parts.append(
                    f"SELECT {i}, {position}, doc, col, offset, 1 FROM scratch_terms WHERE term = ?"
                )
                params.append(stem)
    if not parts:
        return found
    conn = _scratch()
    conn.execute("BEGIN")  # one FTS flush for all rows; rolled back instead of deleted
    try:
        conn.executemany(
            "INSERT INTO scratch(rowid, own, ctx) VALUES (?, ?, ?)",
            [(n + 1, own, ctx) for n, (own, ctx) in enumerate(texts)],
        )
        rows = conn.execute(" UNION ALL ".join(parts), params).fetchall()
    finally:
        conn.execute("ROLLBACK")
    # (probe, doc, col) → "exact" or "prefix". A one-term probe needs no positions; a phrase
    # needs its terms one after the other: {(term position in the probe, offset): exact?}.
    kinds: dict[tuple[int, int, str], str] = {}
    phrases: dict[tuple[int, int, str], dict[tuple[int, int], bool]] = {}
    for i, position, doc, col, offset, exact in rows:
        if len(probes[i].stems) == 1:
            if exact or (i, doc, col) not in kinds:
                kinds[(i, doc, col)] = "exact" if exact else "prefix"
        else:
            phrases.setdefault((i, doc, col), {})[(position, offset)] = bool(exact)
    for where, hits in phrases.items():
        kind = _phrase(len(probes[where[0]].stems), hits)
        if kind is not None:
            kinds[where] = kind
    for (i, doc, col), kind in sorted(kinds.items()):
        probe = probes[i]
        result = found[doc - 1]
        if col == "ctx":
            if probe.word not in result.context_words:
                result.context_words.append(probe.word)
        elif kind == "exact":
            if probe.word in result.prefix_words:
                result.prefix_words.remove(probe.word)
            if probe.word not in result.words:
                result.words.append(probe.word)
        elif probe.word not in result.words and probe.word not in result.prefix_words:
            result.prefix_words.append(probe.word)
    return found


def _phrase(length: int, hits: dict[tuple[int, int], bool]) -> str | None:
    """``"exact"`` when the terms occur one after the other as themselves, ``"prefix"`` when
    only the last is a longer word, else None."""
    best = None
    for (position, offset), _ in hits.items():
        if position != 0:
            continue
        start = offset
        if not all((j, start + j) in hits for j in range(length)):
            continue
        if all(hits[(j, start + j)] for j in range(length - 1)):
            if hits[(length - 1, start + length - 1)]:
                return "exact"
            best = "prefix"
    return best
