"""Who is calling the team server's JSON API: the ``principal`` dependency (the authenticated
caller) and the :func:`require_admin` guard of the admin routes.

The caller is authenticated once per request and kept in the request's scope, so a guarded
handler that also wants to know who its admin is (to audit them) does not check the token twice.
Authentication reads the database, so it runs on a worker thread, never on the event loop.
"""

from __future__ import annotations

from typing import Any

import anyio
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from engram_cloud.auth import INSECURE_PRINCIPAL, Principal, authenticate
from engram_cloud.errors import ApiError

_SCOPE_KEY = "engram_principal"


def client_address(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The caller's address: the connection's peer, or the client a trusted proxy names
    (uvicorn rewrites it only for ``ENGRAM_CLOUD_TRUSTED_PROXIES``)."""
    return connection.client.host if connection.client else "unknown"


def _authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    state = connection.app.state
    if state.settings.insecure:
        return INSECURE_PRINCIPAL
    with state.engine.connect() as conn:
        try:
            return authenticate(
                conn,
                state.settings,
                connection.headers.get("authorization"),
                client_address(connection),
            )
        finally:
            conn.commit()  # the failure count and last_used_at, whether or not it refused


def caller(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """The authenticated caller (401 envelope when the credentials are missing or wrong, 429
    when the address sent too many wrong ones); authenticated once per request."""
    state = connection.scope.setdefault("state", {})
    found = state.get(_SCOPE_KEY)
    if found is None:
        found = state[_SCOPE_KEY] = _authenticate(connection)
    return found  # type: ignore[no-any-return]


def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    """The ``principal`` dependency (run on a worker thread by the app)."""
    return caller(request)


async def require_admin(
    connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
) -> None:
    """Guard: the caller must be an admin (403 otherwise; 401 when not authenticated)."""
    principal = await anyio.to_thread.run_sync(caller, connection)
    if not principal.is_admin:
        raise ApiError(403, "policy", "policy_forbidden", "forbidden: admin role required")
