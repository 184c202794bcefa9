"""The routes of the local HTTP API, each a thin shell over one :class:`engram.store.Store`
method, and the parameter types they share.

Handlers are synchronous (the store is) and run in worker threads. Their request and answer
types come from :mod:`engram.http.models`; :mod:`engram.http.app` assembles them into the app,
puts :data:`GUARDED_ROUTES` behind the bearer token and translates errors.

Size: over 500 lines on purpose: the local API's route table, each handler a thin call into
the store; one file so the contract reads as one list.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Literal

from litestar import Controller, Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, FromQuery, JSONBody, PathParameter, QueryParameter
from litestar.types import ControllerRouterHandler

from engram import __version__
from engram.errors import ProjectResolutionError, ValidationError
from engram.http.lenient import LenientFlag, count_parameter, go_bool, whole_number
from engram.http.models import (
    MAX_INT,
    ContextOut,
    CurrentProject,
    ErrorBody,
    ExportDocument,
    Health,
    History,
    ImportResult,
    MergeResult,
    Observation,
    ObservationCreate,
    ObservationDeleted,
    ObservationPage,
    ObservationPatch,
    ObservationSaved,
    PassiveCapture,
    PassiveResult,
    ProjectList,
    ProjectMerge,
    ProjectMigrate,
    Prompt,
    PromptCreate,
    PromptDeleted,
    PromptSaved,
    Session,
    SessionCreate,
    SessionDetail,
    SessionEnd,
    SessionStatus,
    Stats,
    SyncStatus,
    Timeline,
    TopicKey,
    TopicKeyRequest,
    to_wire,
)
from engram.project import ProjectResolution, detect_project, normalize_project
from engram.settings import Config
from engram.store import Store
from engram.sync.cloud.status import StatusSource, sync_status

IMPORT_BODY_LIMIT = 50 * 1000 * 1000  # 50 MB, as the Go tool
CONTEXT_MAX_BYTES = 65536  # the Go tool's cap for ?max_bytes
LIST_MAX = 1000  # longest page any list route returns
# Python names of parameters whose wire name differs (`scope` is reserved by litestar).
WIRE_NAMES = {"scope_filter": "scope"}


@dataclass(slots=True)
class ServerContext:
    """What handlers need besides the store: the settings, the cloud status source, and the
    server's own project (detected once from its directory, as the MCP server does; ``GET
    /project/current`` detects it again)."""

    config: Config
    sync_source: StatusSource | None = None
    detected: ProjectResolution | None = None

    def project(self, *, refresh: bool = False) -> ProjectResolution:
        if self.detected is None or refresh:
            self.detected = _current_project(self.config)
        return self.detected

    def write_project(self, store: Store, project: str | None, session_id: str | None) -> str:
        """Where a save that may name no project goes: the named project; else the named
        session's (see ``Store.project_of_session``); else the server's — never project "",
        which no project list, context or sync would ever show. A directory holding several
        repositories names none: the save is refused, nothing written."""
        if project is not None and project.strip():
            return project
        if session_id and session_id.strip() and (joined := store.project_of_session(session_id)):
            return joined
        here = self.project()
        if here.ambiguous or not here.project:
            raise ProjectResolutionError(
                f"{here.cwd} holds several repositories, so the server's project is ambiguous "
                f"and nothing was written: send project (one of: "
                f"{', '.join(here.available_projects)}), or start engram serve with "
                "ENGRAM_PROJECT set",
                code="ambiguous_project",
                available_projects=here.available_projects,
            )
        return here.project


# --- shared parameter types ---------------------------------------------------------------------

StoreArg = NamedDependency[Store]
ServerArg = NamedDependency[ServerContext]

Project = Annotated[str | None, QueryParameter(description="only this project (normalized)")]
# `scope` is litestar's name for the ASGI scope, so the Python name differs from the query key.
ScopeFilter = Annotated[
    Literal["project", "personal"] | None,
    QueryParameter(name="scope", description="only this scope"),
]
TypeFilter = Annotated[str | None, QueryParameter(description="only this memory type")]
Since = Annotated[
    str | None, QueryParameter(description="created on or after (YYYY-MM-DD or RFC 3339)")
]
Until = Annotated[
    str | None, QueryParameter(description="created on or before (YYYY-MM-DD or RFC 3339)")
]
Offset = Annotated[int, QueryParameter(ge=0, le=MAX_INT, description="rows to skip")]
MatchMode = Annotated[
    Literal["any", "all"], QueryParameter(description="any word (ranked, default) or all words")
]
SearchMode = Annotated[
    Literal["lexical", "semantic", "hybrid"] | None,
    QueryParameter(
        description="words, meaning, or both (default: hybrid when the semantic extra is "
        "installed, else lexical)"
    ),
]
ObservationId = Annotated[int, PathParameter(ge=1, le=MAX_INT, description="the memory's #id")]
PromptId = Annotated[int, PathParameter(ge=1, le=MAX_INT, description="the prompt's #id")]
SessionId = FromPath[str]


# Counts are read as the Go tool reads them (engram/http/lenient.py): not a whole number or
# below 1 means the default, so hooks written for that tool keep working.
RecentLimit = Annotated[str | None, count_parameter(20, LIST_MAX)]
SessionLimit = Annotated[str | None, count_parameter(5, LIST_MAX)]
SearchLimit = Annotated[
    str | None, count_parameter(10, LIST_MAX, "how many (at most 20 are returned)")
]
TimelineCount = Annotated[str | None, count_parameter(5, LIST_MAX, "memories on this side")]


def _errors(*codes: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the error answers a route can give: every one may refuse a web page
    (403, 421) and answer 503; one that takes a body (413) also refuses non-JSON ones (415)."""
    descriptions = {
        400: "Invalid input: the message names the field",
        401: "Missing or wrong bearer token (only when ENGRAM_HTTP_TOKEN is set)",
        403: "Refused: sent from a web page (an Origin that is not this machine)",
        404: "No such id (or, for a project, nothing is stored under that name)",
        409: "Conflicts with stored data",
        413: "Request body too large",
        415: "The body is not JSON: send Content-Type: application/json",
        421: "Refused: the Host header does not name this machine (ENGRAM_HTTP_ALLOWED_HOSTS)",
        503: "The database is unavailable (locked, read-only, not a database)",
    }
    always = (403, 421, 503, *((415,) if 413 in codes else ()))
    return {
        code: ResponseSpec(
            data_container=ErrorBody, description=descriptions[code], generate_examples=False
        )
        for code in sorted({*codes, *always})
    }


