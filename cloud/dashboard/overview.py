"""The overview pages: home (the viewer's projects and the newest memories), stats (totals and
charts) and activity (the newest memories, filtered or searched)."""

from __future__ import annotations

from litestar import Request, get
from litestar.di import NamedDependency
from litestar.response import Template
from sqlalchemy import Connection

from engram_cloud.dashboard.auth import Viewer
from engram_cloud.dashboard.common import project_param
from engram_cloud.dashboard.machines import liveness_of, machines_for
from engram_cloud.dashboard.queries import common as common_q
from engram_cloud.dashboard.queries import memories as memories_q
from engram_cloud.dashboard.queries import overview as overview_q
from engram_cloud.dashboard.queries import projects as projects_q
from engram_cloud.dashboard.render import render


@get("/", sync_to_thread=True)
def home(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    names = projects_q.project_names(db, viewer.scope)
    recent = memories_q.recent_observations(
        db, viewer.scope, memories_q.ObservationFilter(), limit=8
    )
    return render(
        request,
        "home.html",
        {"viewer": viewer, "nav": "home", "title": "Home", "projects": names, "recent": recent},
    )


@get("/stats", sync_to_thread=True)
def stats_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    from engram_cloud.dashboard.charts import stats_charts

    figures = overview_q.stats(db, viewer.scope)
    machines = machines_for(db, viewer, liveness_of(request))
    online = sum(1 for m in machines if m["online"])
    charts = stats_charts(db, viewer.scope, machines)
    return render(
        request,
        "stats.html",
        {
            "viewer": viewer,
            "nav": "stats",
            "title": "Stats",
            "stats": figures,
            "online": online,
            "machines": len(machines),
            "charts": charts,
        },
    )


@get("/activity", sync_to_thread=True)
def activity(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    project = project_param(request, viewer)
    q = common_q.clean_query(request.query_params.get("q"))
    rows = memories_q.recent_observations(
        db, viewer.scope, memories_q.ObservationFilter(project=project, q=q)
    )
    return render(
        request,
        "activity.html",
        {
            "viewer": viewer,
            "nav": "activity",
            "title": "Activity",
            "rows": rows,
            "project": project,
            "q": q,
            "projects": common_q.visible_projects(db, viewer.scope),
        },
        fragment="partials/activity_rows.html",
    )


ROUTES = [
    home,
    stats_page,
    activity,
]
