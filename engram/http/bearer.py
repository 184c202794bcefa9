"""The bearer token that guards some routes of both local servers (``engram serve``:
``ENGRAM_HTTP_TOKEN``; ``engram hub``: ``ENGRAM_API_TOKEN``): the guard, compared in constant
time, each app's own copy of a guarded route, and the security scheme ``/schema`` documents."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from copy import copy

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.openapi.spec import Reference, SecurityScheme

TOKEN_SCHEME = "bearerToken"


def bearer_guard(token: str, refusal: str) -> Callable[[ASGIConnection, BaseRouteHandler], None]:
    """A guard that lets a request through only with ``Authorization: Bearer <token>``; a 401
    saying ``refusal`` otherwise."""
    expected = token.encode()

    def guard(connection: ASGIConnection, _handler: BaseRouteHandler) -> None:
        scheme, _, given = connection.headers.get("authorization", "").partition(" ")
        # compare_digest takes as long for a wrong token as for a right one of the same length.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
            raise NotAuthorizedException(refusal, headers={"WWW-Authenticate": "Bearer"})

    return guard


def with_token(handler: HTTPRouteHandler, token: str | None, refusal: str) -> HTTPRouteHandler:
    """This app's copy of a guarded route (the module-level handler is shared by every app
    built in this process): behind the token, and documented so, only when there is one."""
    own = copy(handler)
    if token:
        own.guards = [bearer_guard(token, refusal)]
        own.security = [{TOKEN_SCHEME: []}]
    return own


def token_schemes(
    token: str | None, description: str
) -> dict[str, SecurityScheme | Reference] | None:
    """The security scheme ``/schema`` lists when there is a token (``description``: what it
    guards)."""
    if not token:
        return None
    return {TOKEN_SCHEME: SecurityScheme(type="http", scheme="bearer", description=description)}
