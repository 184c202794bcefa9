"""The litestar application of the team server: :func:`create_app` wires settings, the database
engine, authentication and every route; ``GET /health`` (liveness, no database) and
``GET /health/ready`` (readiness: the database answers) serve load balancers.

Tests build an app with ``create_app(settings)`` on a migrated database and drive it with
litestar's ``TestClient``; ``engram cloud serve`` runs the same app under uvicorn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi import OpenAPIConfig
from sqlalchemy import Engine, text

from engram import __version__
from engram_cloud import gateway
from engram_cloud.api import admin as admin_api
from engram_cloud.api import sync as sync_api
from engram_cloud.api import workers
from engram_cloud.api.access import provide_principal
from engram_cloud.auth import Principal, readable_projects
from engram_cloud.compression import response_compression
from engram_cloud.dashboard.plugin import DashboardPlugin
from engram_cloud.db import create_db_engine, describe_db_error, libpq_url
from engram_cloud.errors import EXCEPTION_HANDLERS, json_response
from engram_cloud.fleet import Liveness
from engram_cloud.guards import refuse_unstorable_parameters
from engram_cloud.live import LiveFeed
from engram_cloud.notify import Notifier
from engram_cloud.settings import Settings, load_settings

SERVICE = "engram-cloud"


@get("/health", sync_to_thread=False, include_in_schema=False)
def health() -> object:
    """Liveness: the process answers (the Go tool's exact body)."""
    return json_response({"service": SERVICE, "status": "ok"})


@get("/health/ready", sync_to_thread=True, include_in_schema=False)
def ready(request: Request) -> object:
    """Readiness: the database answers a query."""
    try:
        with request.app.state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any failure means "not ready", with the reason
        return json_response(
            {"service": SERVICE, "status": "unavailable", "database": describe_db_error(exc)},
            503,
        )
    return json_response({"service": SERVICE, "status": "ok", "database": "ok"})


@get("/api/v1/whoami", sync_to_thread=False)
def whoami(request: Request, principal: NamedDependency[Principal]) -> object:
    """Who the server thinks the caller is, and which projects they may sync."""
    projects = readable_projects(request.app.state.settings, principal)
    return json_response(
        {
            "principal_id": principal.id,
            "username": principal.username,
            "display_name": principal.display_name,
            "kind": principal.kind,
            "role": principal.role,
            "source": principal.source,
            "projects": "*" if projects is None else sorted(projects),
            "mode": request.app.state.settings.mode,
            "version": __version__,
        }
    )


def create_app(
    settings: Settings, *, engine: Engine | None = None, plugins: Sequence[Any] = ()
) -> Litestar:
    """The server application. ``engine`` defaults to one built from the settings (and disposed
    when the app shuts down); the schema must already be migrated (see ``engram cloud migrate``).
    ``plugins`` are litestar plugins added to the app (the dashboard is one)."""
    owns_engine = engine is None
    engine = engine or create_db_engine(settings.database_url, pool_size=settings.pool_size)
    notifier = Notifier(libpq_url(settings.database_url))
    live_feed = LiveFeed(engine, notifier, liveness=Liveness.of(settings))

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        await notifier.start()
        await live_feed.start()
        try:
            yield
        finally:
            await live_feed.stop()
            await notifier.stop()
            if owns_engine:
                engine.dispose()

    return Litestar(
        route_handlers=[
            health,
            ready,
            whoami,
            *sync_api.ROUTES,
            *admin_api.ROUTES,
            *workers.ROUTES,
            *gateway.ROUTES,
        ],
        dependencies={
            "principal": Provide(provide_principal, sync_to_thread=True),
        },
        exception_handlers=EXCEPTION_HANDLERS,
        before_request=refuse_unstorable_parameters,
        state=State(
            {
                "settings": settings,
                "engine": engine,
                "notifier": notifier,
                "live_feed": live_feed,
                "gateway_clients": gateway.Clients(),
            }
        ),
        lifespan=[lifespan],
        request_max_body_size=settings.max_push_bytes,
        compression_config=response_compression(),
        openapi_config=OpenAPIConfig(title="Engram cloud", version=__version__, path="/schema"),
        plugins=[DashboardPlugin(settings), *plugins],
    )


def create_app_from_env() -> Litestar:
    """uvicorn's factory when the server runs several worker processes."""
    return create_app(load_settings())
