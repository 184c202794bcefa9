"""The error envelope every JSON route answers with, and the exception handlers that produce it.

``{"error_class", "error_code", "error"}`` (docs/cloud.md, "Compression and errors") plus route-specific extra fields:
``error_class`` is ``repairable`` (fix the payload and retry), ``blocked`` (the server cannot
serve right now), ``policy`` (not allowed: 401/403/409 pause) or ``invalid_request``.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from litestar import Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    ValidationException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError

from engram.errors import ConflictError, EngramError, NotFoundError, ValidationError

log = logging.getLogger("engram_cloud")


class ApiError(Exception):
    """An error answer: status code, envelope fields and optional extra fields/headers."""

    def __init__(
        self,
        status_code: int,
        error_class: str,
        error_code: str,
        message: str,
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_class = error_class
        self.error_code = error_code
        self.message = message
        self.extra = extra or {}
        self.headers = headers or {}

    def envelope(self) -> dict[str, Any]:
        return {
            "error_class": self.error_class,
            "error_code": self.error_code,
            "error": self.message,
            **self.extra,
        }

    def response(self) -> Response[bytes]:
        return json_response(self.envelope(), self.status_code, headers=self.headers)


def json_response(
    data: Any, status_code: int = 200, *, headers: dict[str, str] | None = None
) -> Response[bytes]:
    """A JSON answer serialized with orjson."""
    return Response(
        orjson.dumps(data), status_code=status_code, media_type="application/json", headers=headers
    )


def unauthorized(reason: str) -> ApiError:
    return ApiError(
        401,
        "policy",
        "auth_required",
        f"unauthorized: {reason}",
        headers={"WWW-Authenticate": 'Bearer realm="engram-cloud"'},
    )


def forbidden(message: str = "forbidden: project is not allowed", **extra: Any) -> ApiError:
    return ApiError(403, "policy", "policy_forbidden", message, extra=extra)


def payload_too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "repairable",
        "upgrade_repairable_payload_too_large",
        f"push payload too large (max {limit} bytes)",
    )


def invalid_request(code: str, message: str, **extra: Any) -> ApiError:
    return ApiError(400, "invalid_request", code, message, extra=extra)


def _api_error(_: Request, exc: ApiError) -> Response[bytes]:
    return exc.response()


def _engram_error(_: Request, exc: EngramError) -> Response[bytes]:
    code = {NotFoundError: "not_found", ConflictError: "conflict"}.get(type(exc), "invalid_request")
    if isinstance(exc, ValidationError):
        code = "invalid_request"
    return ApiError(exc.status_code, "invalid_request", code, str(exc)).response()


def _too_large(request: Request, _: RequestEntityTooLarge) -> Response[bytes]:
    return payload_too_large(request.app.state.settings.max_push_bytes).response()


def _not_found(_: Request, exc: NotFoundException) -> Response[bytes]:
    return ApiError(404, "invalid_request", "not_found", "404 page not found").response()


def _not_allowed(request: Request, exc: MethodNotAllowedException) -> Response[bytes]:
    return ApiError(
        405,
        "invalid_request",
        "method_not_allowed",
        f"method {request.method} is not allowed on {request.url.path}",
        headers=dict(exc.headers or {}),
    ).response()


def _validation(_: Request, exc: ValidationException) -> Response[bytes]:
    details = exc.extra if isinstance(exc.extra, list) else []
    problems = "; ".join(
        f"{d.get('key', '?')}: {d.get('message', 'invalid')}"
        for d in details
        if isinstance(d, dict)
    )
    return invalid_request(
        "invalid_parameter", f"invalid request parameter: {problems or exc.detail}"
    ).response()


def _http(_: Request, exc: HTTPException) -> Response[bytes]:
    return ApiError(
        exc.status_code, "invalid_request", "http_error", str(exc.detail), headers=exc.headers
    ).response()


def _database(request: Request, exc: DBAPIError) -> Response[bytes]:
    from engram_cloud.db import describe_db_error

    log.warning(
        "database error on %s %s: %s", request.method, request.url.path, describe_db_error(exc)
    )
    return ApiError(
        503,
        "blocked",
        "database_unavailable",
        f"database unavailable, retry later ({describe_db_error(exc)})",
        headers={"Retry-After": "1"},
    ).response()


def _bad_data(request: Request, exc: DataError) -> Response[bytes]:
    """PostgreSQL refused a value (SQLSTATE class 22: NUL in text, a number out of range…).
    Input is checked before it reaches a query; this is the net under a check someone forgot,
    so it is logged, and the caller still gets a 400 rather than a 500."""
    from engram_cloud.db import describe_db_error

    log.warning(
        "database refused a value on %s %s: %s",
        request.method,
        request.url.path,
        describe_db_error(exc),
    )
    return invalid_request(
        "invalid_parameter", f"a value in this request cannot be stored ({describe_db_error(exc)})"
    ).response()


def _internal(request: Request, exc: Exception) -> Response[bytes]:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return ApiError(500, "blocked", "upgrade_blocked_internal", "internal server error").response()


EXCEPTION_HANDLERS: dict[Any, Any] = {
    ApiError: _api_error,
    EngramError: _engram_error,
    RequestEntityTooLarge: _too_large,
    NotFoundException: _not_found,
    MethodNotAllowedException: _not_allowed,
    ValidationException: _validation,
    HTTPException: _http,
    DataError: _bad_data,
    OperationalError: _database,  # the database is down, restarting or unreachable
    InterfaceError: _database,
    Exception: _internal,
}
