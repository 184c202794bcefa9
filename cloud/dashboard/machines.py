"""The machines page: client machines from their heartbeats (:mod:`engram_cloud.api.workers`),
online or not; admins see all, members those that sync a project they can see."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.di import NamedDependency
from litestar.response import Template
from sqlalchemy import Connection

from engram_cloud.api import workers
from engram_cloud.dashboard.auth import Viewer
from engram_cloud.dashboard.render import render

ONLINE_SECONDS = workers.DEFAULT_STALE_MINUTES * 60


def machines_for(db: Connection, viewer: Viewer) -> list[dict[str, Any]]:
    """Client machines from their heartbeats: admins see all, members those that sync a
    project they can see (and only those projects)."""
    found = []
    for machine in workers.list_workers(db):
        projects = [p for p in machine["projects"] if viewer.scope.allows(p)]
        if not viewer.is_admin and not projects:
            continue
        online = machine["status"] == "online" and machine["seconds_since_seen"] < ONLINE_SECONDS
        found.append(
            {
                **machine,
                "projects": machine["projects"] if viewer.is_admin else projects,
                "online": online,
            }
        )
    found.sort(key=lambda m: (not m["online"], m["hostname"], m["origin"]))
    return found


@get("/machines", sync_to_thread=True)
def machines_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    found = machines_for(db, viewer)
    return render(
        request,
        "machines.html",
        {
            "viewer": viewer,
            "nav": "machines",
            "title": "Machines",
            "machines": found,
            "online_minutes": ONLINE_SECONDS // 60,
        },
    )


ROUTES = [
    machines_page,
]
