"""The projects pages: the viewer's projects with their counts and pause state, and one page per
project with its newest observations, sessions and prompts, and its graph of entities."""

from __future__ import annotations

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
    tail,
    visible_project,
)
from engram_cloud.dashboard.queries import common as common_q
from engram_cloud.dashboard.queries import projects as projects_q
from engram_cloud.dashboard.render import render


def _projects(request: Request, viewer: Viewer, db: Connection) -> Template:
    q = common_q.clean_query(request.query_params.get("q"))
    paging = common_q.parse_paging(request.query_params)
    page = projects_q.projects(db, viewer.scope, paging, q=q)
    return render(
        request,
        "projects.html",
        {
            "viewer": viewer,
            "nav": "projects",
            "title": "Projects",
            "page": page,
            "q": q,
            "filters": filters(q=q, pageSize=page.size),
            "base": "/dashboard/projects/list",
            "target": "#results",
        },
        fragment="partials/projects_list.html",
    )


@get("/projects", sync_to_thread=True)
def projects_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _projects(request, viewer, db)


@get("/projects/list", sync_to_thread=True)
def projects_list(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _projects(request, viewer, db)


PROJECT_TABS = ("observations", "sessions", "prompts", "graph")


@get("/projects/{rest:path}", sync_to_thread=True)
def project_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    parts = tail(request, "/dashboard/projects/")
    if len(parts) not in (1, 2) or (len(parts) == 2 and parts[1] not in PROJECT_TABS):
        raise not_found("There is no dashboard page at this address.")
    name = visible_project(viewer, parts[0])
    summary = projects_q.project(db, name)
    if summary is None:
        raise not_found(f"There is no project {name!r} on this server.")
    tab = parts[1] if len(parts) == 2 else "observations"
    if tab == "graph":
        rows: Any = dgraph.project_graph(db, name)
    else:
        rows = projects_q.project_rows(db, name, tab)
    return render(
        request,
        "project.html",
        {
            "viewer": viewer,
            "nav": "projects",
            "title": name,
            "project": summary,
            "tab": tab,
            "rows": rows,
            "kind_colors": dgraph.KIND_COLORS,
        },
        fragment=f"partials/project_{tab}.html",
    )


ROUTES = [
    projects_page,
    projects_list,
    project_page,
]
