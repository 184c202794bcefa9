"""``engram hub``: the first seed's Hub API (docs/hub.md) as its own
small litestar app over the local store, on its own port (127.0.0.1:8000 by default), so that
its ``/health`` never collides with ``engram serve``'s.

* Routes: ``GET /`` and ``GET /health`` (open), ``POST /search`` and ``GET /status`` (behind
  ``ENGRAM_API_TOKEN`` when set), ``/docs`` and ``/openapi.json``.
* Errors speak FastAPI's shapes, which the seed's clients parse: ``{"detail": "..."}``, and for
  a malformed body 422 with ``{"detail": [{"type", "loc", "msg"}]}``. The store's rules give the
  seed's 400s (bad regex, long query, bad session id, bad date, no filter) and 404 (no matching
  sessions); a database that cannot be opened or read is the seed's 503 "index unavailable" —
  the hub keeps serving ``/`` and ``/health`` and retries on the next request.
* The search itself is :meth:`engram.store.Store.pattern_search` (RE2, time-bounded).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from litestar import Litestar, Request, Response, get, post
from litestar.di import NamedDependency, Provide
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components
from litestar.params import JSONBody

from engram import __version__
from engram.errors import EngramError, StoreUnavailableError
from engram.http.bearer import token_schemes, with_token
from engram.http.body import EngramRequest
from engram.http.hub_models import (
    Detail,
    FieldError,
    HealthResponse,
    SearchResponse,
    ServiceInfo,
    SessionSearchInput,
    StatusResponse,
    ValidationDetail,
)
from engram.http.local_only import LocalOnly
from engram.settings import Config
from engram.store import Store
from engram.store.db import describe_sqlite_error

log = logging.getLogger("engram.hub")

BODY_LIMIT = 64 * 1024  # a search body is a query of ≤ 500 characters and a few filters
DESCRIPTION = "Engram's memory store over the first seed's Hub API (regular-expression search)"


def timestamp() -> str:
    """The seed's timestamp: UTC, ISO-8601, microseconds, no zone suffix."""
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


class HubIndex:
    """The store behind the hub, opened on first use and re-tried after a failure, so a
    database that is missing, locked or damaged at start-up is a 503, not a dead server."""

    def __init__(self, config: Config, opener: Callable[[Config], Store] | None = None) -> None:
        self.config = config
        self._opener = opener or (lambda cfg: Store.open(config=cfg))
        self._store: Store | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return str(self.config.db_path)

    def store(self) -> Store:
        """The open store, or :class:`StoreUnavailableError` (the seed's 503)."""
        with self._lock:
            if self._store is None:
                self._store = self._opener(self.config)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


IndexArg = NamedDependency[HubIndex]


# --- routes -------------------------------------------------------------------------------------


@get("/", sync_to_thread=False, summary="Service description")
def service_info() -> ServiceInfo:
    return ServiceInfo(
        service="Engram Hub",
        status="online",
        version=__version__,
        description=DESCRIPTION,
        endpoints={
            "health": "/health",
            "status": "/status",
            "search": "/search (POST)",
            "docs": "/docs",
            "openapi": "/openapi.json",
        },
    )


@get("/health", sync_to_thread=False, summary="Health check")
def health() -> HealthResponse:
    return HealthResponse(status="online", timestamp=timestamp(), version=__version__)


@get("/openapi.json", sync_to_thread=False, include_in_schema=False)
def openapi_document(request: Request) -> dict[str, Any]:
    return request.app.openapi_schema.to_schema()


@post("/search", status_code=200, sync_to_thread=True, summary="Search memories")
def search(data: JSONBody[SessionSearchInput], index: IndexArg) -> SearchResponse:
    """Memories whose title or content matches ``query`` (a regular expression, RE2 syntax,
    case-sensitive; ``(?i)`` ignores case), newest first, their text cut at 4,000 characters.
    ``session_id`` keeps sessions whose id contains it; ``tags`` match types and topic keys;
    ``date_from``/``date_to`` (YYYY-MM-DD) bound the creation date."""
    result = index.store().pattern_search(
        data.query,
        session_id=data.session_id,
        tags=data.tags,
        date_from=data.date_from,
        date_to=data.date_to,
    )
    text = result.text
    if result.stopped_early:
        text += (
            f"\n\n[search stopped after {result.elapsed_ms / 1000:.1f} s having read "
            f"{result.scanned} of {result.candidates} memories: narrow it with session_id, "
            "tags or dates]"
        )
    return SearchResponse(query=result.query, results=text, elapsed_ms=result.elapsed_ms)


