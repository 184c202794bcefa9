"""The local HTTP API (``engram serve``): assembles the routes of :mod:`engram.http.routes`
into a litestar app.

* Bodies and answers are the typed structs of :mod:`engram.http.models`, so litestar validates
  input and ``/schema`` documents exactly what is served.
* Every failure answers ``{"error": "..."}`` (plus ``field``/``error_code`` when known) with the
  status the cause calls for: the store's exceptions carry theirs, litestar's own (validation,
  unknown route, wrong method, body too large, bad token) are translated here.
* The store is synchronous; handlers run in worker threads (``sync_to_thread``) over one shared
  store, whose database serializes statements with a lock, so the event loop never blocks.
* Only programs on this machine are served: requests for a foreign ``Host``, from a web page's
  ``Origin`` or with a non-JSON body are refused (:mod:`engram.http.local_only`), and a body
  that cannot be decoded is a 400 (:mod:`engram.http.body`).
* ``ENGRAM_HTTP_TOKEN`` guards the destructive and bulk routes with a bearer token.
* :class:`BackgroundService` is the seam where long-lived work (autosync) starts and stops with
  the app.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

from litestar import Litestar, Request, Response
from litestar.di import Provide
from litestar.exceptions import HTTPException, ValidationException
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components
from litestar.types import ControllerRouterHandler

from engram import __version__
from engram.errors import EngramError, ProjectResolutionError, ValidationError
from engram.http.bearer import token_schemes, with_token
from engram.http.body import EngramRequest
from engram.http.curation import CURATION_GUARDED_ROUTES, CURATION_OPEN_ROUTES
from engram.http.graph_routes import ROUTES as GRAPH_ROUTES
from engram.http.local_only import LocalOnly
from engram.http.models import ErrorBody
from engram.http.routes import GUARDED_ROUTES, OPEN_ROUTES, WIRE_NAMES, ServerContext
from engram.settings import Config
from engram.store import Store
from engram.store.db import describe_sqlite_error
from engram.sync.cloud.status import StatusSource

log = logging.getLogger("engram.http")

BODY_LIMIT = 1 << 20  # 1 MiB: far above the 50 000-byte memory limit, small enough to refuse junk


class BackgroundService(Protocol):
    """Long-lived work that runs while the server does (autosync, a later issue).

    ``start`` runs before the first request is served; ``stop`` after the last one finished.
    """

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


# --- the bearer token ---------------------------------------------------------------------------


#: What a request without the right token is told.
REFUSAL = "this route needs 'Authorization: Bearer <token>' with the server's ENGRAM_HTTP_TOKEN"


# --- errors -------------------------------------------------------------------------------------

# The field a litestar/msgspec message names ("missing required field `x`", "parameter 'q'").
_NAMED_FIELD = re.compile(r"(?:field|parameter) [`'](\w+)[`']")


def _error(status: int, body: ErrorBody, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, headers=headers)


def _on_engram_error(_: Request, exc: EngramError) -> Response:
    body = ErrorBody(error=str(exc) or type(exc).__name__)
    if isinstance(exc, ValidationError) and exc.field:
        body.field = exc.field
    if isinstance(exc, ProjectResolutionError):
        body.error_code = exc.code
        body.available_projects = exc.available_projects
    if exc.status_code >= 500:
        log.error("%s", body.error)
    return _error(exc.status_code, body)


def _on_validation(request: Request, exc: ValidationException) -> Response:
    """litestar's own 400s (types, constraints, missing fields) → one line naming the field."""
    details = exc.extra if isinstance(exc.extra, list) else []
    for detail in details:
        if not isinstance(detail, dict):
            continue
        key, message = str(detail.get("key") or ""), str(detail.get("message") or "")
        key = WIRE_NAMES.get(key, key)
        source = getattr(detail.get("source"), "value", detail.get("source")) or ""
        named = _NAMED_FIELD.search(message)
        if source == "body":
            if message == f"'{key}'":  # no body at all
                return _error(400, ErrorBody(error="a JSON request body is required"))
            path = "" if key == "data" else key
            field = ".".join(p for p in (path, named.group(1) if named else "") if p) or None
            where = f"{path}: " if path else ""
            return _error(400, ErrorBody(error=f"invalid body: {where}{message}", field=field))
        where = f"{source} parameter " if source else ""
        return _error(400, ErrorBody(error=f"invalid {where}{key}: {message}", field=key or None))
    named = _NAMED_FIELD.search(exc.detail)
    return _error(400, ErrorBody(error=exc.detail, field=named.group(1) if named else None))


