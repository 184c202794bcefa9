"""The dashboard's error pages: the exceptions pages raise (:class:`LoginRequired`,
:class:`PageError`) and one handler per kind of failure, so every error a dashboard URL meets is
an HTML page that says what happened (a 503 with ``Retry-After`` when the database is away, a 500
that keeps internals in the log)."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, PermissionDeniedException
from litestar.response import Redirect, Template
from sqlalchemy.exc import DataError, InterfaceError, OperationalError

from engram.errors import EngramError
from engram_cloud.dashboard.auth import COOKIE_NAME, COOKIE_PATH, login_url
from engram_cloud.dashboard.queries import common as common_q
from engram_cloud.dashboard.render import hx_redirect, is_fragment, render
from engram_cloud.errors import ApiError

log = logging.getLogger("engram_cloud.dashboard")

MAX_FORM_BYTES = 16 * 1024
CSRF_FAILED = "CSRF token verification failed"


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


def _login_required(request: Request, exc: LoginRequired) -> Response[Any]:
    target = login_url(exc.target)
    response = hx_redirect(target) if is_fragment(request) else Redirect(target, status_code=303)
    if exc.clear_cookie:
        response.delete_cookie(COOKIE_NAME, path=COOKIE_PATH)
    return response


def _page_error(request: Request, exc: PageError) -> Template:
    return error_page(request, exc.status_code, exc.title, exc.message)


def _query_error(request: Request, exc: common_q.QueryError) -> Template:
    return error_page(request, 400, "Bad request", str(exc))


def _engram_error(request: Request, exc: EngramError) -> Template:
    titles = {400: "Bad request", 404: "Not found", 409: "Conflict"}
    return error_page(request, exc.status_code, titles.get(exc.status_code, "Error"), str(exc))


def _api_error(request: Request, exc: ApiError) -> Template:
    return error_page(request, exc.status_code, "Error", exc.message)


def http_error_page(request: Request, exc: HTTPException) -> Template:
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
    common_q.QueryError: _query_error,
    EngramError: _engram_error,
    ApiError: _api_error,
    HTTPException: http_error_page,
    DataError: _data_error,
    OperationalError: _database_error,
    InterfaceError: _database_error,
    Exception: _internal_error,
}
