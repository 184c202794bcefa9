"""The objects the store hands out: one shape per entity, shared by every face.

The models every face serves are msgspec Structs, so the local HTTP API answers with these very
types (litestar encodes them and builds ``/schema`` from them; there is no second copy to keep
in step) and ``to_dict`` is msgspec's own conversion, which gives the JSON shape of the Go tool's
export (plus ``rank`` and the match in search results) that the CLI's ``--json`` and the MCP
tools return. A field that is left out when it does not apply (a search result's ``rank``,
``match``, ``found_by`` and ``similarity``, a memory's ``relations``; a session's
``observation_count``) defaults to None
in a Struct with ``omit_defaults``: every other field of such a Struct has no default, so it is
always written, None or not. msgspec adds a few milliseconds to start-up, well within the
0.25 s a cold ``engram save`` or ``search`` may take (tests/semantic/test_lexical_path.py lists
what those commands may import).

Results no face serves as they are (:class:`SaveResult`, :class:`PruneResult`,
:class:`ApplyResult`, which the sync reports nest) stay plain dataclasses. The graph's and
consolidation's results are Structs on this :class:`Model` too, declared where they are built
(:mod:`engram.graph.answers`, :mod:`engram.consolidate.report`), which load only when a graph
is read or a consolidation runs.

Size: over 500 lines on purpose: every object the store hands out, in one module every face
imports; each is a short declaration.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from operator import itemgetter
from typing import Any

import msgspec


class Model(msgspec.Struct):
    """A store object that is also a wire shape: ``to_dict`` is its JSON object."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data


class Session(Model, omit_defaults=True):
    id: str
    project: str
    directory: str
    started_at: str
    ended_at: str | None
    summary: str | None
    #: Listings only (left out elsewhere).
    observation_count: int | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Session:
        keys = row.keys()
        return cls(
            id=row["id"],
            project=row["project"],
            directory=row["directory"],
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            summary=row["summary"],
            observation_count=row["observation_count"] if "observation_count" in keys else None,
        )

    @property
    def active(self) -> bool:
        return self.ended_at is None


#: Why a search result matched, from best to weakest (docs/search.md, the tiers).
MATCH_TIERS = ("topic", "words", "prefix", "context")


class SearchMatch(Model):
    """Why a search result matched: the query words found in its own text (as words, or only
    as the start of a longer word), those found in its session context, and its tier."""

    tier: str  # one of MATCH_TIERS
    words: list[str] = msgspec.field(default_factory=list)
    prefix_words: list[str] = msgspec.field(default_factory=list)
    context_words: list[str] = msgspec.field(default_factory=list)
    #: Whether the session context contributed to the match (derived from ``context_words``).
    context: bool = False

    def __post_init__(self) -> None:
        self.context = bool(self.context_words)

    @property
    def via_context(self) -> bool:
        """Found only through the session context (the memory's own text holds no query word)."""
        return self.tier == "context"