# Every handler calls the synchronous store, so every handler runs in a worker thread.
_get = partial(get, sync_to_thread=True)
_post = partial(post, sync_to_thread=True)
_patch = partial(patch, sync_to_thread=True)
_delete = partial(delete, sync_to_thread=True, status_code=200)


def _current_project(config: Config) -> ProjectResolution:
    """The server's project: ``ENGRAM_PROJECT`` if set, else detected from its directory."""
    if config.project_override:
        name = normalize_project(config.project_override)[0]
        return ProjectResolution(name, "process_override", "", os.getcwd())
    return detect_project()


# --- routes anyone who can reach the port may use -----------------------------------------------


@_get("/health", tags=["server"], responses=_errors(), summary="Is the server up?")
def health(store: StoreArg) -> Health:
    store.count_sessions()  # touches the database: a broken store answers 503, not "ok"
    return Health(status="ok", service="engram", version=__version__, instance_id=store.origin)


class SessionRoutes(Controller):
    path = "/sessions"
    tags = ("sessions",)

    @_post("/", status_code=201, responses=_errors(400, 413), summary="Start a session")
    def create(
        self, store: StoreArg, server: ServerArg, data: JSONBody[SessionCreate]
    ) -> SessionStatus:
        """Create a session, or fill in the blank project/directory of an existing one.
        Without ``project``: the session's own (if this machine has it), else the server's."""
        project = server.write_project(store, data.project, data.id)
        session = store.create_session(data.id, project, data.directory or "")
        return SessionStatus(id=session.id, status="created")

    @_post(
        "/{session_id:str}/end",
        status_code=200,
        responses=_errors(400, 404, 413),
        summary="End a session",
    )
    def end(
        self, store: StoreArg, session_id: SessionId, data: JSONBody[SessionEnd | None] = None
    ) -> SessionStatus:
        session = store.end_session(session_id, data.summary if data else None)
        return SessionStatus(id=session.id, status="completed")

    @_get("/recent", responses=_errors(400), summary="Recently active sessions")
    def recent(
        self,
        store: StoreArg,
        project: Project = None,
        since: Since = None,
        until: Until = None,
        limit: SessionLimit = None,
        offset: Offset = 0,
    ) -> list[Session]:
        count = whole_number(limit, 5, LIST_MAX)
        sessions = store.recent_sessions(project, count, since=since, until=until, offset=offset)
        return sessions

    @_get("/{session_id:str}", responses=_errors(400, 404), summary="A session and its memories")
    def detail(self, store: StoreArg, session_id: SessionId) -> SessionDetail:
        session = store.get_session(session_id)
        return SessionDetail(
            session=session,
            observations=store.session_observations(session_id),
            prompts=store.session_prompts(session_id),
        )


