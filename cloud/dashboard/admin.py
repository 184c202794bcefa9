"""The dashboard's admin pages (admins only — a member gets 403; docs/dashboard.md): server
health, project sync controls (pause with a reason, resume) and the sync audit log with filters;
managed users are :mod:`engram_cloud.dashboard.admin_users`. The form helpers here serve both.

Changes go through the same functions as the admin JSON API and the CLI
(:mod:`engram_cloud.controls`, :mod:`engram_cloud.principals`), so they are validated and
audited the same way. Every form is a plain POST carrying the CSRF token; the answer is a 303
to the page that shows the result (``HX-Redirect`` for htmx), or the form's page again with the
error when the input was refused, keeping what was typed.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template
from sqlalchemy import Connection, text

from engram_cloud import controls
from engram_cloud.auth import normalize_project_name
from engram_cloud.dashboard.auth import Viewer
from engram_cloud.dashboard.common import filters, param, tail
from engram_cloud.dashboard.errors import PageError, not_found
from engram_cloud.dashboard.machines import liveness_of, machines_for
from engram_cloud.dashboard.queries import admin as admin_q
from engram_cloud.dashboard.queries import common as common_q
from engram_cloud.dashboard.render import hx_redirect, is_fragment, render, with_query
from engram_cloud.migrate import schema_status
from engram_cloud.settings import Settings

Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]
MAX_REASON_CHARS = 500
NOTICES = {
    "paused": "Sync paused: pushes to this project are now refused (and logged below).",
    "resumed": "Sync resumed: pushes to this project are accepted again.",
    "created": "User created. Issue a token so they can log in.",
    "enabled": "User enabled.",
    "disabled": "User disabled: their tokens stop working at once.",
    "revoked": "Token revoked: it stops working at once.",
    "granted": "Project granted.",
    "ungranted": "Grant removed.",
}


def done(request: Request, url: str) -> Response[Any]:
    """Where a successful form sends the browser."""
    if is_fragment(request):
        return hx_redirect(url)
    return Redirect(url, status_code=303)


def notice(request: Request) -> str:
    return NOTICES.get(request.query_params.get("done") or "", "")


def admin_page(
    request: Request, viewer: Viewer, template: str, context: dict[str, Any], **kw: Any
) -> Template:
    return render(
        request,
        template,
        {"viewer": viewer, "nav": "admin", "notice": notice(request), "error": "", **context},
        **kw,
    )


# --- overview and health ---------------------------------------------------------------------------------


def _health(request: Request, db: Connection) -> dict[str, Any]:
    settings: Settings = request.app.state.settings
    started = time.perf_counter()
    db.execute(text("SELECT 1"))
    latency = (time.perf_counter() - started) * 1000
    status = schema_status(request.app.state.engine)
    return {
        "db_ms": latency,
        "schema": status.describe(),
        "schema_ok": status.up_to_date,
        "mode": settings.mode,
        "allowlist": "*"
        if settings.allows_every_project
        else ", ".join(sorted(settings.allowed_projects)),
        "counts": admin_q.counts_for_health(db),
        "legacy_token": bool(settings.token),
        "admin_token": bool(settings.admin_token),
    }


@get("/admin", sync_to_thread=True)
def admin_home(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    rejected = admin_q.audit_log(
        db, admin_q.AuditFilter(outcome=controls.OUTCOME_PAUSED), common_q.Paging(1, 10)
    )
    machines = machines_for(db, admin, liveness_of(request))
    return admin_page(
        request,
        admin,
        "admin/home.html",
        {
            "title": "Admin",
            "health": _health(request, db),
            "controls": admin_q.admin_projects(db, request.app.state.settings),
            "rejected": rejected.rows,
            "machines_online": sum(1 for m in machines if m["online"]),
            "machines": len(machines),
        },
    )


@get("/admin/health", sync_to_thread=True)
def admin_health(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    liveness = liveness_of(request)
    machines = machines_for(db, admin, liveness)
    return admin_page(
        request,
        admin,
        "admin/health.html",
        {
            "title": "Health",
            "health": _health(request, db),
            "machines": machines,
            "unhealthy_minutes": max(1, liveness.unhealthy_after // 60),
            "offline_minutes": max(1, liveness.offline_after // 60),
        },
    )


# --- project controls --------------------------------------------------------------------------------------


@get("/admin/projects", sync_to_thread=True)
def admin_projects(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return admin_page(
        request,
        admin,
        "admin/projects.html",
        {
            "title": "Project sync",
            "controls": admin_q.admin_projects(db, request.app.state.settings),
        },
        fragment="admin/partials/projects_table.html",
    )


def _control_target(request: Request, suffix: tuple[str, ...]) -> str:
    parts = tail(request, "/dashboard/admin/projects/")
    if len(parts) != 1 + len(suffix) or tuple(parts[1:]) != suffix:
        raise not_found("There is no dashboard page at this address.")
    project = normalize_project_name(parts[0])
    if not project or len(project) > common_q.MAX_NAME_CHARS:
        raise not_found("There is no dashboard page at this address.")
    return project


@get("/admin/projects/{rest:path}", sync_to_thread=True)
def admin_project_form(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    """The pause/resume form of one project (a fragment; the whole page on a plain GET)."""
    project = _control_target(request, ("sync", "form"))
    control = dict(admin_q.admin_projects(db, request.app.state.settings)).get(project)
    return admin_page(
        request,
        admin,
        "admin/project_form.html",
        {"title": f"Sync of {project}", "name": project, "control": control},
        fragment="admin/partials/project_form.html",
    )


@post("/admin/projects/{rest:path}", sync_to_thread=True, status_code=303)
def admin_project_sync(
    request: Request, admin: NamedDependency[Viewer], data: Form
) -> Response[Any]:
    project = _control_target(request, ("sync",))
    enabled = (data.get("enabled") or "").strip().lower()
    if enabled not in ("true", "false"):
        raise PageError(400, "Bad request", "enabled must be true or false")
    reason = (data.get("reason") or "").strip()
    if len(reason) > MAX_REASON_CHARS:
        raise PageError(
            400, "Bad request", f"the reason is longer than {MAX_REASON_CHARS} characters"
        )
    with request.app.state.engine.begin() as conn:
        controls.set_sync_enabled(
            conn,
            project,
            enabled == "true",
            reason=reason or None,
            updated_by=admin.principal.label,
        )
    return done(
        request,
        with_query("/dashboard/admin/projects", done="resumed" if enabled == "true" else "paused"),
    )


# --- audit log ------------------------------------------------------------------------------------------------


def parse_moment(raw: str, name: str, *, end: bool = False) -> datetime | None:
    """RFC 3339, or ``YYYY-MM-DD`` (a whole day: its start for ``from``, the next day's start,
    exclusive, for ``to``); anything else is a 400."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        if len(raw) == 10:
            day = datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
            return day + timedelta(days=1) if end else day
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise PageError(
            400,
            "Bad request",
            f"invalid_time_format: {name} must be an RFC 3339 time or a YYYY-MM-DD date, got {raw[:40]!r}",
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _audit(request: Request, admin: Viewer, db: Connection) -> Template:
    contributor = param(request, "contributor")
    project = normalize_project_name(param(request, "project"))
    outcome = param(request, "outcome")
    raw_from, raw_to = param(request, "from"), param(request, "to")
    flt = admin_q.AuditFilter(
        contributor=contributor,
        project=project,
        outcome=outcome,
        since=parse_moment(raw_from, "from"),
        until=parse_moment(raw_to, "to", end=True),
    )
    page = admin_q.audit_log(db, flt, common_q.parse_paging(request.query_params))
    kept = filters(
        contributor=contributor,
        project=project,
        outcome=outcome,
        pageSize=page.size,
        **{"from": raw_from, "to": raw_to},
    )
    return admin_page(
        request,
        admin,
        "admin/audit.html",
        {
            "title": "Sync audit log",
            "page": page,
            "filters": kept,
            "base": "/dashboard/admin/audit-log/list",
            "target": "#results",
            "outcomes": admin_q.audit_outcomes(db),
            "f": {
                "contributor": contributor,
                "project": project,
                "outcome": outcome,
                "from": raw_from,
                "to": raw_to,
            },
        },
        fragment="admin/partials/audit_rows.html",
    )


@get("/admin/audit-log", sync_to_thread=True)
def admin_audit(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _audit(request, admin, db)


@get("/admin/audit-log/list", sync_to_thread=True)
def admin_audit_list(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _audit(request, admin, db)


ROUTES = [
    admin_home,
    admin_health,
    admin_projects,
    admin_project_form,
    admin_project_sync,
    admin_audit,
    admin_audit_list,
]
