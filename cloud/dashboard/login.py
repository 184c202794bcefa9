"""Logging in and out of the dashboard: the login form (a token exchanged for a session cookie,
rate-limited per address: :mod:`engram_cloud.dashboard.auth`), logout, and the dashboard's
health answer."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template
from sqlalchemy import Connection

from engram_cloud.auth import authenticate
from engram_cloud.dashboard.auth import (
    COOKIE_NAME,
    COOKIE_PATH,
    HOME,
    LOGIN,
    SESSION_SECONDS,
    begin_attempt,
    is_secure,
    mint_session,
    resolve_session,
    safe_next,
    succeed,
)
from engram_cloud.dashboard.errors import MAX_FORM_BYTES
from engram_cloud.dashboard.render import render
from engram_cloud.errors import ApiError
from engram_cloud.settings import Settings

MAX_TOKEN_CHARS = 512


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


ROUTES = [
    dashboard_health,
    login_form,
    login,
    logout,
]