class ObservationRoutes(Controller):
    path = "/observations"
    tags = ("observations",)

    @_post("/", status_code=201, responses=_errors(400, 413), summary="Save a memory")
    def create(
        self, store: StoreArg, server: ServerArg, data: JSONBody[ObservationCreate]
    ) -> ObservationSaved:
        """Same topic key ⇒ that memory is updated; same content within 15 minutes ⇒ a
        duplicate is counted; otherwise a new memory. Without ``project``: the named session's
        project, else the server's (``GET /project/current``)."""
        result = store.add_observation(
            title=data.title,
            content=data.content,
            type=data.type,
            session_id=data.session_id,
            project=server.write_project(store, data.project, data.session_id),
            scope=data.scope,
            topic_key=data.topic_key,
            tool_name=data.tool_name,
            allow_secrets=data.allow_secrets,
            importance=data.importance,
        )
        return ObservationSaved(
            id=result.observation.id,
            status="saved",
            action=result.action,
            observation=result.observation,
            warnings=result.warnings,
            truncated=result.truncated,
            suggested_topic_key=result.suggested_topic_key,
            original_bytes=result.original_bytes if result.truncated else None,
            limit_bytes=result.limit_bytes if result.truncated else None,
        )

    @_post(
        "/passive",
        status_code=200,
        responses=_errors(400, 413),
        summary="Save the items of a 'Key Learnings' section",
    )
    def passive(
        self, store: StoreArg, server: ServerArg, data: JSONBody[PassiveCapture]
    ) -> PassiveResult:
        result = store.capture_passive(
            data.content,
            session_id=data.session_id,
            project=server.write_project(store, data.project, data.session_id),
            source=data.source or "http-passive",
        )
        return result

    @_get("/recent", responses=_errors(400), summary="Newest memories")
    def recent(
        self,
        store: StoreArg,
        project: Project = None,
        scope_filter: ScopeFilter = None,
        type: TypeFilter = None,
        since: Since = None,
        until: Until = None,
        limit: RecentLimit = None,
    ) -> list[Observation]:
        found = store.recent_observations(
            project, scope_filter, whole_number(limit, 20, LIST_MAX), type=type, since=since,
            until=until,
        )  # fmt: skip
        return found

    @_get("/", responses=_errors(400), summary="Memories, newest first, a page at a time")
    def page(
        self,
        store: StoreArg,
        project: Project = None,
        scope_filter: ScopeFilter = None,
        type: TypeFilter = None,
        since: Since = None,
        until: Until = None,
        limit: RecentLimit = None,
        offset: Offset = 0,
    ) -> ObservationPage:
        count = whole_number(limit, 20, LIST_MAX)
        found = store.recent_observations(
            project, scope_filter, count, type=type, since=since, until=until, offset=offset
        )
        total = store.count_observations(project, scope_filter, type=type, since=since, until=until)
        return ObservationPage(observations=found, total=total, offset=offset, limit=count)

    @_get("/{observation_id:int}", responses=_errors(400, 404), summary="One memory")
    def one(self, store: StoreArg, observation_id: ObservationId) -> Observation:
        return store.get_observation(observation_id, record_access=True)

    @_get(
        "/{observation_id:int}/history",
        responses=_errors(400, 404),
        summary="A memory and its earlier versions",
    )
    def history(self, store: StoreArg, observation_id: ObservationId) -> History:
        """The memory as it is now (a deleted one too) and the earlier versions this machine
        kept (the last 20), newest first."""
        return store.history(observation_id)

    @_patch(
        "/{observation_id:int}",
        responses=_errors(400, 404, 413),
        summary="Change some fields of a memory",
    )
    def update(
        self, store: StoreArg, observation_id: ObservationId, data: JSONBody[ObservationPatch]
    ) -> Observation:
        """The body is the memory after the change: secrets in new text show as
        ``[REDACTED:kind]`` (``allow_secrets`` keeps them)."""
        changed = store.update_observation(
            observation_id,
            title=data.title,
            content=data.content,
            type=data.type,
            project=data.project,
            scope=data.scope,
            topic_key=data.topic_key,
            tool_name=data.tool_name,
            allow_secrets=data.allow_secrets,
            importance=data.importance,
            pinned=data.pinned,
            valid_from=data.valid_from,
            valid_to=data.valid_to,
        )
        return changed


