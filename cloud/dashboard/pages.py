"""The team dashboard (reference §7): server-rendered pages under ``/dashboard`` with htmx
fragments, on the cloud server's own litestar app.

:class:`DashboardPlugin` adds everything to an app (``create_app`` passes it in ``plugins``):
the ``/dashboard`` router (pages, login, the admin pages of :mod:`engram_cloud.dashboard.admin`,
static files), the Jinja template engine, HTML error pages for dashboard URLs, and ``GET /`` →
``/dashboard/``. The router carries its own CSRF middleware (litestar's double-submit cookie,
secret derived from ``ENGRAM_JWT_SECRET``) so the bearer-token sync API is untouched, and a
middleware that sets the security headers (a strict Content-Security-Policy: no inline script
or style anywhere) and ``Server-Timing``.

Pages read the read model through :mod:`engram_cloud.dashboard.queries`, always within the
viewer's projects (:mod:`engram_cloud.dashboard.auth`). Names and ids travel in the path
percent-encoded, so routes with free-form names take the rest of the path and split it
themselves (a project called ``org/repo`` still has a page).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import unquote

import anyio
from litestar import Request, Response, Router, get, post
from litestar.config.app import AppConfig
from litestar.config.csrf import CSRFConfig
from litestar.datastructures import CacheControlHeader, Cookie, MutableScopeHeaders
from litestar.di import NamedDependency, Provide
from litestar.enums import RequestEncodingType, ScopeType
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    PermissionDeniedException,
)
from litestar.middleware.base import ASGIMiddleware
from litestar.middleware.csrf import CSRFMiddleware
from litestar.params import Body
from litestar.plugins import InitPlugin
from litestar.plugins.htmx import ClientRedirect
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from sqlalchemy import Connection
from sqlalchemy.exc import DataError, InterfaceError, OperationalError

from engram.errors import EngramError
from engram_cloud.auth import INSECURE_PRINCIPAL, authenticate, normalize_project_name
from engram_cloud.dashboard import queries as dq
from engram_cloud.dashboard.auth import (
    COOKIE_NAME,
    COOKIE_PATH,
    HOME,
    LOGIN,
    SESSION_SECONDS,
    Viewer,
    begin_attempt,
    is_secure,
    login_url,
    mint_session,
    resolve_session,
    safe_next,
    succeed,
    viewer_for,
)
from engram_cloud.dashboard.machines import liveness_of, machines_for, machines_page
from engram_cloud.dashboard.render import (
    STATIC_DIR,
    display_zone,
    environment,
    is_fragment,
    render,
)
from engram_cloud.errors import ApiError
from engram_cloud.settings import Settings

log = logging.getLogger("engram_cloud.dashboard.pages")

MAX_FORM_BYTES = 16 * 1024
MAX_TOKEN_CHARS = 512
CSRF_COOKIE = "engram_dashboard_csrf"
CSRF_FAILED = "CSRF token verification failed"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


# --- errors ----------------------------------------------------------------------------------------


class LoginRequired(Exception):
    """No valid session: go to the login page (and come back to ``target`` afterwards)."""

    def __init__(self, target: str, *, clear_cookie: bool) -> None:
        super().__init__("login required")
        self.target = target
        self.clear_cookie = clear_cookie


class PageError(Exception):
    """An error page: status, a short title and a sentence saying what happened."""

    def __init__(self, status_code: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.title = title
        self.message = message


def not_found(what: str) -> PageError:
    return PageError(404, "Not found", what)


def forbidden(message: str) -> PageError:
    return PageError(403, "Forbidden", message)


def error_page(
    request: Request,
    status_code: int,
    title: str,
    message: str,
    headers: dict[str, str] | None = None,
) -> Template:
    viewer = request.scope.get("state", {}).get("dashboard_viewer")
    return render(
        request,
        "error.html",
        {
            "viewer": viewer,
            "status": status_code,
            "heading": title,
            "message": message,
            "title": title,
        },
        fragment="partials/error.html",
        status_code=status_code,
        headers=headers,
    )


def hx_redirect(url: str) -> Response[Any]:
    """``HX-Redirect``: htmx navigates the whole page there (a 303 would be followed by the
    browser's fetch and its target swapped into the fragment)."""
    response = ClientRedirect(redirect_to=url)
    response.status_code = 200  # else the route's declared status (a 303) applies
    return response


def _login_required(request: Request, exc: LoginRequired) -> Response[Any]:
    target = login_url(exc.target)
    response = hx_redirect(target) if is_fragment(request) else Redirect(target, status_code=303)
    if exc.clear_cookie:
        response.delete_cookie(COOKIE_NAME, path=COOKIE_PATH)
    return response


def _page_error(request: Request, exc: PageError) -> Template:
    return error_page(request, exc.status_code, exc.title, exc.message)


def _query_error(request: Request, exc: dq.QueryError) -> Template:
    return error_page(request, 400, "Bad request", str(exc))


def _engram_error(request: Request, exc: EngramError) -> Template:
    titles = {400: "Bad request", 404: "Not found", 409: "Conflict"}
    return error_page(request, exc.status_code, titles.get(exc.status_code, "Error"), str(exc))


def _api_error(request: Request, exc: ApiError) -> Template:
    return error_page(request, exc.status_code, "Error", exc.message)


def _http_error(request: Request, exc: HTTPException) -> Template:
    status = exc.status_code
    if isinstance(exc, PermissionDeniedException) and exc.detail == CSRF_FAILED:
        return error_page(
            request,
            403,
            "Form expired",
            "This form was not sent by this dashboard page, or it expired (CSRF check failed). "
            "Reload the page and try again.",
        )
    messages = {
        404: "There is no dashboard page at this address.",
        405: f"{request.method} is not allowed here.",
        413: f"The form is too large (at most {MAX_FORM_BYTES // 1024} KiB).",
        429: "Too many requests; wait a little and try again.",
    }
    return error_page(
        request,
        status,
        {404: "Not found", 405: "Method not allowed", 413: "Too large"}.get(status, "Error"),
        messages.get(status, str(exc.detail)),
        headers=dict(exc.headers or {}),
    )


def _database_error(request: Request, exc: Exception) -> Template:
    log.warning("dashboard: database unavailable on %s: %s", request.url.path, exc)
    return error_page(
        request,
        503,
        "Database unavailable",
        "The server cannot reach its database right now. Try again in a moment.",
        headers={"Retry-After": "5"},
    )


def _data_error(request: Request, exc: DataError) -> Template:
    """The database refused a value of this request (see ``engram_cloud.errors._bad_data``)."""
    log.warning("dashboard: database refused a value on %s: %s", request.url.path, exc.orig)
    return error_page(request, 400, "Bad request", "A value in this address cannot be used.")


def _internal_error(request: Request, exc: Exception) -> Template:
    log.exception("dashboard: unhandled error on %s", request.url.path, exc_info=exc)
    return error_page(
        request,
        500,
        "Something went wrong",
        "The server hit an unexpected error showing this page; it has been logged.",
    )


EXCEPTION_HANDLERS: dict[Any, Any] = {
    LoginRequired: _login_required,
    PageError: _page_error,
    dq.QueryError: _query_error,
    EngramError: _engram_error,
    ApiError: _api_error,
    HTTPException: _http_error,
    DataError: _data_error,
    OperationalError: _database_error,
    InterfaceError: _database_error,
    Exception: _internal_error,
}


# --- middleware --------------------------------------------------------------------------------------


class PageHeadersMiddleware(ASGIMiddleware):
    """Security headers on every dashboard response, and ``Server-Timing`` (the time from
    routing to the first byte: queries and template rendering, for the benchmark)."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableScopeHeaders.from_message(message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.2f}"
            await send(message)

        await next_app(scope, receive, send_with_headers)


def csrf_config(settings: Settings) -> CSRFConfig:
    """Double-submit cookie, HMAC-signed with a key derived from the JWT secret (a fixed
    development key in insecure mode, where nothing is secret anyway)."""
    base = (settings.jwt_secret or "engram-cloud-insecure-development").encode()
    secret = hmac.new(base, b"engram-dashboard-csrf", hashlib.sha256).hexdigest()
    return CSRFConfig(
        secret=secret,
        cookie_name=CSRF_COOKIE,
        cookie_path=COOKIE_PATH,
        cookie_httponly=True,
        cookie_samesite="lax",
        header_name="x-csrftoken",
    )


# --- dependencies ------------------------------------------------------------------------------------


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
    return dq.clean_name(request.query_params.get(name), name)


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
    if kept.get("pageSize") == dq.DEFAULT_PAGE_SIZE:
        kept.pop("pageSize")
    return kept


# --- public routes ---------------------------------------------------------------------------------------


@get("/", include_in_schema=False, sync_to_thread=False)
def root() -> Redirect:
    return Redirect(HOME, status_code=302)


@get("/health", sync_to_thread=False)
def dashboard_health() -> dict[str, str]:
    return {"status": "ok", "subsystem": "dashboard"}


def _login_page(
    request: Request,
    *,
    next_target: str,
    error: str = "",
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> Template:
    return render(
        request,
        "login.html",
        {"title": "Log in", "next": next_target, "error": error},
        status_code=status_code,
        headers=headers,
    )


@get("/login", sync_to_thread=True)
def login_form(request: Request, db: NamedDependency[Connection]) -> Response[Any]:
    settings: Settings = request.app.state.settings
    target = safe_next(request.query_params.get("next"))
    if settings.insecure:
        return Redirect(HOME, status_code=303)
    cookie = request.cookies.get(COOKIE_NAME)
    if cookie and resolve_session(db, settings, cookie) is not None:
        return Redirect(target, status_code=303)
    return _login_page(request, next_target=target)


LoginForm = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


@post("/login", sync_to_thread=True, request_max_body_size=MAX_FORM_BYTES, status_code=200)
def login(request: Request, data: LoginForm) -> Response[Any]:
    """Exchange a token for a session cookie (rate-limited; see :mod:`dashboard_auth`)."""
    settings: Settings = request.app.state.settings
    if settings.insecure:
        return Redirect(HOME, status_code=303)
    target = safe_next(data.get("next"))
    token = (data.get("token") or "").strip()
    if not token:
        return _login_page(request, next_target=target, error="token is required", status_code=400)
    engine = request.app.state.engine
    address = request.client.host if request.client else "unknown"
    secret = settings.jwt_secret or ""
    with engine.begin() as conn:
        attempt = begin_attempt(conn, secret, address, token)
    if attempt.blocked:
        minutes = max(1, round(attempt.retry_after / 60))
        return _login_page(
            request,
            next_target=target,
            error=f"Too many failed logins from this address. Try again in about {minutes} min.",
            status_code=429,
            headers={"Retry-After": str(attempt.retry_after)},
        )
    principal = None
    if len(token) <= MAX_TOKEN_CHARS and not any(ch.isspace() for ch in token):
        with engine.begin() as conn:
            try:
                principal = authenticate(conn, settings, f"Bearer {token}")
            except ApiError:
                principal = None
            if principal is not None:
                succeed(conn, attempt)
    if principal is None:
        return _login_page(request, next_target=target, error="invalid token", status_code=401)
    response: Response[Any] = Redirect(target, status_code=303)
    response.set_cookie(
        Cookie(
            key=COOKIE_NAME,
            value=mint_session(secret, principal, token),
            path=COOKIE_PATH,
            max_age=SESSION_SECONDS,
            httponly=True,
            samesite="lax",
            secure=is_secure(request.url.scheme, request.headers.get("x-forwarded-proto")),
        )
    )
    return response


@post("/logout", sync_to_thread=False, status_code=303)
def logout() -> Redirect:
    response = Redirect(LOGIN, status_code=303)
    response.delete_cookie(COOKIE_NAME, path=COOKIE_PATH)
    return response


# --- pages -----------------------------------------------------------------------------------------------


@get("/", sync_to_thread=True)
def home(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    names = dq.project_names(db, viewer.scope)
    recent = dq.recent_observations(db, viewer.scope, dq.ObservationFilter(), limit=8)
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

    figures = dq.stats(db, viewer.scope)
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
    q = dq.clean_query(request.query_params.get("q"))
    rows = dq.recent_observations(db, viewer.scope, dq.ObservationFilter(project=project, q=q))
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
            "projects": dq.visible_projects(db, viewer.scope),
        },
        fragment="partials/activity_rows.html",
    )


def _browser(
    request: Request, viewer: Viewer, db: Connection, tab: str, *, q_override: str | None = None
) -> Template:
    project = project_param(request, viewer)
    q = dq.clean_query(q_override if q_override is not None else request.query_params.get("q"))
    kind = param(request, "type") if tab == "observations" else ""
    paging = dq.parse_paging(request.query_params)
    if tab == "observations":
        page = dq.observations(db, viewer.scope, dq.ObservationFilter(project, kind, q), paging)
    elif tab == "sessions":
        page = dq.sessions(db, viewer.scope, paging, project=project, q=q)
    else:
        page = dq.prompts(db, viewer.scope, paging, project=project, q=q)
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
        "page_sizes": dq.PAGE_SIZES,
    }
    if not is_fragment(request):
        context["projects"] = dq.visible_projects(db, viewer.scope)
        context["types"] = (
            dq.observation_types(
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


def _projects(request: Request, viewer: Viewer, db: Connection) -> Template:
    q = dq.clean_query(request.query_params.get("q"))
    paging = dq.parse_paging(request.query_params)
    page = dq.projects(db, viewer.scope, paging, q=q)
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


PROJECT_TABS = ("observations", "sessions", "prompts")


@get("/projects/{rest:path}", sync_to_thread=True)
def project_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    parts = tail(request, "/dashboard/projects/")
    if len(parts) not in (1, 2) or (len(parts) == 2 and parts[1] not in PROJECT_TABS):
        raise not_found("There is no dashboard page at this address.")
    name = visible_project(viewer, parts[0])
    summary = dq.project(db, name)
    if summary is None:
        raise not_found(f"There is no project {name!r} on this server.")
    tab = parts[1] if len(parts) == 2 else "observations"
    rows = dq.project_rows(db, name, tab)
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
        },
        fragment=f"partials/project_{tab}.html",
    )


def _contributors(request: Request, viewer: Viewer, db: Connection) -> Template:
    q = dq.clean_query(request.query_params.get("q"))
    paging = dq.parse_paging(request.query_params)
    page = dq.contributors(db, viewer.scope, paging, q=q)
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
    name = dq.clean_name(parts[0], "contributor")
    found = dq.contributor(db, viewer.scope, name)
    if found is None:
        raise not_found(f"Nobody called {name!r} contributed to the projects you can see.")
    return render(
        request,
        "contributor.html",
        {"viewer": viewer, "nav": "contributors", "title": name, "name": name, **found},
    )


@get("/sessions/{rest:path}", sync_to_thread=True)
def session_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    parts = tail(request, "/dashboard/sessions/")
    if len(parts) != 2 or len(parts[1]) > 128:
        raise not_found("There is no dashboard page at this address.")
    project = visible_project(viewer, parts[0])
    found = dq.session(db, project, parts[1])
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
            "observations": dq.session_observations(db, project, found.id),
            "prompts": dq.session_prompts(db, project, found.id),
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
    found = dq.observation(db, project, session_id, sync_id)
    if found is None:
        raise not_found(
            f"There is no observation {sync_id!r} in session {session_id!r} of project {project!r}."
        )
    return render(
        request,
        "observation.html",
        {
            "viewer": viewer,
            "nav": "browser",
            "title": found.title,
            "obs": found,
            "related": dq.related_observations(db, found),
            "history": dq.observation_history(db, found),
            "standing": dq.standing(db, found),
        },
    )


@get("/prompts/{rest:path}", sync_to_thread=True)
def prompt_page(
    request: Request, viewer: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    project, session_id, sync_id = _entity_parts(request, "/dashboard/prompts/", viewer)
    found = dq.prompt(db, project, session_id, sync_id)
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
            "related": dq.session_prompts(db, project, session_id, exclude=sync_id),
        },
    )


PAGE_ROUTES = [
    dashboard_health,
    login_form,
    login,
    logout,
    home,
    stats_page,
    activity,
    browser,
    browser_observations,
    browser_sessions,
    browser_session,
    browser_prompts,
    projects_page,
    projects_list,
    project_page,
    contributors_page,
    contributors_list,
    contributor_page,
    session_page,
    observation_page,
    prompt_page,
    machines_page,
]


# --- the plugin ----------------------------------------------------------------------------------------------


def _html_for_dashboard(original: Any) -> Any:
    """Wrap an app-level handler (404, 405): dashboard URLs get an HTML page, others the
    original JSON answer."""

    def handler(request: Request, exc: Exception) -> Response[Any]:
        if request.url.path == COOKIE_PATH or request.url.path.startswith(COOKIE_PATH + "/"):
            page = _http_error(request, exc)  # type: ignore[arg-type]
            page.headers.update(SECURITY_HEADERS)
            return page
        return original(request, exc)

    return handler


class DashboardPlugin(InitPlugin):
    """Adds the dashboard to the cloud server's app (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        from engram_cloud.dashboard.admin import ADMIN_ROUTES

        static = create_static_files_router(
            path="/static",
            directories=[STATIC_DIR],
            name="dashboard-static",
            cache_control=CacheControlHeader(max_age=86400),
            include_in_schema=False,
        )
        router = Router(
            path=COOKIE_PATH,
            route_handlers=[*PAGE_ROUTES, *ADMIN_ROUTES, static],
            dependencies=DEPENDENCIES,
            exception_handlers=EXCEPTION_HANDLERS,
            middleware=[
                PageHeadersMiddleware(),
                lambda app: CSRFMiddleware(app=app, config=csrf_config(self.settings)),
            ],
            include_in_schema=False,
            request_max_body_size=MAX_FORM_BYTES,
        )
        app_config.route_handlers.extend([root, router])
        app_config.template_config = TemplateConfig(
            engine=JinjaTemplateEngine.from_environment(environment())
        )
        handlers = app_config.exception_handlers
        for exc_type in (NotFoundException, MethodNotAllowedException):
            if exc_type in handlers:
                handlers[exc_type] = _html_for_dashboard(handlers[exc_type])
        app_config.state["dashboard_zone"] = display_zone()
        app_config.state["dashboard_types"] = {}
        return app_config
