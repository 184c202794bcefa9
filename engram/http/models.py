"""The wire shapes of the local HTTP API: every request and response body as a msgspec Struct.

litestar validates request bodies against these types (a wrong or missing field is a 400 naming
it) and builds the OpenAPI document at ``/schema`` from them, so the schema is exactly what the
server accepts and answers. The entities and results the store hands out are answered as they
are: :mod:`engram.store.models` are Structs too (one definition, re-exported here), as are the
graph's answers (:mod:`engram.graph.answers`) and a consolidation's report
(:mod:`engram.consolidate.report`), so the schema cannot drift from what the store returns.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct, field

from engram.store.db import MAX_INTEGER
from engram.store.models import (
    History,
    ImportResult,
    MemoryRelations,
    MergeResult,
    Observation,
    PassiveResult,
    ProjectInfo,
    Prompt,
    Relation,
    RelationEnd,
    Revision,
    SearchMatch,
    Session,
    Stats,
    Timeline,
    TimelineEntry,
)

__all__ = [  # the store's models, answered as they are
    "History",
    "ImportResult",
    "MemoryRelations",
    "MergeResult",
    "Observation",
    "PassiveResult",
    "ProjectInfo",
    "Prompt",
    "Relation",
    "RelationEnd",
    "Revision",
    "SearchMatch",
    "Session",
    "Stats",
    "Timeline",
    "TimelineEntry",
]

# SQLite integers are signed 64-bit: anything larger must be refused before it reaches a query.
MAX_INT = MAX_INTEGER  # SQLite's INTEGER range
SessionId = Annotated[str, Meta(min_length=1, max_length=128, pattern=r"\S")]
Text = Annotated[str, Meta(min_length=1, pattern=r"\S")]  # not blank
Count = Annotated[int, Meta(ge=0, le=MAX_INT)]


# --- errors -------------------------------------------------------------------------------------


class ErrorBody(Struct, omit_defaults=True):
    """Every failure: ``{"error": "..."}``, plus the field or code when there is one."""

    error: str
    field: str | None = None
    error_code: str | None = None
    available_projects: list[str] | None = None


# --- conversions --------------------------------------------------------------------------------


def to_wire(obj: Any, kind: type[Struct]) -> Any:
    """A report a service gives as a dict or a dataclass, as its wire struct."""
    return msgspec.convert(obj, kind, from_attributes=True)


# --- health -------------------------------------------------------------------------------------


class Health(Struct):
    status: str
    service: str
    version: str
    instance_id: str


# --- sessions -----------------------------------------------------------------------------------


class SessionCreate(Struct):
    id: SessionId
    project: str | None = ""
    directory: str | None = ""


class SessionEnd(Struct):
    summary: str | None = None


class SessionStatus(Struct):
    id: str
    status: str  # created | completed | deleted


class SessionDetail(Struct):
    session: Session
    observations: list[Observation]
    prompts: list[Prompt]


# --- observations -------------------------------------------------------------------------------


class ObservationCreate(Struct):
    title: Text
    content: Text
    type: str | None = "manual"
    session_id: SessionId | None = None  # default: manual-save-<project>
    project: str | None = ""
    scope: str | None = "project"  # personal | project (anything else is project)
    topic_key: str | None = None
    tool_name: str | None = None
    #: keep text that looks like a secret (by default it is saved as [REDACTED:kind])
    allow_secrets: bool = False
    #: how much it matters, 0-1 (default: computed); the store refuses anything else
    importance: float | None = None


class ObservationSaved(Struct, omit_defaults=True):
    """The saved observation, what happened to it and any warnings."""

    id: int
    status: str  # always "saved"
    action: str  # created | deduplicated | topic_updated
    observation: Observation
    warnings: list[str]
    truncated: bool
    suggested_topic_key: str | None = None
    original_bytes: int | None = None
    limit_bytes: int | None = None


class ObservationPatch(Struct):
    """Only the fields given change; ``topic_key: ""`` clears the topic."""

    title: str | None = None
    content: str | None = None
    type: str | None = None
    project: str | None = None
    scope: str | None = None
    topic_key: str | None = None
    tool_name: str | None = None
    allow_secrets: bool = False
    #: 0-1 set by hand, or "auto" for the computed score
    importance: float | str | None = None
    pinned: bool | None = None
    #: when it was true (YYYY-MM-DD or RFC 3339; "" or "none" clears)
    valid_from: str | None = None
    valid_to: str | None = None


class ObservationDeleted(Struct):
    id: int
    status: str  # always "deleted"
    hard_delete: bool


class ObservationPage(Struct):
    observations: list[Observation]
    total: int
    offset: int
    limit: int


class PassiveCapture(Struct):
    content: str
    session_id: SessionId | None = None
    project: str | None = ""
    source: str | None = "http-passive"  # saved as the memories' tool_name


# --- prompts ------------------------------------------------------------------------------------


class PromptCreate(Struct):
    content: Text
    session_id: SessionId | None = None
    project: str | None = ""
    allow_secrets: bool = False


class PromptSaved(Struct):
    id: int
    status: str  # always "saved"
    prompt: Prompt


class PromptDeleted(Struct):
    id: int
    status: str  # always "deleted"


# --- context, stats, projects -------------------------------------------------------------------


class ContextOut(Struct):
    project: str | None
    context: str  # "" when there is nothing to show


class ProjectList(Struct):
    projects: list[ProjectInfo]
    count: int


class ProjectMerge(Struct):
    sources: list[str] = field(name="from")
    to: str


class ProjectMigrate(Struct):
    old_project: str
    new_project: str


class CurrentProject(Struct):
    project: str
    project_source: str
    project_path: str
    cwd: str
    available_projects: list[str]
    warning: str


class TopicKeyRequest(Struct):
    type: str | None = ""
    title: str | None = ""
    content: str | None = ""


class TopicKey(Struct):
    topic_key: str


# --- export / import ----------------------------------------------------------------------------


class ExportSession(Struct):
    id: str
    project: str | None = None
    directory: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    summary: str | None = None


class ExportObservation(Struct, kw_only=True):
    id: Count | None = None  # local id of the exporting machine: ignored on import
    sync_id: str | None = None
    session_id: str
    type: str | None = None
    title: str
    content: str
    tool_name: str | None = None
    project: str | None = None
    scope: str | None = None
    topic_key: str | None = None
    revision_count: Count | None = None
    duplicate_count: Count | None = None
    last_seen_at: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    deleted_at: str | None = None
    pinned: bool = False
    importance_override: float | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    delete_reason: str | None = None
    superseded_by: str | None = None
    reviewed_at: str | None = None


class ExportPrompt(Struct, kw_only=True):
    id: Count | None = None
    sync_id: str | None = None
    session_id: str
    content: str
    project: str | None = None
    created_at: str | None = None


class ExportRelation(Struct, kw_only=True):
    id: Count | None = None  # local id of the exporting machine: ignored on import
    sync_id: str | None = None
    source_id: str
    target_id: str
    relation: str
    reason: str | None = None
    evidence: str | None = None
    confidence: Annotated[float, Meta(ge=0, le=1)] | None = None
    judgment_status: str | None = None
    marked_by_actor: str | None = None
    marked_by_kind: str | None = None
    marked_by_model: str | None = None
    session_id: str | None = None
    project: str | None = None
    superseded_at: str | None = None
    superseded_by_relation_id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    scope: str | None = None


class ExportDocument(Struct, omit_defaults=True):
    """The JSON backup (version ``0.1.0``, or ``0.2.0`` with relations). Empty lists may be
    ``null`` (the Go tool writes them so)."""

    version: str
    exported_at: str | None = None
    sessions: list[ExportSession] | None = None
    observations: list[ExportObservation] | None = None
    prompts: list[ExportPrompt] | None = None
    relations: list[ExportRelation] | None = None
    memory_relations: list[ExportRelation] | None = None  # the Go tool's name


# --- sync status --------------------------------------------------------------------------------


class UpgradeStatus(Struct):
    stage: str | None
    reason_code: str | None
    reason_message: str | None


class LoopCycles(Struct):
    """How many passes this server's autosync loop made: pushes and long-polls."""

    push: int
    pull: int


