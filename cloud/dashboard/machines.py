"""The dashboard's machines page (``/dashboard/machines``) and the machine list other pages count
(stats, admin): every machine the viewer may see, in both vocabularies — our clients' sync state
(version, projects, pending, quarantined, last push/pull) and the first seed's workers' hardware
(Tailscale and local IP, RAM, GPU) — with its status (online, unhealthy, offline). The page's
table is a live region: a heartbeat re-renders it for the viewer without a reload.

Who sees which machine, and the status thresholds, are :mod:`engram_cloud.fleet`'s.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.di import NamedDependency
from litestar.response import Template
from sqlalchemy import Connection

from engram_cloud import fleet
from engram_cloud.dashboard.auth import Viewer
from engram_cloud.dashboard.render import render
from engram_cloud.fleet import DEFAULT_LIVENESS, FleetView, Liveness

_ORDER = {status: i for i, status in enumerate(fleet.STATUSES)}


def fleet_view(viewer: Viewer) -> FleetView:
    """The viewer's view of the fleet (the same rule as the JSON API's)."""
    return FleetView(viewer.scope.projects, viewer.is_admin, fleet.owner_of(viewer.principal))


def machines_for(
    db: Connection, viewer: Viewer, liveness: Liveness = DEFAULT_LIVENESS
) -> list[dict[str, Any]]:
    """The machines ``viewer`` may see (and of each, only the projects they may see), online
    first, then unhealthy, then offline; ``online`` is set on each for the pages that count."""
    found = fleet.list_machines(db, fleet_view(viewer), liveness)
    for machine in found:
        machine["online"] = machine["status"] == "online"
    found.sort(key=lambda m: (_ORDER[m["status"]], m["hostname"], m["id"]))
    return found


def liveness_of(request: Request) -> Liveness:
    return Liveness.of(request.app.state.settings)


@get("/machines", sync_to_thread=True)
def machines_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    liveness = liveness_of(request)
    return render(
        request,
        "machines.html",
        {
            "viewer": viewer,
            "nav": "machines",
            "title": "Machines",
            "machines": machines_for(db, viewer, liveness),
            "unhealthy_minutes": max(1, liveness.unhealthy_after // 60),
            "offline_minutes": max(1, liveness.offline_after // 60),
        },
    )


ROUTES = [
    machines_page,
]
