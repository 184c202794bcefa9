"""Conflict detection (issue 20): a memory saved here that is very similar to another memory of
its project — same topic family, or most of its words in common — but says something the other
does not is linked to it ``conflicts_with`` (pending), which marks both ``needs_review``.

The check never runs on the save path. A new memory saved here waits for it without a queue row
(``observations.saved_here`` and the queue's mark, :mod:`engram.store.queue_marks`): the queue
takes those in when it is drained; an edit of a memory's text queues its id. The queue is
drained by the next read that shows relations (search, a memory's relations, the graph
commands) and, in long-running processes (``engram mcp``, ``engram serve``), by a background
thread shortly after each write (:class:`ConflictWorker`).
Only memories saved on this machine are checked; the relation it makes replicates like any
other, and its key is the pair's (:func:`engram.record.relation_key`), so two machines that
flag the same pair make one relation.

The rule, deterministic and model-free: compare the two memories' word sets (title and
content, lowercased, stop words out, negations kept as ``not``).

* ``similarity`` = Jaccard of the two sets; at or above :data:`SAME` the memories say the same
  thing (a near-duplicate, not a conflict);
* they are candidates when they share at least :data:`MIN_SHARED` words and their similarity
  is :data:`SIMILAR` or more, or :data:`SAME_FAMILY` or more when their topic keys share a
  family (``decision/…`` and ``decision/…``);
* they *say something different* when each has words the other lacks (a replacement: "use
  Redis" / "use PostgreSQL") or exactly one of them is negated; one that only adds details to
  the other is an extension, not a conflict.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading
import time
from dataclasses import dataclass

from engram.errors import StoreUnavailableError
from engram.record import relation_key
from engram.store import queue_marks
from engram.store.base import StoreBase
from engram.store.models import Relation
from engram.store.query import STOPWORDS, build_match, plan_words
from engram.store.relations import existing_pair_key
from engram.times import now_text

SAME = 0.9
SIMILAR = 0.5
SAME_FAMILY = 0.3
#: Words two memories must share (besides a negation) before they can be about one thing:
#: "written by the first process" and "… second process" are not a disagreement.
MIN_SHARED = 3
#: How long a read may spend on queued checks before showing its results (the rest wait for
#: the next read or the background worker of a long-running process).
READ_BUDGET_S = 0.05
MAX_CONFLICTS_PER_MEMORY = 3
CANDIDATES = 20
#: Words of a memory put into the candidate query (FTS5 ranks a long OR well, but each term
#: costs a posting-list read).
QUERY_WORDS = 8
#: A memory of more distinct words than this (a pasted log) is queried by its longest words:
#: SQLite joins at most 500 SELECTs in one statement, and counting every word's holders would
#: take seconds in a large store.
MOST_COUNTED = 500
#: Texts whose :func:`words` are kept: a check compares its memory with ~20 candidates, and the
#: same candidates come back check after check (a third of a check's time was splitting them).
#: Only texts of up to :data:`KEPT_CHARS` characters, so the kept texts stay under ~4 MB.
WORDS_KEPT = 1024
KEPT_CHARS = 4000
ACTOR = "engram"
MODEL = "rules:word-overlap"
NEGATIONS = frozenset(
    "not no never nor don doesn didn isn aren wasn weren won shouldn cannot can't without".split()
)
_STOP = STOPWORDS - NEGATIONS
_WORD = re.compile(r"[a-z0-9][a-z0-9_+#.-]*[a-z0-9+#]|[a-z0-9]")


def words(text: str) -> frozenset[str]:
    """The comparable words of ``text``: lowercased, stop words out, plural ``s`` dropped,
    every negation as ``not``."""
    return _kept_words(text) if len(text) <= KEPT_CHARS else _words(text)


def _words(text: str) -> frozenset[str]:
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in NEGATIONS:
            out.add("not")
        elif word not in _STOP and len(word) > 1:
            plural = len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "is", "us"))
            out.add(word[:-1] if plural else word)
    return frozenset(out)


_kept_words = functools.lru_cache(maxsize=WORDS_KEPT)(_words)


def family(topic_key: str | None) -> str | None:
    """A topic key's family (``decision`` of ``decision/session-store``)."""
    if not topic_key or "/" not in topic_key:
        return None
    return topic_key.split("/", 1)[0] or None


@dataclass(frozen=True, slots=True)
class Verdict:
    similarity: float
    reason: str


def compare(a: frozenset[str], b: frozenset[str], *, same_family: bool = False) -> Verdict | None:
    """Whether two memories (their :func:`words`) conflict, and why; ``None`` when not."""
    union = a | b
    if len(a & b - {"not"}) < MIN_SHARED:
        return None  # too little in common to be about the same thing
    similarity = len(a & b) / len(union)
    if similarity >= SAME or similarity < (SAME_FAMILY if same_family else SIMILAR):
        return None
    negated = ("not" in a) != ("not" in b)
    only_a, only_b = a - b - {"not"}, b - a - {"not"}
    if not negated and not (only_a and only_b):
        return None  # one only adds to the other
    if negated:
        why = "one of them says the opposite"
    else:
        why = f"one says {_few(only_a)} where the other says {_few(only_b)}"
    where = "same topic family, " if same_family else ""
    return Verdict(
        round(similarity, 2), f"{where}{similarity:.0%} of their words in common, but {why}"
    )