@_get("/search", tags=["search"], responses=_errors(400), summary="Search memories")
def search(
    store: StoreArg,
    q: Annotated[str, QueryParameter(description="words or a question; FTS syntax is just text")],
    type: TypeFilter = None,
    project: Project = None,
    scope_filter: ScopeFilter = None,
    limit: SearchLimit = None,
    match_mode: MatchMode = "any",
    since: Since = None,
    until: Until = None,
    mode: SearchMode = None,
    as_of: Annotated[
        str | None,
        QueryParameter(
            description="what was true then: YYYY-MM-DD (the end of that day) or an ISO 8601 "
            "date and time"
        ),
    ] = None,
) -> list[Observation]:
    """Best matches first (``rank``: lower is better); a query with ``/`` first matches topic
    keys exactly. In semantic and hybrid mode each result says what found it (``found_by``)
    and how similar it is to the question (``similarity``). Importance breaks near ties;
    ``as_of`` answers with what was true then (a lexical search of that moment)."""
    found = store.search(
        q,
        type=type,
        project=project,
        scope=scope_filter,
        limit=whole_number(limit, 10, LIST_MAX),
        match_mode=match_mode,
        since=since,
        until=until,
        mode=mode,
        as_of=as_of,
        check_conflicts=True,  # what was saved just before shows its conflicts
    )
    return found


@_get(
    "/timeline",
    tags=["search"],
    responses=_errors(400, 404),
    summary="Memories saved around one, in its session",
)
def timeline(
    store: StoreArg,
    observation_id: Annotated[
        int, QueryParameter(ge=1, le=MAX_INT, description="the memory to center on")
    ],
    before: TimelineCount = None,
    after: TimelineCount = None,
) -> Timeline:
    return store.timeline(
        observation_id, whole_number(before, 5, LIST_MAX), whole_number(after, 5, LIST_MAX)
    )


