"""The memories pages: the browser (observations, sessions and prompts, listed, filtered and
searched, a tab each) and one page per observation, prompt and session."""

from __future__ import annotations

import time
from typing import Any

from litestar import Request, get
from litestar.di import NamedDependency
from litestar.response import Template
from sqlalchemy import Connection

from engram_cloud.dashboard import graph as dgraph
from engram_cloud.dashboard.auth import Viewer
from engram_cloud.dashboard.common import (
    filters,
    not_found,
    param,
    project_param,
    tail,
    visible_project,
)
from engram_cloud.dashboard.queries import common as common_q
from engram_cloud.dashboard.queries import memories as memories_q
from engram_cloud.dashboard.render import is_fragment, render


def _browser(
    request: Request, viewer: Viewer, db: Connection, tab: str, *, q_override: str | None = None
) -> Template:
    project = project_param(request, viewer)
    q = common_q.clean_query(
        q_override if q_override is not None else request.query_params.get("q")
    )
    kind = param(request, "type") if tab == "observations" else ""
    paging = common_q.parse_paging(request.query_params)
    if tab == "observations":
        page = memories_q.observations(
            db, viewer.scope, memories_q.ObservationFilter(project, kind, q), paging
        )
    elif tab == "sessions":
        page = memories_q.sessions(db, viewer.scope, paging, project=project, q=q)
    else:
        page = memories_q.prompts(db, viewer.scope, paging, project=project, q=q)
    kept = filters(project=project, q=q, type=kind, pageSize=page.size)
    context: dict[str, Any] = {
        "viewer": viewer,
        "nav": "browser",
        "title": "Search" if q else "Browser",
        "tab": tab,
        "page": page,
        "project": project,
        "q": q,
        "type": kind,
        "filters": kept,
        "base": f"/dashboard/browser/{tab}",
        "target": "#results",
        "page_sizes": common_q.PAGE_SIZES,
    }
    if not is_fragment(request):
        context["projects"] = common_q.visible_projects(db, viewer.scope)
        context["types"] = (
            memories_q.observation_types(
                db, viewer.scope, request.app.state.dashboard_types, time.monotonic()
            )
            if tab == "observations"
            else []
        )
        if kind and kind not in context["types"]:
            context["types"] = sorted([*context["types"], kind])
    return render(request, "browser.html", context, fragment=f"partials/{tab}.html")


@get("/browser", sync_to_thread=True)
def browser(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _browser(request, viewer, db, "observations")


@get("/browser/observations", sync_to_thread=True)
def browser_observations(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _browser(request, viewer, db, "observations")


@get("/browser/sessions", sync_to_thread=True)
def browser_sessions(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _browser(request, viewer, db, "sessions")


@get("/browser/sessions/{rest:path}", sync_to_thread=True)
def browser_session(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    parts = tail(request, "/dashboard/browser/sessions/")
    if len(parts) != 1:
        raise not_found("There is no dashboard page at this address.")
    return _browser(request, viewer, db, "sessions", q_override=parts[0])


@get("/browser/prompts", sync_to_thread=True)
def browser_prompts(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _browser(request, viewer, db, "prompts")


@get("/sessions/{rest:path}", sync_to_thread=True)
def session_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    parts = tail(request, "/dashboard/sessions/")
    if len(parts) != 2 or len(parts[1]) > 128:
        raise not_found("There is no dashboard page at this address.")
    project = visible_project(viewer, parts[0])
    found = memories_q.session(db, project, parts[1])
    if found is None:
        raise not_found(f"There is no session {parts[1]!r} in project {project!r}.")
    return render(
        request,
        "session.html",
        {
            "viewer": viewer,
            "nav": "browser",
            "title": f"Session {found.id}",
            "session": found,
            "observations": memories_q.session_observations(db, project, found.id),
            "prompts": memories_q.session_prompts(db, project, found.id),
        },
    )


def _entity_parts(request: Request, prefix: str, viewer: Viewer) -> tuple[str, str, str]:
    parts = tail(request, prefix)
    if len(parts) != 3 or any(len(p) > 200 for p in parts):
        raise not_found("There is no dashboard page at this address.")
    return visible_project(viewer, parts[0]), parts[1], parts[2]


@get("/observations/{rest:path}", sync_to_thread=True)
def observation_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    project, session_id, sync_id = _entity_parts(request, "/dashboard/observations/", viewer)
    found = memories_q.observation(db, project, session_id, sync_id)
    if found is None:
        raise not_found(
            f"There is no observation {sync_id!r} in session {session_id!r} of project {project!r}."
        )
    relations, needs_review = dgraph.memory_relations(db, found)
    return render(
        request,
        "observation.html",
        {
            "viewer": viewer,
            "nav": "browser",
            "title": found.title,
            "obs": found,
            "related": memories_q.related_observations(db, found),
            "history": memories_q.observation_history(db, found),
            "relations": relations,
            "needs_review": needs_review,
            "standing": memories_q.standing(db, found, dgraph.link_count(relations)),
        },
    )


@get("/prompts/{rest:path}", sync_to_thread=True)
def prompt_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    project, session_id, sync_id = _entity_parts(request, "/dashboard/prompts/", viewer)
    found = memories_q.prompt(db, project, session_id, sync_id)
    if found is None:
        raise not_found(
            f"There is no prompt {sync_id!r} in session {session_id!r} of project {project!r}."
        )
    return render(
        request,
        "prompt.html",
        {
            "viewer": viewer,
            "nav": "browser",
            "title": "Prompt",
            "prompt": found,
            "related": memories_q.session_prompts(db, project, session_id, exclude=sync_id),
        },
    )


ROUTES = [
    browser,
    browser_observations,
    browser_sessions,
    browser_session,
    browser_prompts,
    session_page,
    observation_page,
    prompt_page,
]