def _few(found: frozenset[str], limit: int = 3) -> str:
    shown = sorted(found)[:limit]
    return ", ".join(shown) + (", …" if len(found) > limit else "")


#: New memories saved here wait for their check above this queue's mark.
QUEUE = queue_marks.MarkedQueue(
    "conflicts",
    "graph_conflict_queue",
    "observation_id",
    "o.saved_here = 1 AND o.deleted_at IS NULL",
    stamp="queued_at",
)


def queue_check(conn: sqlite3.Connection, observation_id: int) -> None:
    """Queue a memory whose text changed here for the conflict check (in the edit's
    transaction; a new memory saved here needs no row: ``saved_here``)."""
    conn.execute(
        "INSERT OR REPLACE INTO graph_conflict_queue(observation_id, queued_at) VALUES (?, ?)",
        (observation_id, now_text()),
    )


class ConflictsMixin(StoreBase):
    def pending_conflict_checks(self) -> int:
        return int(
            self.db.scalar(
                "SELECT (SELECT COUNT(*) FROM graph_conflict_queue)"
                f" + (SELECT COUNT(*) {QUEUE.waiting_above()})"
            )
            or 0
        )

    def settle_conflicts(self) -> None:
        """Run the queued checks before a read shows relations, unless another process is
        writing right now: the read never waits for it (the checks stay queued for the next
        read or the background worker)."""
        if not self.db.scalar(QUEUE.waiting):
            return
        try:
            with self.db.without_waiting():
                # The newest saves first (what the reader just wrote), and a bounded share:
                # after a bulk save the rest is left to the next reads or the worker.
                self.detect_conflicts(newest_first=True, budget_s=READ_BUDGET_S)
        except StoreUnavailableError:
            pass

    def detect_conflicts(
        self,
        limit: int | None = 200,
        *,
        newest_first: bool = False,
        budget_s: float | None = None,
    ) -> list[Relation]:
        """Run the queued conflict checks (at most ``limit`` memories; ``None``: all; with a
        ``budget_s``, stop once that much time went — after at least one check) and return the
        relations they made. Nothing queued costs two index probes."""
        # A write only when something is new: every write wakes the ConflictWorker.
        if self.db.one(QUEUE.new_rows) is not None:
            with self.db.write() as conn:
                QUEUE.take_new(conn)
        if self.db.one("SELECT 1 FROM graph_conflict_queue LIMIT 1") is None:
            return []  # (only memories that need no check were new)
        order = "DESC" if newest_first else ""
        sql = (
            "SELECT observation_id FROM graph_conflict_queue "
            f"ORDER BY queued_at {order}, observation_id {order}"
        )
        ids = [r[0] for r in self.db.rows(sql + ("" if limit is None else f" LIMIT {int(limit)}"))]
        made: list[Relation] = []
        started = time.monotonic()
        # How many memories hold each word, read once per run: checks add no memory, and the
        # memories of one burst share most of their words.
        doc_counts: dict[str, int] = {}
        for oid in ids:
            with self.db.write() as conn:
                made += self._check_one(conn, oid, doc_counts)
                conn.execute("DELETE FROM graph_conflict_queue WHERE observation_id = ?", (oid,))
            if budget_s is not None and time.monotonic() - started >= budget_s:
                break
        return made

    def _check_one(
        self, conn: sqlite3.Connection, oid: int, doc_counts: dict[str, int]
    ) -> list[Relation]:
        row = conn.execute(
            "SELECT * FROM observations WHERE id = ? AND deleted_at IS NULL", (oid,)
        ).fetchone()
        if row is None:
            return []
        mine = words(f"{row['title']}\n{row['content']}")
        my_family = family(row["topic_key"])
        found: list[tuple[float, str, sqlite3.Row, Verdict]] = []
        for other in self._candidates(conn, row, mine, my_family, doc_counts):
            if other["normalized_hash"] == row["normalized_hash"]:
                continue
            same = my_family is not None and family(other["topic_key"]) == my_family
            verdict = compare(
                mine, words(f"{other['title']}\n{other['content']}"), same_family=same
            )
            if verdict is not None:
                found.append((-verdict.similarity, other["sync_id"], other, verdict))
        made: list[Relation] = []
        for _, _, other, verdict in sorted(found, key=lambda f: (f[0], f[1])):
            if len(made) >= MAX_CONFLICTS_PER_MEMORY:
                break
            # Someone's judgment of the pair is never overridden.
            if existing_pair_key(conn, row["project"], row["sync_id"], other["sync_id"]):
                continue
            key = relation_key(row["project"], row["sync_id"], other["sync_id"])
            # The newer memory contests the older one (both may wait in the queue).
            newer, older = sorted((row, other), key=lambda r: (r["updated_at"], r["id"]))[::-1]
            self._write_relation(  # type: ignore[attr-defined]
                conn,
                key=key,
                project=row["project"],
                scope=row["scope"],
                values={
                    "source_id": newer["sync_id"],
                    "target_id": older["sync_id"],
                    "relation": "conflicts_with",
                    "judgment_status": "pending",
                    "reason": verdict.reason,
                    "confidence": verdict.similarity,
                    "marked_by_actor": ACTOR,
                    "marked_by_kind": "system",
                    "marked_by_model": MODEL,
                },
            )
            made.append(self._load_relation(conn, row["project"], key))  # type: ignore[attr-defined]
        return made

    @staticmethod
    def _candidates(
        conn: sqlite3.Connection,
        row: sqlite3.Row,
        mine: frozenset[str],
        my_family: str | None,
        doc_counts: dict[str, int],
    ) -> list[sqlite3.Row]:
        """Live memories of the same project and scope that may conflict: the best full-text
        matches of its words, and the latest of its topic family."""
        found: dict[int, sqlite3.Row] = {}
        match = _rare_words(conn, mine - {"not"}, doc_counts)
        same = "o.project = ? AND o.scope = ? AND o.deleted_at IS NULL AND o.id != ?"
        params = (row["project"], row["scope"], row["id"])
        if match:
            # One statement: ranking every match and joining it to its row costs less than
            # ranking inside FTS first and filtering the best to the project afterwards (which
            # needed a second, joined query whenever other projects crowded the best matches).
            for other in conn.execute(
                f"""SELECT o.* FROM observations_fts f JOIN observations o ON o.id = f.rowid
                    WHERE observations_fts MATCH ? AND {same}
                    ORDER BY f.rank LIMIT {CANDIDATES}""",
                (f"{{title content}} : ({match})", *params),
            ):
                found[other["id"]] = other
        if my_family is not None:
            pattern = my_family.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            for other in conn.execute(
                f"""SELECT o.* FROM observations o WHERE {same}
                      AND o.topic_key LIKE ? ESCAPE '\\'
                    ORDER BY o.updated_at DESC LIMIT {CANDIDATES}""",
                (*params, pattern + "/%"),
            ):
                found[other["id"]] = other
        return list(found.values())