class PromptRoutes(Controller):
    path = "/prompts"
    tags = ("prompts",)

    @_post("/", status_code=201, responses=_errors(400, 413), summary="Save what the user asked")
    def create(
        self, store: StoreArg, server: ServerArg, data: JSONBody[PromptCreate]
    ) -> PromptSaved:
        prompt = store.add_prompt(
            data.content,
            session_id=data.session_id,
            project=server.write_project(store, data.project, data.session_id),
            allow_secrets=data.allow_secrets,
        )
        return PromptSaved(id=prompt.id, status="saved", prompt=prompt)

    @_get("/recent", responses=_errors(400), summary="Newest prompts")
    def recent(
        self,
        store: StoreArg,
        project: Project = None,
        limit: RecentLimit = None,
        offset: Offset = 0,
    ) -> list[Prompt]:
        count = whole_number(limit, 20, LIST_MAX)
        return store.recent_prompts(project, count, offset=offset)

    @_get("/search", responses=_errors(400), summary="Search prompts")
    def search(
        self,
        store: StoreArg,
        q: FromQuery[str],
        project: Project = None,
        limit: SearchLimit = None,
        match_mode: MatchMode = "any",
    ) -> list[Prompt]:
        count = whole_number(limit, 10, LIST_MAX)
        found = store.search_prompts(q, project=project, limit=count, match_mode=match_mode)
        return found


SectionLimit = Annotated[
    int, QueryParameter(ge=-1, le=500, description="0: the default, -1: leave the section out")
]


@_get(
    "/context",
    tags=["search"],
    responses=_errors(400),
    summary="Recent sessions, prompts and memories as markdown",
)
def context(
    store: StoreArg,
    project: Annotated[str | None, QueryParameter(description="default: every project")] = None,
    scope_filter: ScopeFilter = None,
    max_bytes: Annotated[
        int | None,
        QueryParameter(
            ge=1, le=MAX_INT, description=f"cap the text's size (at most {CONTEXT_MAX_BYTES})"
        ),
    ] = None,
    sessions: SectionLimit = 0,
    observations: SectionLimit = 0,
    prompts: SectionLimit = 0,
    compact: FromQuery[bool] = False,
) -> ContextOut:
    text = store.context(
        project,
        scope_filter,
        max_bytes=None if max_bytes is None else min(max_bytes, CONTEXT_MAX_BYTES),
        sessions=sessions,
        observations=observations,
        prompts=prompts,
        compact=compact,
    )
    return ContextOut(project=normalize_project(project)[0] or None, context=text)


@_get("/stats", tags=["projects"], responses=_errors(400), summary="How much is stored")
def stats(store: StoreArg, project: Project = None) -> Stats:
    return store.stats(project)


@_get("/projects", tags=["projects"], responses=_errors(), summary="Projects with their counts")
def projects(store: StoreArg) -> ProjectList:
    found = store.list_projects()
    return ProjectList(projects=found, count=len(found))


@_get(
    "/project/current",
    tags=["projects"],
    responses=_errors(),
    summary="The project of the server's working directory",
)
def current_project(store: StoreArg, server: ServerArg) -> CurrentProject:
    """Where saves without a project go, and every project a request may name (as MCP's
    mem_current_project answers)."""
    here = server.project(refresh=True)
    data = here.to_dict()
    if not here.ambiguous:
        data["available_projects"] = sorted({*store.project_names(), *(
            n for n in (here.project,) if n)})  # fmt: skip
    return to_wire(data, CurrentProject)


@_post(
    "/topic-keys/suggest",
    tags=["observations"],
    status_code=200,
    responses=_errors(400, 413),
    summary="Suggest a topic key for a memory",
)
def suggest_topic(data: JSONBody[TopicKeyRequest]) -> TopicKey:
    from engram.text import suggest_topic_key

    title, content = (data.title or "").strip(), (data.content or "").strip()
    if not title and not content:
        raise ValidationError("give a title or content to suggest a topic key for", field="title")
    return TopicKey(topic_key=suggest_topic_key(data.type or "", title, content))


