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

#: The tokenizer of both FTS5 indexes (engram/store/schema.py builds them with it).
TOKENIZER = "porter unicode61"
#: Most SELECTs joined into one compound statement (SQLite refuses more than 500): a long
#: question's words are looked up in pieces of this many.
COMPOUND_TERMS = 400

_local = threading.local()


def _scratch() -> sqlite3.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=True)
        # Contentless, without column sizes: only the index is read back (a tenth less work
        # per explained text than storing each text and its size too).
        conn.execute(
            "CREATE VIRTUAL TABLE scratch USING fts5("
            f"own, ctx, tokenize='{TOKENIZER}', content='', columnsize=0)"
        )
        conn.execute("CREATE VIRTUAL TABLE scratch_terms USING fts5vocab(scratch, 'instance')")
        _local.conn = conn
    return conn


#: Index terms of words already asked for (query words repeat: an agent's questions do).
_STEMS: dict[str, tuple[str, ...]] = {}
_STEMS_LIMIT = 8192


def stems(word: str) -> tuple[str, ...]:
    """The index terms of one query word, in order ("postgres" → ("postgr",), "k8s_pods" →
    ("k8", "pod"), a lone "_" → ())."""
    return stems_of([word])[0]


def stems_of(words: Sequence[str]) -> list[tuple[str, ...]]:
    """:func:`stems` of each word: those not asked for before tokenized together, in one
    insert into the scratch index (a query's new words cost one round trip, not one each)."""
    known = {word: _STEMS.get(word) for word in words}
    missing = [word for word, held in known.items() if held is None]
    if missing:
        conn = _scratch()
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO scratch(rowid, own) VALUES (?, ?)", enumerate(missing, 1))
            rows = conn.execute("SELECT doc, term FROM scratch_terms ORDER BY doc, offset")
            found: dict[int, list[str]] = {}
            for doc, term in rows:
                found.setdefault(doc, []).append(term)
        finally:
            conn.execute("ROLLBACK")
        new = {word: tuple(found.get(doc, ())) for doc, word in enumerate(missing, 1)}
        if len(_STEMS) + len(new) > _STEMS_LIMIT:
            _STEMS.clear()
        _STEMS.update(new)
        known.update(new)
    return [known[word] or () for word in words]


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


#: What a probe's MATCH in the scratch table found in a text: the word itself in the own text,
#: the word or a longer one starting with it there, or the word (any form it may take) in the
#: context text.
_EXACT, _PREFIX, _CONTEXT = 0, 1, 2


#: What ends a token in any text: ASCII whitespace and punctuation ("_" too: unicode61 keeps
#: letters and digits only). Letters and digits of any script, and every other character, may
#: belong to a token. As UTF-8 bytes: every byte of a non-ASCII character is >= 0x80, never one
#: of these.
_SEPARATORS = frozenset(b" \t\n\r\x0b\x0c!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _token(word: str, stems: tuple[str, ...]) -> bytes | None:
    """``word`` as the bytes of one ASCII token (lower case), or None when it is not one."""
    if len(stems) != 1 or not (word.isascii() and word.isalnum()):
        return None
    return word.lower().encode("ascii")


def _holds(text: bytes, token: bytes) -> bool:
    """Whether ``text`` (UTF-8, ASCII letters in lower case) holds ``token`` between separators
    (or the ends of the text)."""
    size, end_of_text = len(token), len(text)
    start = text.find(token)
    while start >= 0:
        end = start + size
        if (start == 0 or text[start - 1] in _SEPARATORS) and (
            end == end_of_text or text[end] in _SEPARATORS
        ):
            return True
        start = text.find(token, start + 1)
    return False


def _literally(own: str, tokens: Sequence[bytes | None]) -> bool:
    """Whether ``own`` holds every probe's word itself (``tokens``: :func:`_token` of each), as
    a whole token: FTS5 reads that token as the probe does (the same characters, folded to
    lower case, stemmed the same way), so each word is in it as a word — the common case, told
    without tokenizing the text. (``bytes.lower`` folds ASCII letters only, as the comparison
    must: a letter of another script is never read as an ASCII one.)"""
    if None in tokens:
        return False
    text = own.encode("utf-8", "surrogatepass").lower()
    return all(_holds(text, token) for token in tokens)  # type: ignore[arg-type]


def find(texts: Sequence[tuple[str, str]], probes: Sequence[Probe]) -> list[Found]:
    """For each ``(own text, context text)``, the probes it matches, as FTS5 matches phrases
    (it is FTS5 that matches them): a probe's terms one after the other in one text, the last
    one possibly as a prefix. A text without a context that holds every word as a whole token
    is told so without FTS5 (see :func:`_literally`)."""
    found = [Found([], [], []) for _ in texts]
    if not texts or not probes:
        return found
    words = [probe.word for probe in probes if probe.stems]
    scratch: list[tuple[int, str, str]] = []  # (doc, own, ctx) for FTS5 to match
    tokens = [_token(probe.word, probe.stems) for probe in probes]
    for doc, (own, ctx) in enumerate(texts, 1):
        if not ctx and _literally(own, tokens):
            found[doc - 1].words.extend(words)
        else:
            scratch.append((doc, own, ctx))
    if scratch:
        _match(scratch, probes, found)
    return found


def _match(texts: list[tuple[int, str, str]], probes: Sequence[Probe], found: list[Found]) -> None:
    """``found[doc - 1]`` for each ``(doc, own, ctx)``, matched by FTS5 in the scratch index."""
    context = any(ctx for _, _, ctx in texts)
    # One statement: a MATCH per probe and kind (FTS5 reads the few texts just inserted; its
    # vocabulary table cost ten times as much, flushing them first).
    parts, params = [], []
    for i, probe in enumerate(probes):
        if not probe.stems:
            continue
        phrase = '"' + probe.word.replace('"', '""') + '"'
        kinds = [(_EXACT, f"own : {phrase}")]
        if probe.prefix:
            kinds.append((_PREFIX, f"own : {phrase}*"))
        if context:
            kinds.append((_CONTEXT, f"ctx : {phrase}*" if probe.prefix else f"ctx : {phrase}"))
        for kind, expression in kinds:
            parts.append(f"SELECT rowid, {i}, {kind} FROM scratch WHERE scratch MATCH ?")
            params.append(expression)
    if not parts:
        return
    conn = _scratch()
    conn.execute("BEGIN")  # the texts live only until the ROLLBACK
    rows: list[tuple[int, int, int]] = []
    try:
        conn.executemany(
            "INSERT INTO scratch(rowid, own, ctx) VALUES (?, ?, ?)",
            texts,
        )
        # (In pieces for a long question: SQLite joins at most 500 SELECTs in one statement.)
        for start in range(0, len(parts), COMPOUND_TERMS):
            end = start + COMPOUND_TERMS
            rows += conn.execute(" UNION ALL ".join(parts[start:end]), params[start:end])
    finally:
        conn.execute("ROLLBACK")
    held: dict[tuple[int, int], set[int]] = {}  # (doc, probe) → kinds
    for doc, i, kind in rows:
        held.setdefault((doc, i), set()).add(kind)
    for (doc, i), kinds_held in sorted(held.items()):
        word, result = probes[i].word, found[doc - 1]
        if _EXACT in kinds_held:
            result.words.append(word)
        elif _PREFIX in kinds_held:
            result.prefix_words.append(word)
        if _CONTEXT in kinds_held:
            result.context_words.append(word)