class Observation(Model, omit_defaults=True):
    id: int
    sync_id: str
    session_id: str
    type: str
    title: str
    content: str
    tool_name: str | None
    project: str
    scope: str
    topic_key: str | None
    revision_count: int
    duplicate_count: int
    last_seen_at: str | None
    created_at: str
    updated_at: str
    deleted_at: str | None
    #: How much the memory matters, 0-1: the override when there is one, else the computed
    #: score (docs/importance.md).
    importance: float
    importance_override: float | None
    pinned: bool
    #: Searches that returned it and reads of it, on this machine (local, not synced).
    access_count: int
    last_accessed_at: str | None
    valid_from: str | None
    valid_to: str | None
    #: Why it was deleted: ``archived`` (consolidation or by hand), else none.
    delete_reason: str | None
    #: The sync id of the memory that superseded it (a consolidation merge).
    superseded_by: str | None
    reviewed_at: str | None
    #: Search results only (left out elsewhere, as the three below): lower is better.
    rank: float | None = None
    match: SearchMatch | None = None  # search results only
    #: Search results in semantic or hybrid mode: which signals found the memory ("lexical":
    #: its words, "semantic": its meaning) and its cosine similarity to the question.
    found_by: list[str] | None = None
    similarity: float | None = None
    #: Search results and single memories shown with their relations (issue 20): a short form
    #: of each active supersession or conflict, ``note`` being its one-line text.
    relations: list[dict[str, Any]] | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Observation:
        if isinstance(row, sqlite3.Row):
            return _observation_reader(tuple(row.keys()))(row)
        keys = row.keys()
        intent = _intent(row) if "pinned" in keys else NO_INTENT
        return cls(
            id=row["id"],
            sync_id=row["sync_id"],
            session_id=row["session_id"],
            type=row["type"],
            title=row["title"],
            content=row["content"],
            tool_name=row["tool_name"],
            project=row["project"],
            scope=row["scope"],
            topic_key=row["topic_key"],
            revision_count=row["revision_count"],
            duplicate_count=row["duplicate_count"],
            last_seen_at=row["last_seen_at"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            deleted_at=row["deleted_at"],
            **intent,
            rank=row["rank"] if "rank" in keys else None,
        )

    @property
    def archived(self) -> bool:
        return self.deleted_at is not None and self.delete_reason == "archived"

    @classmethod
    def from_rows(cls, rows: Sequence[sqlite3.Row]) -> list[Observation]:
        """:meth:`from_row` of each row (rows of one statement: the columns are looked up
        once)."""
        if not rows:
            return []
        read = _observation_reader(tuple(rows[0].keys()))
        return [read(row) for row in rows]


#: The intent fields of a memory nobody curated (rows selected without those columns).
NO_INTENT: dict[str, Any] = {
    "importance": 0.0,
    "importance_override": None,
    "pinned": False,
    "access_count": 0,
    "last_accessed_at": None,
    "valid_from": None,
    "valid_to": None,
    "delete_reason": None,
    "superseded_by": None,
    "reviewed_at": None,
}


#: Observation fields read from a row as they are, before and after the computed intent ones.
_ROW_FIELDS = (
    "id", "sync_id", "session_id", "type", "title", "content", "tool_name", "project", "scope",
    "topic_key", "revision_count", "duplicate_count", "last_seen_at", "created_at",
    "updated_at", "deleted_at",
)  # fmt: skip
_INTENT_ROW_FIELDS = (
    "last_accessed_at", "valid_from", "valid_to", "delete_reason", "superseded_by",
    "reviewed_at",
)  # fmt: skip


@lru_cache(maxsize=64)
def _observation_reader(keys: tuple[str, ...]) -> Callable[[sqlite3.Row], Observation]:
    """A function building an Observation from a row with these columns, by position: a
    search builds every result it returns, and looking each of 26 fields up by name (and the
    row's column names once per row) was most of the cost of building one."""
    at: dict[str, int] = {}
    for i, key in enumerate(keys):
        at.setdefault(key, i)  # sqlite3.Row answers a name with its first column
    row_fields = itemgetter(*(at[f] for f in _ROW_FIELDS))
    rank = at.get("rank")
    if "pinned" not in at:

        def read_plain(row: sqlite3.Row) -> Observation:
            # (mypy cannot count the fields a getter gives: 16, id to deleted_at)
            return Observation(  # type: ignore[misc]
                *row_fields(row), **NO_INTENT, rank=None if rank is None else row[rank]
            )

        return read_plain
    intent_fields = itemgetter(*(at[f] for f in _INTENT_ROW_FIELDS))
    importance, override = at["importance"], at["importance_override"]
    pinned, access = at["pinned"], at["access_count"]

    def read(row: sqlite3.Row) -> Observation:
        own = row[override]
        return Observation(  # type: ignore[call-arg]
            *row_fields(row),
            round(float(own if own is not None else row[importance] or 0), 4),  # as _intent
            own,
            bool(row[pinned]),
            int(row[access] or 0),
            *intent_fields(row),
            None if rank is None else row[rank],
        )

    return read


def _intent(row: sqlite3.Row) -> dict[str, Any]:
    """Importance, pin, validity and access fields of an observations row."""
    override = row["importance_override"]
    return {
        "importance": round(float(override if override is not None else row["importance"] or 0), 4),
        "importance_override": override,
        "pinned": bool(row["pinned"]),
        "access_count": int(row["access_count"] or 0),
        "last_accessed_at": row["last_accessed_at"],
        "valid_from": row["valid_from"],
        "valid_to": row["valid_to"],
        "delete_reason": row["delete_reason"],
        "superseded_by": row["superseded_by"],
        "reviewed_at": row["reviewed_at"],
    }


class Prompt(Model, omit_defaults=True):
    id: int
    sync_id: str
    session_id: str
    content: str
    project: str
    created_at: str
    rank: float | None = None
    match: SearchMatch | None = None  # search results only

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Prompt:
        keys = row.keys()
        return cls(
            id=row["id"],
            sync_id=row["sync_id"],
            session_id=row["session_id"],
            content=row["content"],
            project=row["project"],
            created_at=row["created_at"],
            rank=row["rank"] if "rank" in keys else None,
        )


@dataclass(slots=True)
class SaveResult:
    """What saving an observation did: created it, counted a duplicate or updated a topic."""

    observation: Observation
    action: str  # created | deduplicated | topic_updated
    warnings: list[str] = field(default_factory=list)
    truncated: bool = False
    original_bytes: int = 0
    limit_bytes: int = 0
    #: (type, title, content) of a memory saved without a topic key: what
    #: :attr:`suggested_topic_key` suggests one from.
    topic_hint: tuple[str, str, str] | None = None

    @property
    def suggested_topic_key(self) -> str | None:
        """A topic key for a memory saved without one, worked out when asked (not on the save
        path: most saves are never shown one)."""
        if self.topic_hint is None:
            return None
        from engram.text import suggest_topic_key

        return suggest_topic_key(*self.topic_hint)

    def to_dict(self) -> dict[str, Any]:
        data = self.observation.to_dict()
        data.update(
            action=self.action,
            warnings=self.warnings,
            truncated=self.truncated,
            suggested_topic_key=self.suggested_topic_key,
        )
        if self.truncated:
            data.update(original_bytes=self.original_bytes, limit_bytes=self.limit_bytes)
        return data


class TimelineEntry(Model):
    """A memory around a timeline's focus: the memory's own fields (as the Go tool gives them,
    so its hooks read them), and whether it is the focus."""

    id: int
    type: str
    title: str
    content: str
    created_at: str
    is_focus: bool = False
    sync_id: str = ""
    session_id: str = ""
    tool_name: str | None = None
    project: str = ""
    scope: str = "project"
    topic_key: str | None = None
    revision_count: int = 1
    duplicate_count: int = 1
    last_seen_at: str | None = None
    updated_at: str = ""
    deleted_at: str | None = None
    importance: float = 0.0
    importance_override: float | None = None
    pinned: bool = False
    access_count: int = 0
    last_accessed_at: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    delete_reason: str | None = None
    superseded_by: str | None = None
    reviewed_at: str | None = None

    @classmethod
    def of(cls, memory: Observation, *, is_focus: bool = False) -> TimelineEntry:
        return cls(
            id=memory.id, type=memory.type, title=memory.title, content=memory.content,
            created_at=memory.created_at, is_focus=is_focus, sync_id=memory.sync_id,
            session_id=memory.session_id, tool_name=memory.tool_name, project=memory.project,
            scope=memory.scope, topic_key=memory.topic_key,
            revision_count=memory.revision_count, duplicate_count=memory.duplicate_count,
            last_seen_at=memory.last_seen_at, updated_at=memory.updated_at,
            deleted_at=memory.deleted_at, importance=memory.importance,
            importance_override=memory.importance_override, pinned=memory.pinned,
            access_count=memory.access_count, last_accessed_at=memory.last_accessed_at,
            valid_from=memory.valid_from, valid_to=memory.valid_to,
            delete_reason=memory.delete_reason, superseded_by=memory.superseded_by,
            reviewed_at=memory.reviewed_at,
        )  # fmt: skip


class Timeline(Model):
    focus: Observation
    before: list[TimelineEntry]
    after: list[TimelineEntry]
    session_info: Session | None
    total_in_range: int


class Revision(Model):
    """An earlier version of a memory: what it said, which machine wrote it (``origin``) and
    which replaced it, and when this machine saw it replaced."""

    title: str
    content: str
    type: str
    topic_key: str | None
    scope: str
    updated_at: str
    revision_count: int
    origin: str
    written_here: bool
    replaced_at: str
    replaced_by_origin: str
    replaced_here: bool


class History(Model):
    """A memory as it is now (and which machine wrote that version), then its earlier
    versions, newest first (at most engram.store.revisions.KEPT), and how many there are."""

    observation: Observation
    origin: str
    written_here: bool
    revisions: list[Revision]
    count: int


class Stats(Model):
    total_sessions: int
    total_observations: int
    total_prompts: int
    projects: list[str]


class ProjectInfo(Model):
    name: str
    observation_count: int
    session_count: int
    prompt_count: int
    directories: list[str]


class MergeResult(Model):
    canonical: str
    sources_merged: list[str]
    observations_updated: int = 0
    sessions_updated: int = 0
    prompts_updated: int = 0


@dataclass(slots=True)
class PruneResult:
    projects: list[str]
    sessions_deleted: int = 0
    prompts_deleted: int = 0
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PassiveResult(Model):
    extracted: int = 0
    saved: int = 0
    duplicates: int = 0


class ImportResult(Model):
    sessions_imported: int = 0
    observations_imported: int = 0
    prompts_imported: int = 0
    skipped: int = 0
    relations_imported: int = 0
    #: rows that came back through the Go tool next to their original, retired
    #: (:mod:`engram.store.go_copies`)
    copies_retired: int = 0


@dataclass(slots=True)
class ApplyResult:
    """Outcome of applying replicated mutations."""

    applied: int = 0  # won last-writer-wins and changed the store
    stale: int = 0  # journaled, but an entity state with a newer clock was already there
    duplicates: int = 0  # mid already known: nothing done
    sessions: int = 0
    observations: int = 0
    prompts: int = 0
    relations: int = 0
    #: Records kept aside instead of applied, by reason (``clock_skew``, ``invalid`` …).
    quarantined: dict[str, int] = field(default_factory=dict)
    #: Records that waited in the quarantine and were applied (or found stale) by this call.
    released: int = 0
    #: Memories whose latest version was written here and was just replaced by another
    #: machine's newer one: ``{"id", "project", "title", "new_title", "by"}`` (by = its origin).
    #: The replaced version is kept in the memory's revisions (``engram history ID``).
    superseded: list[dict[str, Any]] = field(default_factory=list)
    #: Copies of a memory that came back through the Go tool, retired next to their original
    #: (:mod:`engram.store.go_copies`).
    copies_retired: int = 0

    def add(self, other: ApplyResult) -> None:
        for name in (
            "applied",
            "stale",
            "duplicates",
            "sessions",
            "observations",
            "prompts",
            "relations",
            "released",
            "copies_retired",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, count in other.quarantined.items():
            self.quarantined[reason] = self.quarantined.get(reason, 0) + count
        self.superseded.extend(other.superseded)

    def hold(self, reason: str) -> None:
        self.quarantined[reason] = self.quarantined.get(reason, 0) + 1

    @property
    def quarantined_total(self) -> int:
        return sum(self.quarantined.values())

    @property
    def received(self) -> int:
        return self.applied + self.stale + self.duplicates + self.quarantined_total - self.released

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RelationEnd(Model):
    """One end of a relation as this machine knows it: the memory's local id and title, or
    ``None`` when the memory is not here (yet)."""

    sync_id: str
    id: int | None = None
    title: str | None = None
    type: str | None = None
    deleted: bool = False


class Relation(Model):
    """A link between two memories of one project (``supersedes``, ``conflicts_with`` …).

    ``judgment_status`` is what the relation says (pending, judged, ignored, …); ``state`` is
    what it means here: ``orphaned`` once an endpoint is deleted, ``superseded`` when another
    relation replaced it, else its judgment. Only ``pending`` and ``judged`` ones are active
    (they annotate search results and order superseded memories)."""

    id: int
    sync_id: str
    project: str
    scope: str
    source_id: str
    target_id: str
    relation: str
    reason: str | None
    evidence: str | None
    confidence: float | None
    judgment_status: str
    marked_by_actor: str | None
    marked_by_kind: str | None
    marked_by_model: str | None
    session_id: str | None
    superseded_at: str | None
    superseded_by_relation_id: str | None
    created_at: str
    updated_at: str
    state: str
    source: RelationEnd
    target: RelationEnd

    @property
    def active(self) -> bool:
        return self.state in ("pending", "judged")

    def other(self, sync_id: str) -> RelationEnd:
        """The end that is not ``sync_id``."""
        return self.target if self.source.sync_id == sync_id else self.source

    def note(self, sync_id: str) -> str:
        """One line saying what this relation means for the memory ``sync_id``:
        ``supersedes #12 (title)``, ``contested by #40 (pending review)``…"""
        outgoing = self.source.sync_id == sync_id
        other = self.other(sync_id)
        verbs = _NOTE_VERBS.get(self.relation, (f"{self.relation} →", f"← {self.relation}"))
        verb = verbs[0] if outgoing else verbs[1]
        who = f"#{other.id}" if other.id is not None else other.sync_id
        if other.title:
            who += f" ({_short(other.title)})"
        tail = ""
        if self.state == "pending":
            tail = " — pending review"
        elif self.state != "judged":
            tail = f" — {self.state}"
        elif other.deleted:
            tail = " — archived"  # a supersession whose replaced memory was archived
        return f"{verb} {who}{tail}"

    def summary(self, sync_id: str) -> dict[str, Any]:
        """The short form search results carry (``Observation.relations``)."""
        other = self.other(sync_id)
        return {
            "sync_id": self.sync_id,
            "relation": self.relation,
            "direction": "out" if self.source.sync_id == sync_id else "in",
            "other_id": other.id,
            "other_sync_id": other.sync_id,
            "judgment_status": self.judgment_status,
            "state": self.state,
            "note": self.note(sync_id),
        }


#: How a relation reads from its source and from its target.
_NOTE_VERBS = {
    "supersedes": ("supersedes", "superseded by"),
    "conflicts_with": ("conflicts with", "contested by"),
    "related": ("related to", "related to"),
    "compatible": ("compatible with", "compatible with"),
    "scoped": ("scoped against", "scoped against"),
    "not_conflict": ("no conflict with", "no conflict with"),
}


def _short(title: str, limit: int = 60) -> str:
    flat = " ".join(title.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class MemoryRelations(Model):
    """A memory (its #id, sync id, project and title) with every relation that names it, and
    whether it needs review (an active, pending ``conflicts_with`` touches it)."""

    id: int
    sync_id: str
    project: str
    title: str
    needs_review: bool
    relations: list[Relation]
