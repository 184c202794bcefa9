"""The dashboard's admin pages (reference §7.3, admins only — a member gets 403): server health,
project sync controls (pause with a reason, resume), the sync audit log with filters, and
managed users with their tokens (a new token is shown once, on the page that answers its
creation) and project grants.

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
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template
from sqlalchemy import Connection, text

from engram.errors import EngramError
from engram_cloud import controls, principals
from engram_cloud.auth import normalize_project_name
from engram_cloud.dashboard import queries as dq
from engram_cloud.dashboard.auth import Viewer
from engram_cloud.dashboard.machines import liveness_of
from engram_cloud.dashboard.pages import (
    PageError,
    filters,
    hx_redirect,
    machines_for,
    not_found,
    param,
    tail,
)
from engram_cloud.dashboard.render import is_fragment, render, with_query
from engram_cloud.migrate import schema_status
from engram_cloud.principals import Actor
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


def _page(
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
        "counts": dq.counts_for_health(db),
        "legacy_token": bool(settings.token),
        "admin_token": bool(settings.admin_token),
    }


@get("/admin", sync_to_thread=True)
def admin_home(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    rejected = dq.audit_log(db, dq.AuditFilter(outcome=controls.OUTCOME_PAUSED), dq.Paging(1, 10))
    machines = machines_for(db, admin, liveness_of(request))
    return _page(
        request,
        admin,
        "admin/home.html",
        {
            "title": "Admin",
            "health": _health(request, db),
            "controls": dq.admin_projects(db, request.app.state.settings),
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
    return _page(
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
    return _page(
        request,
        admin,
        "admin/projects.html",
        {"title": "Project sync", "controls": dq.admin_projects(db, request.app.state.settings)},
        fragment="admin/partials/projects_table.html",
    )


def _control_target(request: Request, suffix: tuple[str, ...]) -> str:
    parts = tail(request, "/dashboard/admin/projects/")
    if len(parts) != 1 + len(suffix) or tuple(parts[1:]) != suffix:
        raise not_found("There is no dashboard page at this address.")
    project = normalize_project_name(parts[0])
    if not project or len(project) > dq.MAX_NAME_CHARS:
        raise not_found("There is no dashboard page at this address.")
    return project


@get("/admin/projects/{rest:path}", sync_to_thread=True)
def admin_project_form(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    """The pause/resume form of one project (a fragment; the whole page on a plain GET)."""
    project = _control_target(request, ("sync", "form"))
    control = dict(dq.admin_projects(db, request.app.state.settings)).get(project)
    return _page(
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
    flt = dq.AuditFilter(
        contributor=contributor,
        project=project,
        outcome=outcome,
        since=parse_moment(raw_from, "from"),
        until=parse_moment(raw_to, "to", end=True),
    )
    page = dq.audit_log(db, flt, dq.parse_paging(request.query_params))
    kept = filters(
        contributor=contributor,
        project=project,
        outcome=outcome,
        pageSize=page.size,
        **{"from": raw_from, "to": raw_to},
    )
    return _page(
        request,
        admin,
        "admin/audit.html",
        {
            "title": "Sync audit log",
            "page": page,
            "filters": kept,
            "base": "/dashboard/admin/audit-log/list",
            "target": "#results",
            "outcomes": dq.audit_outcomes(db),
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


# --- users, tokens, grants -----------------------------------------------------------------------------------


def _users(
    request: Request,
    admin: Viewer,
    db: Connection,
    *,
    error: str = "",
    form: dict[str, str] | None = None,
    status_code: int = 200,
) -> Template:
    return _page(
        request,
        admin,
        "admin/users.html",
        {
            "title": "Users",
            "users": principals.list_principals(db),
            "error": error,
            "form": form or {},
        },
        fragment="admin/partials/users_table.html",
        status_code=status_code,
    )


@get("/admin/users", sync_to_thread=True)
def admin_users(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _users(request, admin, db)


@get("/admin/users/list", sync_to_thread=True)
def admin_users_list(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _users(request, admin, db)


@post("/admin/users", sync_to_thread=True, status_code=303)
def admin_create_user(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection], data: Form
) -> Response[Any]:
    try:
        with request.app.state.engine.begin() as conn:
            user = principals.create_principal(
                conn,
                Actor.of(admin.principal),
                data.get("username", ""),
                kind=data.get("kind") or "human",
                role=data.get("role") or "member",
                email=data.get("email"),
                display_name=data.get("display_name"),
            )
    except EngramError as exc:
        return _users(request, admin, db, error=str(exc), form=data, status_code=exc.status_code)
    return done(
        request, with_query(f"/dashboard/admin/users/{user['principal_id']}", done="created")
    )


def _user_page(
    request: Request,
    admin: Viewer,
    db: Connection,
    ref: str,
    *,
    error: str = "",
    new_token: str = "",
    status_code: int = 200,
) -> Template:
    try:
        user = principals.get_principal(db, ref)
    except EngramError:
        raise not_found(f"There is no user {ref!r}.") from None
    return _page(
        request,
        admin,
        "admin/user.html",
        {
            "title": user["username"],
            "user": user,
            "tokens": principals.list_tokens(db, user["principal_id"]),
            "grants": principals.list_grants(db, user["principal_id"]),
            "error": error,
            "new_token": new_token,
        },
        status_code=status_code,
    )


@get("/admin/users/{user:str}", sync_to_thread=True)
def admin_user(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
) -> Template:
    return _user_page(request, admin, db, user)


def _change_user(
    request: Request, admin: Viewer, db: Connection, user: str, action: Any, notice_code: str
) -> Response[Any]:
    try:
        with request.app.state.engine.begin() as conn:
            found = principals.get_principal(conn, user)
            action(conn, found)
    except EngramError as exc:
        if exc.status_code == 404:
            raise not_found(str(exc)) from None
        # The page is read on the request's connection, which began before the change:
        # end its snapshot so it shows the current state.
        db.rollback()
        return _user_page(request, admin, db, user, error=str(exc), status_code=exc.status_code)
    return done(
        request, with_query(f"/dashboard/admin/users/{found['principal_id']}", done=notice_code)
    )


@post("/admin/users/{user:str}/enable", sync_to_thread=True, status_code=303)
def admin_enable_user(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
) -> Response[Any]:
    actor = Actor.of(admin.principal)
    return _change_user(
        request,
        admin,
        db,
        user,
        lambda c, u: principals.set_enabled(c, actor, u["principal_id"], True),
        "enabled",
    )


@post("/admin/users/{user:str}/disable", sync_to_thread=True, status_code=303)
def admin_disable_user(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
) -> Response[Any]:
    actor = Actor.of(admin.principal)
    return _change_user(
        request,
        admin,
        db,
        user,
        lambda c, u: principals.set_enabled(c, actor, u["principal_id"], False),
        "disabled",
    )


@post("/admin/users/{user:str}/tokens", sync_to_thread=True, status_code=200)
def admin_issue_token(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
    data: Form,
) -> Template:
    """Issue a token and show it — on this answer only (it is stored hashed)."""
    name = (data.get("name") or "").strip()
    pepper = request.app.state.settings.token_pepper
    try:
        with request.app.state.engine.begin() as conn:
            raw, _ = principals.issue_token(
                conn, Actor.of(admin.principal), pepper, user, name=name
            )
    except EngramError as exc:
        if exc.status_code == 404:
            raise not_found(str(exc)) from None
        return _user_page(request, admin, db, user, error=str(exc), status_code=exc.status_code)
    db.rollback()  # see _change_user: read the state after the commit above
    return _user_page(request, admin, db, user, new_token=raw)


@post("/admin/tokens/{token_id:int}/revoke", sync_to_thread=True, status_code=303)
def admin_revoke_token(
    request: Request, token_id: FromPath[int], admin: NamedDependency[Viewer], data: Form
) -> Response[Any]:
    reason = (data.get("reason") or "").strip()
    if len(reason) > MAX_REASON_CHARS:
        raise PageError(
            400, "Bad request", f"the reason is longer than {MAX_REASON_CHARS} characters"
        )
    try:
        with request.app.state.engine.begin() as conn:
            meta = principals.revoke_token(conn, Actor.of(admin.principal), token_id, reason=reason)
    except EngramError as exc:
        raise not_found(str(exc)) from None
    return done(
        request, with_query(f"/dashboard/admin/users/{meta['principal_id']}", done="revoked")
    )


@post("/admin/users/{user:str}/grants", sync_to_thread=True, status_code=303)
def admin_grant(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
    data: Form,
) -> Response[Any]:
    actor = Actor.of(admin.principal)
    project = data.get("project") or ""
    return _change_user(
        request,
        admin,
        db,
        user,
        lambda c, u: principals.grant(c, actor, u["principal_id"], project),
        "granted",
    )


@post("/admin/users/{user:str}/grants/{rest:path}", sync_to_thread=True, status_code=303)
def admin_revoke_grant(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
) -> Response[Any]:
    parts = tail(request, f"/dashboard/admin/users/{user}/grants/")
    if len(parts) != 2 or parts[1] != "revoke":
        raise not_found("There is no dashboard page at this address.")
    actor = Actor.of(admin.principal)
    return _change_user(
        request,
        admin,
        db,
        user,
        lambda c, u: principals.revoke_grant(c, actor, u["principal_id"], parts[0]),
        "ungranted",
    )


ADMIN_ROUTES = [
    admin_home,
    admin_health,
    admin_projects,
    admin_project_form,
    admin_project_sync,
    admin_audit,
    admin_audit_list,
    admin_users,
    admin_users_list,
    admin_create_user,
    admin_user,
    admin_enable_user,
    admin_disable_user,
    admin_issue_token,
    admin_revoke_token,
    admin_grant,
    admin_revoke_grant,
]
