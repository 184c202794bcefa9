"""The mutation log: validating pushed records, storing each ``mid`` exactly once, and serving
the log back in commit order.

**Exactly once.** ``mid`` is UNIQUE. A pushed record whose mid the log already holds with the
same content (a client's retry) is answered *accepted* and stored nothing; the same mid with
different content is rejected ``mid_conflict``. Content is compared by the SHA-256 of the
record's canonical JSON (sorted keys).

**Commit-ordered cursor.** Every push takes one transaction-level advisory lock
(:data:`PUSH_LOCK`) before it reads or writes the log and holds it until it commits, so seqs are
handed out in commit order: whoever sees seq *n* committed has already seen every smaller seq
that will ever exist. A pull therefore serves everything up to the greatest committed seq and
can safely answer ``next`` = that seq even when none of it was for the caller's projects.
Several server processes share the lock through PostgreSQL. The read model is applied inside
the same locked transaction (:mod:`engram_cloud.read_model`), and ``pg_notify`` wakes
long-polling pulls on every server process when the transaction commits.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, func, select, text

from engram.errors import InvalidMutationError
from engram.project import project_name
from engram.record import DEFAULT_MAX_CLOCK_DRIFT_MS, build_record, check_clock, validate_record
from engram_cloud import bulk, models, purge, read_model

PUSH_LOCK = 0x656E6772616D02  # "engram" + 2
CHANNEL = "engram_cloud_mutations"
MAX_PROJECT_BYTES = 200
_RECORD_FIELDS = ("mid", "hlc", "origin", "entity", "key", "op", "project", "scope", "payload")


@dataclass(slots=True)
class Candidate:
    """A valid pushed record, in canonical form."""

    index: int  # position in the request
    record: dict[str, Any]
    text: str  # the JSON text stored and served
    digest: bytes  # SHA-256 of the canonical (sorted-keys) JSON

    @property
    def mid(self) -> str:
        return self.record["mid"]

    @property
    def project(self) -> str:
        return self.record["project"]


@dataclass(frozen=True, slots=True)
class Rejection:
    index: int
    mid: str | None
    error_code: str
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"mid": self.mid, "error_code": self.error_code, "error": self.error}


class RecordRejected(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _project_problem(record: dict[str, Any]) -> tuple[str, str] | None:
    project = record["project"]
    if len(project.encode()) > MAX_PROJECT_BYTES:
        return "payload_invalid", f"project name is longer than {MAX_PROJECT_BYTES} bytes"
    normalized = project_name(project)
    if normalized != project:
        return "payload_invalid", f"project {project!r} is not normalized (expected {normalized!r})"
    inner = record["payload"].get("project")
    if inner is not None and inner != project:
        return "payload_invalid", f"payload.project {inner!r} does not match project {project!r}"
    return None


def canonical(record: dict[str, Any], index: int = -1) -> Candidate:
    """The stored form of a validated record: the normative key order, no extra keys (a
    pulled record's ``seq`` sent back, for instance)."""
    clean = build_record(**{name: record[name] for name in _RECORD_FIELDS})
    return Candidate(
        index=index,
        record=clean,
        text=orjson.dumps(clean).decode(),
        digest=hashlib.sha256(orjson.dumps(clean, option=orjson.OPT_SORT_KEYS)).digest(),
    )


@dataclass(frozen=True, slots=True)
class ClockBound:
    """The receiving server's clock and how far ahead of it a record's hlc may be."""

    now_ms: int
    max_drift_ms: int = DEFAULT_MAX_CLOCK_DRIFT_MS

    @classmethod
    def now(cls, max_drift_ms: int = DEFAULT_MAX_CLOCK_DRIFT_MS) -> ClockBound:
        return cls(int(time.time() * 1000), max_drift_ms)


def prepare_record(item: Any, index: int, clock: ClockBound | None = None) -> Candidate:
    """Validate one pushed record; raise :class:`RecordRejected` with an error code.

    A record too far ahead of ``clock`` (default: this machine's, with the default drift) is
    rejected ``clock_skew``: applied, it would beat every real edit of its key until then."""
    if isinstance(item, dict):
        project = item.get("project")
        if project is None or (isinstance(project, str) and not project.strip()):
            raise RecordRejected("empty_project", "mutation entries must specify a project")
    try:
        record = validate_record(item)
    except InvalidMutationError as exc:
        raise RecordRejected("payload_invalid", str(exc)) from None
    problem = _project_problem(record)
    if problem:
        raise RecordRejected(*problem)
    clock = clock or ClockBound.now()
    skew = check_clock(record["hlc"], clock.now_ms, clock.max_drift_ms)
    if skew:
        raise RecordRejected("clock_skew", skew)
    return canonical(record, index)


def prepare(
    items: Sequence[Any], clock: ClockBound | None = None
) -> tuple[list[Candidate], list[Rejection]]:
    """Split pushed items into valid candidates and rejections (one bad record never blocks
    the rest)."""
    clock = clock or ClockBound.now()
    good: list[Candidate] = []
    bad: list[Rejection] = []
    for index, item in enumerate(items):
        try:
            good.append(prepare_record(item, index, clock))
        except RecordRejected as exc:
            mid = item.get("mid") if isinstance(item, dict) else None
            bad.append(Rejection(index, mid if isinstance(mid, str) else None, exc.code, str(exc)))
    return good, bad


@dataclass(slots=True)
class PushResult:
    accepted: list[Candidate] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    seqs: dict[str, int] = field(default_factory=dict)  # mid → seq of every accepted record
    inserted: int = 0
    duplicates: int = 0
    latest_seq: int = 0
    applied: read_model.ApplyStats = field(default_factory=read_model.ApplyStats)


def push(
    conn: Connection,
    candidates: Sequence[Candidate],
    *,
    contributor: str,
    principal_id: int | None = None,
    source: str = "mutation_push",
) -> PushResult:
    """Store new records exactly once and apply them to the read model, in the caller's
    transaction (which then commits: the lock is released at commit)."""
    result = PushResult()
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PUSH_LOCK})
    m = models.mutations
    mids = sorted({(c.mid,) for c in candidates})
    known = {
        mid: (seq, bytes(digest))
        for mid, seq, digest in bulk.select_matching(
            conn, m, ("mid",), mids, ("mid", "seq", "record_hash")
        )
    }
    fresh: dict[str, Candidate] = {}
    for candidate in candidates:
        held = known.get(candidate.mid)
        digest = (
            held[1] if held else (fresh[candidate.mid].digest if candidate.mid in fresh else None)
        )
        if digest is None:
            fresh[candidate.mid] = candidate
            result.accepted.append(candidate)
        elif digest == candidate.digest:
            result.accepted.append(candidate)
            result.duplicates += 1
        else:
            result.rejected.append(
                Rejection(
                    candidate.index,
                    candidate.mid,
                    "mid_conflict",
                    f"mid {candidate.mid} is already stored with different content",
                )
            )
    if fresh:
        rows = [
            {
                "mid": c.mid,
                "record_hash": c.digest,
                "project": c.project,
                "entity": c.record["entity"],
                "key": c.record["key"],
                "op": c.record["op"],
                "hlc": c.record["hlc"],
                "origin": c.record["origin"],
                "scope": c.record["scope"],
                "record": c.text,
                "created_by": contributor,
                "principal_id": principal_id,
                "source": source,
            }
            for c in fresh.values()
        ]
        for mid, seq in bulk.insert(conn, m, rows, returning=("mid", "seq")):
            result.seqs[mid] = seq
        result.inserted = len(rows)
        result.applied = read_model.apply(conn, [(c.record, contributor) for c in fresh.values()])
        # A hard delete leaves no text behind in the log either (engram_cloud.purge).
        purge.blank_before(conn, [c.record for c in fresh.values()])
    for mid, (seq, _) in known.items():
        result.seqs[mid] = seq
    # Under the lock, what this push inserted is the newest; else ask.
    result.latest_seq = max(result.seqs.values()) if fresh else latest_seq(conn)
    if fresh:
        conn.execute(
            text("SELECT pg_notify(:channel, :seq)"),
            {"channel": CHANNEL, "seq": str(result.latest_seq)},
        )
    return result


