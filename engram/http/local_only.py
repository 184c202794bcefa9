"""Keeping web pages out of ``engram serve``: which requests the local API answers at all.

``engram serve`` listens on loopback, and every page open in the user's browser can reach
loopback. Three app-level guards (litestar runs them before the route's own guards and before
the body is read) refuse what only a browser would send, and let local programs — hook
scripts with curl, editor plugins, Node or Python clients — through unchanged:

* **Host** (DNS rebinding: a page whose own name resolves to 127.0.0.1 sends ``Host:
  evil.example``) → 421 unless it names loopback (``localhost``, ``127.0.0.0/8``, ``[::1]``),
  a host in ``ENGRAM_HTTP_ALLOWED_HOSTS`` or the address the server was bound to. A request
  without ``Host`` (HTTP/1.0 tools) comes from no browser and passes.
* **Origin** (a page posting to the API) → 403 unless it is a loopback or allowed host. Local
  programs send no ``Origin``; browsers send it on every POST, PATCH and DELETE.
* **Content-Type** → 415 for a body that is not ``application/json``: ``text/plain``, form and
  multipart bodies are exactly what a page may send without asking the server first (CORS
  "simple requests"), so even a browser that left out ``Origin`` cannot write.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from litestar.connection import ASGIConnection, Request
from litestar.exceptions import HTTPException
from litestar.handlers import BaseRouteHandler

Guard = Callable[[ASGIConnection, BaseRouteHandler], None]
#: ``ENGRAM_HTTP_ALLOWED_HOSTS`` entry that turns the Host check off (behind a reverse proxy).
ANY_HOST = "*"
LOOPBACK_NAMES = frozenset({"localhost"})
JSON_MEDIA_TYPE = "application/json"


class Refused(HTTPException):
    """A request this server does not serve, with the ``error_code`` its answer carries."""

    def __init__(self, status_code: int, code: str, detail: str) -> None:
        super().__init__(status_code=status_code, detail=detail)
        self.code = code


def host_name(value: str) -> str | None:
    """The name or address in a ``Host`` value or ``ENGRAM_HTTP_ALLOWED_HOSTS`` entry
    (``name``, ``name:port``, ``[v6]:port``), lower-cased; ``None`` if it is not one."""
    try:
        name = urlsplit(f"//{value.strip()}").hostname
    except ValueError:  # "[::1" and the like
        return None
    return name or None


def origin_host(origin: str) -> str | None:
    """The host of an ``Origin`` header (``scheme://host[:port]``); ``None`` for ``null`` and
    anything that is not an http(s) origin."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return None
    if parts.scheme not in ("http", "https"):
        return None
    return parts.hostname or None


def is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class LocalOnly:
    """The Host and Origin rules for one app, from its allowed hosts."""

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        entries = [entry.strip() for entry in allowed_hosts if entry.strip()]
        self.any_host = ANY_HOST in entries
        self.allowed = frozenset(
            name for entry in entries if entry != ANY_HOST and (name := host_name(entry))
        )

    def trusts(self, name: str) -> bool:
        return is_loopback(name) or name in self.allowed

    def check_host(self, connection: ASGIConnection, _: BaseRouteHandler) -> None:
        raw = connection.headers.get("host")
        if raw is None or self.any_host:
            return
        name = host_name(raw)
        if name is None or not self.trusts(name):
            raise Refused(
                421,
                "host_not_allowed",
                f"this server answers only requests addressed to this machine (localhost, "
                f"127.0.0.1, [::1]), not Host {raw!r}: to serve that name too, add it to "
                "ENGRAM_HTTP_ALLOWED_HOSTS",
            )

    def check_origin(self, connection: ASGIConnection, _: BaseRouteHandler) -> None:
        raw = connection.headers.get("origin")
        if raw is None:
            return  # not a browser: curl, scripts, editor plugins
        name = origin_host(raw)
        if name is None or not self.trusts(name):
            raise Refused(
                403,
                "origin_not_allowed",
                f"requests from web pages are refused (Origin {raw!r}): engram serve is for "
                "programs on this machine, which send no Origin header",
            )

    def guards(self) -> list[Guard]:
        return [self.check_host, self.check_origin, json_bodies_only]


def _has_body(connection: ASGIConnection) -> bool:
    length = connection.headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in connection.headers


def json_bodies_only(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """A request that carries a body must say it is JSON."""
    if not isinstance(connection, Request) or not _has_body(connection):
        return
    media_type = connection.content_type[0].lower()
    if media_type != JSON_MEDIA_TYPE:
        got = f"got {media_type!r}" if media_type else "no Content-Type was sent"
        raise Refused(
            415,
            "unsupported_media_type",
            f"request bodies must be JSON with 'Content-Type: application/json' ({got}); "
            "with curl use --json or -H 'Content-Type: application/json'",
        )