@get("/status", sync_to_thread=True, summary="Store status")
def status(index: IndexArg) -> StatusResponse:
    answer = StatusResponse(
        service="engram-hub",
        status="online",
        entities_path=str(index.config.data_dir),
        index_path=index.path,
        timestamp=timestamp(),
        version=__version__,
        index="available",
    )
    try:
        store = index.store()
        answer.memories = int(
            store.db.scalar("SELECT COUNT(*) FROM observations WHERE deleted_at IS NULL") or 0
        )
        answer.sessions = int(store.db.scalar("SELECT COUNT(*) FROM sessions") or 0)
    except StoreUnavailableError as exc:
        answer.index = f"unavailable: {exc}"
    except sqlite3.Error as exc:
        answer.index = f"unavailable: {describe_sqlite_error(exc, index.config.db_path)}"
    return answer


OPEN_ROUTES = [service_info, health, openapi_document]
GUARDED_ROUTES = [search, status]


# --- the token ----------------------------------------------------------------------------------


#: What a request without ``ENGRAM_API_TOKEN`` is told (the seed's words, which its clients
#: may look for).
REFUSAL = "Invalid or missing token"


# --- errors -------------------------------------------------------------------------------------


def _detail(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(Detail(detail=message), status_code=status, headers=headers)


def _unprocessable(message: str, field: str | None = None, kind: str = "value_error") -> Response:
    loc = ["body", field] if field else ["body"]
    body = ValidationDetail(detail=[FieldError(type=kind, loc=loc, msg=message)])
    return Response(body, status_code=422)


def _on_engram_error(_: Request, exc: EngramError) -> Response:
    if exc.status_code >= 500:
        log.error("%s", exc)
    return _detail(exc.status_code, str(exc) or type(exc).__name__)


def _on_validation(_: Request, exc: ValidationException) -> Response:
    """litestar's body checks (types, missing body) → FastAPI's 422 list."""
    for item in exc.extra if isinstance(exc.extra, list) else []:
        if isinstance(item, dict):
            key = str(item.get("key") or "")
            message = str(item.get("message") or exc.detail)
            if message == f"'{key}'":  # no body at all
                return _unprocessable("a JSON object body is required", kind="missing")
            field = None if key in ("", "data") else key
            return _unprocessable(message, field, "type_error")
    return _unprocessable(exc.detail)


def _on_http_error(request: Request, exc: HTTPException) -> Response:
    if exc.detail.startswith("JSON is malformed"):
        return _unprocessable(
            f"invalid JSON body: {exc.detail.removeprefix('JSON is malformed: ')}",
            kind="json_invalid",
        )
    message = exc.detail
    if exc.status_code == 404:
        message = "Not Found"
    elif exc.status_code == 405:
        message = "Method Not Allowed"
    elif exc.status_code == 413:
        message = f"request body too large (limit {BODY_LIMIT:,} bytes)"
    return _detail(exc.status_code, message, headers=exc.headers)


def _on_sqlite_error(request: Request, exc: sqlite3.Error) -> Response:
    index: HubIndex = request.app.state.index
    message = describe_sqlite_error(exc, index.config.db_path)
    log.error("%s", message)
    return _detail(503, f"index unavailable: {message}")


def _on_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return _detail(500, f"internal error ({type(exc).__name__}); see the server log")


# --- the app ------------------------------------------------------------------------------------


def create_hub(
    index: HubIndex,
    *,
    token: str | None = None,
) -> Litestar:
    """The Hub API over ``index`` (closed when the app shuts down).

    ``token`` (normally ``ENGRAM_API_TOKEN``) guards ``/search`` and ``/status``; without one
    every route is open, as in the seed's local development mode. Like ``engram serve``, it
    answers only loopback (or ``ENGRAM_HTTP_ALLOWED_HOSTS``) ``Host``s, refuses foreign ``Origin``s
    and non-JSON bodies (:mod:`engram.http.local_only`), so a web page can neither read nor
    drive it.
    """

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        try:
            yield
        finally:
            index.close()

    guarded = [with_token(handler, token, REFUSAL) for handler in GUARDED_ROUTES]
    schemes = token_schemes(token, "ENGRAM_API_TOKEN")
    app = Litestar(
        route_handlers=[*OPEN_ROUTES, *guarded],
        guards=LocalOnly(index.config.http_allowed_hosts).guards(),
        request_class=EngramRequest,
        dependencies={"index": Provide(lambda: index, sync_to_thread=False)},
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
            title="Engram Hub",
            version=__version__,
            description=DESCRIPTION,
            path="/docs",
            render_plugins=[
                SwaggerRenderPlugin(path="/"),
                JsonRenderPlugin(path="/openapi.json"),
            ],
            components=Components(security_schemes=schemes),
            use_handler_docstrings=True,
        ),
        logging_config=None,
    )
    app.state.index = index
    return app