def _on_http_error(request: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    message = exc.detail
    if status == 404:
        message = f"not found: {request.method} {request.url.path}"
    elif status == 405:
        allowed = (exc.headers or {}).get("allow", "")
        message = f"method {request.method} not allowed on {request.url.path} (allowed: {allowed})"
    elif status == 413:
        try:
            limit = request.route_handler.resolve_request_max_body_size() or 0
        except Exception:  # no handler resolved: fall back to the general limit
            limit = BODY_LIMIT
        message = f"request body too large (limit {limit:,} bytes)"
    elif message.startswith("JSON is malformed"):
        message = f"invalid JSON body: {message.removeprefix('JSON is malformed: ')}"
    body = ErrorBody(error=message, error_code=getattr(exc, "code", None))
    return _error(status, body, headers=exc.headers)


def _on_sqlite_error(request: Request, exc: sqlite3.Error) -> Response:
    store: Store = request.app.state.store
    message = describe_sqlite_error(exc, store.path)
    if isinstance(exc, sqlite3.OperationalError):  # locked, read-only, disk full...
        log.error("%s", message)
        return _error(503, ErrorBody(error=message))
    log.exception("database error on %s %s", request.method, request.url.path)
    return _error(500, ErrorBody(error=message))


def _on_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return _error(
        500, ErrorBody(error=f"internal error ({type(exc).__name__}); see the server log")
    )


# --- the app ------------------------------------------------------------------------------------


def _operation_id(_: HTTPRouteHandler, http_method: str, path_components: list[Any]) -> str:
    """``GET /observations/{observation_id}`` → ``getObservationsObservationId``: unique by
    construction (litestar's default uses the function name, which sync handlers hide)."""
    words = [getattr(c, "name", c) for c in path_components]
    return http_method.lower() + "".join(
        part.title() for word in words for part in re.split(r"[^0-9A-Za-z]+", str(word)) if part
    )


def create_app(
    store: Store,
    *,
    config: Config | None = None,
    token: str | None = None,
    services: Sequence[BackgroundService] = (),
    sync_source: StatusSource | None = None,
) -> Litestar:
    """The HTTP app over ``store`` (which the caller opens and closes).

    ``token`` (normally ``ENGRAM_HTTP_TOKEN``) guards deletes, export, import and project
    merges. Requests must name a loopback host or one of ``config.http_allowed_hosts``.
    ``services`` start with the app and stop after the last request: autosync plugs in
    here. ``sync_source`` is the cloud client whose state ``/sync/status`` reports.
    """
    config = config or store.config
    server = ServerContext(config=config, sync_source=sync_source)

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        started: list[BackgroundService] = []
        try:
            for service in services:
                await service.start()
                started.append(service)
            yield
        finally:
            for service in reversed(started):
                await service.stop()

    guarded = [
        with_token(handler, token, REFUSAL)
        for handler in (*GUARDED_ROUTES, *CURATION_GUARDED_ROUTES)
    ]
    security_schemes = token_schemes(
        token,
        "ENGRAM_HTTP_TOKEN: deletes, archives, consolidation, export, import and merges need it",
    )
    handlers: list[ControllerRouterHandler] = [
        *OPEN_ROUTES,
        *CURATION_OPEN_ROUTES,
        *GRAPH_ROUTES,
        *guarded,
    ]
    app = Litestar(
        route_handlers=handlers,
        guards=LocalOnly(config.http_allowed_hosts).guards(),
        request_class=EngramRequest,
        dependencies={
            "store": Provide(lambda: store, sync_to_thread=False),
            "server": Provide(lambda: server, sync_to_thread=False),
        },
        exception_handlers={
            EngramError: _on_engram_error,
            ValidationException: _on_validation,
            HTTPException: _on_http_error,
            sqlite3.Error: _on_sqlite_error,
            Exception: _on_unexpected,
        },
        request_max_body_size=BODY_LIMIT,
        lifespan=[lifespan],
        openapi_config=OpenAPIConfig(
            title="Engram local API",
            version=__version__,
            description="Persistent memory for AI coding agents: the local store over HTTP. "
            'Every error answers {"error": "..."}.',
            path="/schema",
            render_plugins=[
                JsonRenderPlugin(path=["/", "/openapi.json"]),
                SwaggerRenderPlugin(path="/swagger"),
            ],
            components=Components(security_schemes=security_schemes),
            use_handler_docstrings=True,
            operation_id_creator=_operation_id,
        ),
        logging_config=None,
    )
    app.state.store = store
    return app