class SyncStatus(Struct):
    project: str
    enabled: bool
    phase: str
    last_error: str | None
    consecutive_failures: int
    backoff_until: str | None
    last_sync_at: str | None
    reason_code: str | None
    reason_message: str | None
    deferred_count: int
    dead_count: int
    upgrade: UpgradeStatus
    pending_count: int = 0  # journal rows of the project the server does not hold yet
    quarantined_count: int = 0  # rows the server rejected (engram cloud repair retries them)
    #: records pulled or imported for the project that wait in the local quarantine
    #: (clock_skew, invalid …; engram sync --quarantine lists them)
    inbound_quarantined_count: int = 0
    #: the passes of this server's autosync loop, when it runs here
    loop_cycles: LoopCycles | None = None


# --- relations and the graph (issue 20) ---------------------------------------------------------

RelationName = Annotated[
    str,
    Meta(
        pattern=r"^(supersedes|conflicts_with|related|compatible|scoped|not_conflict)$",
        description="supersedes, conflicts_with, related, compatible, scoped, not_conflict",
    ),
]
MemoryRef = Annotated[int | str, Meta(description="a memory's #id (number) or its sync id (obs-…)")]
SettableStatus = Annotated[str, Meta(pattern=r"^(judged|pending|ignored)$")]
ShortText = Annotated[str, Meta(max_length=4000)]


class RelationCreate(Struct, kw_only=True):
    source_id: MemoryRef
    target_id: MemoryRef
    relation: RelationName
    reason: ShortText | None = None
    evidence: ShortText | None = None
    confidence: Annotated[float, Meta(ge=0, le=1)] | None = None
    status: SettableStatus = "judged"
    project: str | None = None  # where sync ids are looked up


class RelationJudge(Struct, kw_only=True):
    status: SettableStatus = "judged"
    relation: RelationName | None = None
    reason: ShortText | None = None
    evidence: ShortText | None = None
    confidence: Annotated[float, Meta(ge=0, le=1)] | None = None


class GraphIngest(Struct, kw_only=True):
    id: Annotated[int, Meta(ge=1, le=MAX_INT)] | None = None
    project: str | None = None
    all_projects: bool = False
    force: bool = False