@_get("/sync/status", tags=["sync"], responses=_errors(400), summary="Cloud sync state")
def sync_state(
    store: StoreArg,
    server: ServerArg,
    project: Annotated[
        str | None, QueryParameter(description="default: the current project")
    ] = None,
    all_projects: FromQuery[bool] = False,
) -> SyncStatus:
    if all_projects:
        raise ProjectResolutionError(
            "sync status is per project: pass ?project=<name> instead of all_projects",
            code="unsupported_project_scope",
        )
    name = normalize_project(project)[0] if project else server.project().project
    return to_wire(sync_status(store, name, source=server.sync_source), SyncStatus)


# --- destructive and bulk routes: behind ENGRAM_HTTP_TOKEN when it is set ------------------------


@_delete(
    "/sessions/{session_id:str}",
    tags=["sessions"],
    responses=_errors(400, 401, 404, 409),
    summary="Delete a session (refused while memories reference it)",
)
def delete_session(store: StoreArg, session_id: SessionId) -> SessionStatus:
    store.delete_session(session_id)
    return SessionStatus(id=session_id, status="deleted")


@_delete(
    "/observations/{observation_id:int}",
    tags=["observations"],
    responses=_errors(400, 401, 404),
    summary="Delete a memory (soft by default)",
)
def delete_observation(
    store: StoreArg,
    observation_id: ObservationId,
    hard: LenientFlag = None,
) -> ObservationDeleted:
    """Soft by default; ``hard=true`` removes it for good."""
    for_good = go_bool(hard)
    gone = store.delete_observation(observation_id, hard=for_good)
    return ObservationDeleted(id=gone.id, status="deleted", hard_delete=for_good)


@_delete(
    "/prompts/{prompt_id:int}",
    tags=["prompts"],
    responses=_errors(400, 401, 404),
    summary="Delete a prompt",
)
def delete_prompt(store: StoreArg, prompt_id: PromptId) -> PromptDeleted:
    gone = store.delete_prompt(prompt_id)
    return PromptDeleted(id=gone.id, status="deleted")


@_get(
    "/export",
    tags=["backup"],
    responses=_errors(400, 401),
    summary="Download every session, memory and prompt as JSON",
)
def export(store: StoreArg, project: Project = None) -> Response[ExportDocument]:
    # The store's document is returned as is: the same bytes as `engram export`.
    return Response(
        store.export_data(project),  # type: ignore[arg-type]  # that document's dict, as is
        headers={"Content-Disposition": 'attachment; filename="engram-export.json"'},
    )


@_post(
    "/import",
    tags=["backup"],
    status_code=200,
    request_max_body_size=IMPORT_BODY_LIMIT,
    responses=_errors(400, 401, 413),
    summary="Import a JSON export (all or nothing; rows already present are skipped)",
)
def import_(store: StoreArg, data: JSONBody[ExportDocument]) -> ImportResult:
    import msgspec

    return store.import_data(msgspec.to_builtins(data))


@_post(
    "/projects/merge",
    tags=["projects"],
    status_code=200,
    responses=_errors(400, 401, 404, 413),
    summary="Move every memory of some projects into another",
)
def merge_projects(store: StoreArg, data: JSONBody[ProjectMerge]) -> MergeResult:
    return store.merge_projects(data.sources, data.to)


@_post(
    "/projects/migrate",
    tags=["projects"],
    status_code=200,
    responses=_errors(400, 401, 404, 413),
    summary="Rename a project (moves everything of old_project into new_project)",
)
def migrate_project(store: StoreArg, data: JSONBody[ProjectMigrate]) -> MergeResult:
    return store.merge_projects([data.old_project], data.new_project)


OPEN_ROUTES: list[ControllerRouterHandler] = [
    health,
    SessionRoutes,
    ObservationRoutes,
    search,
    timeline,
    PromptRoutes,
    context,
    stats,
    projects,
    current_project,
    suggest_topic,
    sync_state,
]
GUARDED_ROUTES: list[HTTPRouteHandler] = [
    delete_session,
    delete_observation,
    delete_prompt,
    export,
    import_,
    merge_projects,
    migrate_project,
]
