"""What every dashboard page family shares: the request's dependencies (a read connection, the
viewer, the admin guard) and the helpers that read a page's path and query (names travel
percent-encoded in the path, so routes with free-form names take the rest of the path and split it
themselves: a project called ``org/repo`` still has a page)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import anyio
from litestar import Request
from litestar.di import NamedDependency, Provide
from sqlalchemy import Connection

from engram_cloud.auth import INSECURE_PRINCIPAL, normalize_project_name
from engram_cloud.dashboard.auth import COOKIE_NAME, Viewer, resolve_session, viewer_for
from engram_cloud.dashboard.errors import LoginRequired, forbidden, not_found
from engram_cloud.dashboard.queries import common as common_q
from engram_cloud.settings import Settings


async def provide_db(request: Request) -> AsyncIterator[Connection]:
    """One read connection per request (the viewer's check and the page's queries), opened
    and closed on a worker thread: both may wait on the network."""
    conn = await anyio.to_thread.run_sync(request.app.state.engine.connect)
    try:
        yield conn
    finally:
        await anyio.to_thread.run_sync(conn.close)


def raw_path(request: Request) -> str:
    """The path as the browser sent it (still percent-encoded), without the query (some
    servers include it in ``raw_path``)."""
    raw = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
    return raw.split("?", 1)[0]


def current_target(request: Request) -> str:
    """Where the browser is (the raw path and query), to come back after logging in."""
    raw = raw_path(request)
    query = request.scope.get("query_string", b"").decode("latin-1")
    return raw + ("?" + query if query else "")


def provide_viewer(request: Request, db: NamedDependency[Connection]) -> Viewer:
    settings: Settings = request.app.state.settings
    if settings.insecure:
        viewer = viewer_for(settings, INSECURE_PRINCIPAL)
    else:
        cookie = request.cookies.get(COOKIE_NAME)
        principal = resolve_session(db, settings, cookie) if cookie else None
        if principal is None:
            raise LoginRequired(current_target(request), clear_cookie=bool(cookie))
        viewer = viewer_for(settings, principal)
    request.scope.setdefault("state", {})["dashboard_viewer"] = viewer
    return viewer


def provide_admin_viewer(request: Request, viewer: NamedDependency[Viewer]) -> Viewer:
    if not viewer.is_admin:
        raise forbidden("This page is for admins; your account is a member.")
    return viewer


DEPENDENCIES = {
    "db": Provide(provide_db),
    "viewer": Provide(provide_viewer, sync_to_thread=True),
    "admin": Provide(provide_admin_viewer, sync_to_thread=False),
}


# --- helpers -----------------------------------------------------------------------------------------


def tail(request: Request, prefix: str) -> list[str]:
    """The percent-decoded path segments after ``prefix`` (taken from the raw path, so an
    encoded ``/`` inside a name stays inside it). Empty segments → 404."""
    raw = raw_path(request)
    rest = raw[len(prefix) :] if raw.startswith(prefix) else ""
    parts = [unquote(part) for part in rest.strip("/").split("/")] if rest.strip("/") else []
    if any(not part for part in parts):
        raise not_found("There is no dashboard page at this address.")
    return parts


def param(request: Request, name: str) -> str:
    return common_q.clean_name(request.query_params.get(name), name)


def project_param(request: Request, viewer: Viewer) -> str:
    """The ``project`` filter, normalized; 403 if the viewer may not see it."""
    raw = param(request, "project")
    project = normalize_project_name(raw) if raw else ""
    if project and not viewer.scope.allows(project):
        raise forbidden(f"You do not have access to project {project!r}.")
    return project


def visible_project(viewer: Viewer, raw: str) -> str:
    project = normalize_project_name(raw)
    if not project:
        raise not_found("No project has an empty name.")
    if not viewer.scope.allows(project):
        raise forbidden(f"You do not have access to project {project!r}.")
    return project


def filters(**values: Any) -> dict[str, Any]:
    """Query parameters worth keeping in links (empty ones and the default page size dropped)."""
    kept = {k: v for k, v in values.items() if v not in (None, "")}
    if kept.get("pageSize") == common_q.DEFAULT_PAGE_SIZE:
        kept.pop("pageSize")
    return kept
