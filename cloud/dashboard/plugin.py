"""The team dashboard's assembly: :class:`DashboardPlugin` adds the server-rendered pages under
``/dashboard`` (htmx fragments, docs/dashboard.md) to the cloud server's own litestar app.

It mounts one router with every page family (:mod:`.login`, :mod:`.overview`, :mod:`.memories`,
:mod:`.projects`, :mod:`.people`, :mod:`.machines`, :mod:`.admin`, :mod:`.admin_users`) and the
static files, the Jinja template engine, HTML error pages for dashboard URLs (:mod:`.errors`),
and ``GET /`` → ``/dashboard/``. The router carries its own CSRF middleware (litestar's
double-submit cookie, secret derived from ``ENGRAM_JWT_SECRET``) so the bearer-token sync API is
untouched, and a middleware that sets the security headers (a strict Content-Security-Policy: no
inline script or style anywhere) and ``Server-Timing``.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

from litestar import Request, Response, Router, get
from litestar.config.app import AppConfig
from litestar.config.csrf import CSRFConfig
from litestar.datastructures import CacheControlHeader, MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException
from litestar.middleware.base import ASGIMiddleware
from litestar.middleware.csrf import CSRFMiddleware
from litestar.plugins import InitPlugin
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from engram_cloud.dashboard import (
    admin,
    admin_users,
    login,
    machines,
    memories,
    overview,
    people,
    projects,
)
from engram_cloud.dashboard.auth import COOKIE_PATH, HOME
from engram_cloud.dashboard.common import DEPENDENCIES
from engram_cloud.dashboard.errors import EXCEPTION_HANDLERS, MAX_FORM_BYTES, http_error_page
from engram_cloud.dashboard.render import STATIC_DIR, display_zone, environment
from engram_cloud.settings import Settings

CSRF_COOKIE = "engram_dashboard_csrf"
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
PAGE_FAMILIES = (login, overview, memories, projects, people, machines, admin, admin_users)


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


@get("/", include_in_schema=False, sync_to_thread=False)
def root() -> Redirect:
    return Redirect(HOME, status_code=302)


def _html_for_dashboard(original: Any) -> Any:
    """Wrap an app-level handler (404, 405): dashboard URLs get an HTML page, others the
    original JSON answer."""

    def handler(request: Request, exc: HTTPException) -> Response[Any]:
        if request.url.path == COOKIE_PATH or request.url.path.startswith(COOKIE_PATH + "/"):
            page = http_error_page(request, exc)
            page.headers.update(SECURITY_HEADERS)
            return page
        return original(request, exc)

    return handler


class DashboardPlugin(InitPlugin):
    """Adds the dashboard to the cloud server's app (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        static = create_static_files_router(
            path="/static",
            directories=[STATIC_DIR],
            name="dashboard-static",
            cache_control=CacheControlHeader(max_age=86400),
            include_in_schema=False,
        )
        pages = [route for family in PAGE_FAMILIES for route in family.ROUTES]
        router = Router(
            path=COOKIE_PATH,
            route_handlers=[*pages, static],
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