class ConflictWorker:
    """Runs the queued conflict checks in a background thread of a long-running process,
    shortly after each committed write (``engram mcp``, ``engram serve``), so conflicts are
    found even when nobody reads. Writes only nudge it; it never slows them."""

    def __init__(self, store: ConflictsMixin, delay: float = 0.2) -> None:
        self.store = store
        self.delay = delay
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def nudge(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self.store.add_write_listener(self.nudge)  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._run, name="engram-conflicts", daemon=True)
        self._thread.start()
        self.nudge()  # whatever earlier processes queued

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        listeners = self.store.db.write_listeners
        if self.nudge in listeners:
            listeners.remove(self.nudge)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        import logging

        log = logging.getLogger(__name__)
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            self._stop.wait(self.delay)  # let a burst of saves finish first
            self._wake.clear()
            try:
                self.store.detect_conflicts()
            except Exception:  # a failed check is retried with the next write, never fatal
                log.exception("conflict check failed")

    def __enter__(self) -> ConflictWorker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ConflictService:
    """:class:`ConflictWorker` as a background service of ``engram serve`` (``start`` and
    ``stop`` around the app's life)."""

    def __init__(self, worker: ConflictWorker) -> None:
        self.worker = worker

    async def start(self) -> None:
        self.worker.start()

    async def stop(self) -> None:
        import anyio

        await anyio.to_thread.run_sync(self.worker.stop)


def _rare_words(
    conn: sqlite3.Connection, words: frozenset[str], doc_counts: dict[str, int]
) -> str | None:
    """An FTS expression of the memory's :data:`QUERY_WORDS` rarest words that another memory
    also holds (from the index's vocabulary: a word every memory holds costs a long read and
    finds nothing in particular); ``None`` when it has none. ``doc_counts`` keeps the counts
    read, for the run's next checks."""
    planned = [w for w in plan_words(" ".join(sorted(words))) if len(w.stems) == 1]
    terms = sorted({w.stems[0] for w in planned})
    if not terms:
        return None
    if len(terms) > MOST_COUNTED:
        longest = sorted(words, key=lambda w: (-len(w), w))[:QUERY_WORDS]
        return build_match(" ".join(longest))
    unknown = [term for term in terms if term not in doc_counts]
    if unknown:
        parts = " UNION ALL ".join(
            f"SELECT {n}, doc FROM observations_fts_vocab WHERE term = ?"
            for n in range(len(unknown))
        )
        found = dict(conn.execute(parts, unknown).fetchall())
        doc_counts.update((term, int(found.get(n, 0))) for n, term in enumerate(unknown))
    # Held by this memory and at least one other, rarest first.
    shared = sorted(
        (doc_counts[w.stems[0]], w.text) for w in planned if doc_counts[w.stems[0]] >= 2
    )
    chosen = list(dict.fromkeys(text for _, text in shared))[:QUERY_WORDS]
    return " OR ".join(f'"{w}"' for w in chosen) if chosen else None
