"""The people pages: contributors (who pushed what, most recently active first) and one page per
contributor with their recent records in the viewer's projects."""

from __future__ import annotations

from litestar import Request, get
from litestar.di import NamedDependency
from litestar.response import Template
from sqlalchemy import Connection

from engram_cloud.dashboard.auth import Viewer
from engram_cloud.dashboard.common import (
    filters,
    not_found,
    tail,
)
from engram_cloud.dashboard.queries import common as common_q
from engram_cloud.dashboard.queries import people as people_q
from engram_cloud.dashboard.render import render


def _contributors(request: Request, viewer: Viewer, db: Connection) -> Template:
    q = common_q.clean_query(request.query_params.get("q"))
    paging = common_q.parse_paging(request.query_params)
    page = people_q.contributors(db, viewer.scope, paging, q=q)
    return render(
        request,
        "contributors.html",
        {
            "viewer": viewer,
            "nav": "contributors",
            "title": "Contributors",
            "page": page,
            "q": q,
            "filters": filters(q=q, pageSize=page.size),
            "base": "/dashboard/contributors/list",
            "target": "#results",
        },
        fragment="partials/contributors_list.html",
    )


@get("/contributors", sync_to_thread=True)
def contributors_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _contributors(request, viewer, db)


@get("/contributors/list", sync_to_thread=True)
def contributors_list(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _contributors(request, viewer, db)


@get("/contributors/{rest:path}", sync_to_thread=True)
def contributor_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    parts = tail(request, "/dashboard/contributors/")
    if len(parts) != 1:
        raise not_found("There is no dashboard page at this address.")
    name = common_q.clean_name(parts[0], "contributor")
    found = people_q.contributor(db, viewer.scope, name)
    if found is None:
        raise not_found(f"Nobody called {name!r} contributed to the projects you can see.")
    return render(
        request,
        "contributor.html",
        {"viewer": viewer, "nav": "contributors", "title": name, "name": name, **found},
    )


ROUTES = [
    contributors_page,
    contributors_list,
    contributor_page,
]