def latest_seq(conn: Connection) -> int:
    """The greatest committed seq this connection can see (0 for an empty log)."""
    m = models.mutations
    return int(conn.execute(select(func.coalesce(func.max(m.c.seq), 0))).scalar_one())


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[tuple[int, str]]  # (seq, record JSON)
    next: int
    has_more: bool


def pull(conn: Connection, *, since: int, projects: frozenset[str] | None, limit: int) -> Page:
    """Records with ``seq > since`` of ``projects`` (``None`` = all), oldest first.

    ``next`` is the cursor to send next time: the last seq returned when there is more, else
    the greatest committed seq (safe: see the module docstring)."""
    # Read before the page: every seq up to it has committed, so the page (a later snapshot)
    # holds every matching row up to it.
    watermark = latest_seq(conn)
    if projects is not None and not projects:
        return Page([], max(since, watermark), False)
    m = models.mutations
    query = select(m.c.seq, m.c.record).where(m.c.seq > since)
    if projects is not None:
        query = query.where(m.c.project.in_(sorted(projects)))
    rows = [(seq, record) for seq, record in conn.execute(query.order_by(m.c.seq).limit(limit + 1))]
    if len(rows) > limit:
        return Page(rows[:limit], rows[limit - 1][0], True)
    return Page(rows, max(since, watermark, rows[-1][0] if rows else 0), False)
