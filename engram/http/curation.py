"""The curation routes of the local HTTP API (docs/importance.md): pins, restore and archive,
the archived and review lists, and consolidation — each one store call, like every route in
:mod:`engram.http.routes` (whose parameter types and error table they share)."""

from __future__ import annotations

from typing import Annotated

from litestar import delete, put
from litestar.handlers import HTTPRouteHandler
from litestar.params import JSONBody, QueryParameter
from litestar.types import ControllerRouterHandler
from msgspec import Meta, Struct

from engram.consolidate.report import ConsolidationReport
from engram.errors import ValidationError
from engram.http.lenient import whole_number
from engram.http.models import MAX_INT, Observation
from engram.http.routes import (
    LIST_MAX,
    ObservationId,
    Project,
    RecentLimit,
    StoreArg,
    _errors,
    _get,
    _post,
)

# --- bodies -------------------------------------------------------------------------------------


class MemoryRef(Struct):
    """The memory a ``POST`` acts on (restore, archive, mark reviewed), by its #id."""

    id: Annotated[int, Meta(ge=1, le=MAX_INT)]


class RestoreRequest(Struct, kw_only=True):
    """The memories to bring back: ``id`` (one) or ``ids`` (several, all or none)."""

    id: Annotated[int, Meta(ge=1, le=MAX_INT)] | None = None
    ids: (
        Annotated[list[Annotated[int, Meta(ge=1, le=MAX_INT)]], Meta(min_length=1, max_length=1000)]
        | None
    ) = None


class RestoredOut(Struct):
    restored: list[Observation]
    count: int


class ConsolidateRequest(Struct, kw_only=True):
    project: str | None = None  # default: every project
    dry_run: bool = False
    max: int | None = None  # change at most this many memories
    threshold: float | None = None  # archive below this importance (default 0.1)
    similarity: float | None = None  # how alike duplicates must be (default 0.6)


# --- routes -------------------------------------------------------------------------------------

Days = Annotated[
    int | None,
    QueryParameter(ge=1, le=36500, description="idle for at least this many days (default 90)"),
]


@put(
    "/observations/{observation_id:int}/pin",
    sync_to_thread=True,
    tags=["observations"],
    responses=_errors(400, 404, 409),
    summary="Pin a memory (always in the context, never archived)",
)
def pin(store: StoreArg, observation_id: ObservationId) -> Observation:
    return store.pin_observation(observation_id, True)


@delete(
    "/observations/{observation_id:int}/pin",
    sync_to_thread=True,
    status_code=200,
    tags=["observations"],
    responses=_errors(400, 404, 409),
    summary="Unpin a memory",
)
def unpin(store: StoreArg, observation_id: ObservationId) -> Observation:
    return store.pin_observation(observation_id, False)


@_post(
    "/observations/restore",
    status_code=200,
    tags=["observations"],
    responses=_errors(400, 404, 409, 413),
    summary="Bring back archived or soft-deleted memories",
)
def restore(store: StoreArg, data: JSONBody[RestoreRequest]) -> Observation | RestoredOut:
    """``{"id": N}`` answers with the memory; ``{"ids": [...]}`` with every memory restored, or
    none when one cannot be (404: hard-deleted, 409: not deleted)."""
    if (data.id is None) == (data.ids is None):
        raise ValidationError("give id (one memory) or ids (several), not both", field="id")
    if data.id is not None:
        return store.restore_observation(data.id)
    back = store.restore_observations(data.ids)
    return RestoredOut(restored=back, count=len(back))


@_post(
    "/observations/archive",
    status_code=200,
    tags=["observations"],
    responses=_errors(400, 401, 404, 409, 413),
    summary="Archive a memory by hand (restorable; pinned memories are refused)",
)
def archive(store: StoreArg, data: JSONBody[MemoryRef]) -> Observation:
    store.archive_observation(data.id)
    return store.get_observation(data.id, include_deleted=True)


@_get(
    "/observations/archived",
    tags=["observations"],
    responses=_errors(400),
    summary="Archived memories, most recently archived first",
)
def archived(
    store: StoreArg, project: Project = None, limit: RecentLimit = None
) -> list[Observation]:
    count = whole_number(limit, 20, LIST_MAX)
    return store.archived_observations(project, limit=count)


@_get(
    "/review",
    tags=["observations"],
    responses=_errors(400),
    summary="Memories nobody changed, confirmed or read for a while, stalest first",
)
def review(
    store: StoreArg, project: Project = None, days: Days = None, limit: RecentLimit = None
) -> list[Observation]:
    count = whole_number(limit, 20, LIST_MAX)
    return store.needs_review(project, days=days, limit=count)


@_post(
    "/review/mark_reviewed",
    status_code=200,
    tags=["observations"],
    responses=_errors(400, 404, 409, 413),
    summary="Confirm a memory is still right",
)
def mark_reviewed(store: StoreArg, data: JSONBody[MemoryRef]) -> Observation:
    return store.mark_reviewed(data.id)


@_post(
    "/consolidate",
    status_code=200,
    tags=["observations"],
    responses=_errors(400, 401, 413),
    summary="Merge near-duplicates, archive unimportant memories, re-score (dry_run: plan only)",
)
def consolidate(store: StoreArg, data: JSONBody[ConsolidateRequest]) -> ConsolidationReport:
    return store.consolidate(
        data.project,
        dry_run=data.dry_run,
        max_changes=data.max,
        threshold=data.threshold,
        similarity=data.similarity,
    )


CURATION_OPEN_ROUTES: list[ControllerRouterHandler] = [
    pin,
    unpin,
    restore,
    archived,
    review,
    mark_reviewed,
]
#: Behind ENGRAM_HTTP_TOKEN like the other deletes: both archive memories.
CURATION_GUARDED_ROUTES: list[HTTPRouteHandler] = [archive, consolidate]
