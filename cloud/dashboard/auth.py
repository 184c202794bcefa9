"""Who is looking at the dashboard: browser sessions, login rate limiting and safe redirects.

**Sessions** (docs/dashboard.md, "Logging in", adapted). Logging in exchanges a token — the legacy shared token,
the legacy admin token or a managed user's token — for the cookie ``engram_dashboard_token``
(Path ``/dashboard``, HttpOnly, SameSite=Lax, Secure over HTTPS, 8 hours). Its value is
``b64url(claims) "." b64url(HMAC-SHA256(ENGRAM_JWT_SECRET, b64url(claims)))`` with claims
``{"v", "kind", "th", "tid", "pid", "iat", "exp"}``; ``th`` is an HMAC of the token, never the
token. Every request checks the signature and the expiry, then resolves the principal afresh:
a legacy session dies when the server's token changes, a managed one when its token is revoked
or its user disabled — so grants changed by an admin apply at the next click. Nothing is stored
on the server (logging out clears the cookie; a copied cookie stays valid until it expires).

**Rate limiting.** Every login attempt is recorded in ``cloud_login_attempts`` *before* the token
is checked (so parallel guesses count too), under two keys: the client address, and the address
plus an HMAC of the token's first characters. More than :data:`MAX_FAILURES_PER_TOKEN` failures
for one key pair, or :data:`MAX_FAILURES_PER_ADDRESS` from one address, within
:data:`FAILURE_WINDOW` refuses further attempts (429) until old failures age out. The state is
in PostgreSQL, so every server process behind a load balancer counts the same attempts.

**Redirects.** :func:`safe_next` keeps a ``next`` target only when it is a path inside the
dashboard; anything else (other hosts, ``//host``, backslashes, schemes) becomes the home page.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import orjson
from sqlalchemy import Connection, delete, func, insert, select, update

from engram_cloud import models
from engram_cloud.auth import (
    INSECURE_PRINCIPAL,
    LEGACY_ADMIN_PRINCIPAL,
    LEGACY_PRINCIPAL,
    SOURCE_LEGACY,
    SOURCE_LEGACY_ADMIN,
    SOURCE_MANAGED,
    Principal,
    readable_projects,
)
from engram_cloud.dashboard.queries.common import Scope
from engram_cloud.settings import Settings

COOKIE_NAME = "engram_dashboard_token"
COOKIE_PATH = "/dashboard"
SESSION_SECONDS = 8 * 3600
CLOCK_SKEW_SECONDS = 60
MAX_COOKIE_CHARS = 2048
HOME = "/dashboard/"
LOGIN = "/dashboard/login"

FAILURE_WINDOW = timedelta(minutes=15)
MAX_FAILURES_PER_TOKEN = 5
MAX_FAILURES_PER_ADDRESS = 20
TOKEN_PREFIX_CHARS = 12  # "egt_" + the 8 public characters of a managed token
ATTEMPT_RETENTION = timedelta(days=1)


# --- viewer --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Viewer:
    """The logged-in principal and the projects they may see."""

    principal: Principal
    scope: Scope
    insecure: bool = False

    @property
    def is_admin(self) -> bool:
        return self.principal.is_admin

    @property
    def name(self) -> str:
        p = self.principal
        if p.source == SOURCE_LEGACY:
            return "team token"
        return p.display_name or p.username or "unknown"


def viewer_for(settings: Settings, principal: Principal) -> Viewer:
    return Viewer(
        principal,
        Scope(readable_projects(settings, principal)),
        insecure=principal is INSECURE_PRINCIPAL,
    )


# --- session cookie ------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def _mac(secret: str, message: str) -> str:
    return _b64(hmac.new(secret.encode(), message.encode(), hashlib.sha256).digest())


def token_hash(secret: str, token: str) -> str:
    return _mac(secret, "dashboard:" + token)


def session_kind(principal: Principal) -> str:
    return {SOURCE_LEGACY: "legacy", SOURCE_LEGACY_ADMIN: "admin", SOURCE_MANAGED: "managed"}[
        principal.source
    ]


def mint_session(secret: str, principal: Principal, token: str, *, now: float | None = None) -> str:
    """The cookie value of a new session for ``principal``, who logged in with ``token``."""
    issued = int(time.time() if now is None else now)
    claims = {
        "v": 1,
        "kind": session_kind(principal),
        "th": token_hash(secret, token),
        "tid": principal.token_id,
        "pid": principal.id,
        "iat": issued,
        "exp": issued + SESSION_SECONDS,
    }
    body = _b64(orjson.dumps(claims))
    return f"{body}.{_mac(secret, body)}"


def read_claims(
    secret: str, value: str | None, *, now: float | None = None
) -> dict[str, Any] | None:
    """The claims of a well-formed, authentic, unexpired cookie value; else ``None``."""
    if not value or len(value) > MAX_COOKIE_CHARS or value.count(".") != 1:
        return None
    body, signature = value.split(".")
    if not hmac.compare_digest(signature.encode(), _mac(secret, body).encode()):
        return None
    try:
        claims = orjson.loads(_unb64(body))
    except (ValueError, orjson.JSONDecodeError):
        return None
    if not isinstance(claims, dict) or claims.get("v") != 1:
        return None
    moment = time.time() if now is None else now
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int) or not isinstance(iat, int):
        return None
    if exp <= moment or iat > moment + CLOCK_SKEW_SECONDS:
        return None
    if not isinstance(claims.get("th"), str) or not claims["th"]:
        return None
    return claims


def resolve_session(
    conn: Connection, settings: Settings, value: str | None, *, now: float | None = None
) -> Principal | None:
    """The principal of a session cookie, if it is still good (see the module docstring)."""
    secret = settings.jwt_secret
    if not secret:
        return None
    claims = read_claims(secret, value, now=now)
    if claims is None:
        return None
    kind = claims.get("kind")
    if kind == "legacy" and settings.token:
        if hmac.compare_digest(claims["th"], token_hash(secret, settings.token)):
            return LEGACY_PRINCIPAL
        return None
    if kind == "admin" and settings.admin_token:
        if hmac.compare_digest(claims["th"], token_hash(secret, settings.admin_token)):
            return LEGACY_ADMIN_PRINCIPAL
        return None
    tid, pid = claims.get("tid"), claims.get("pid")
    if kind == "managed" and isinstance(tid, int) and isinstance(pid, int):
        return managed_principal(conn, tid, pid)
    return None


def managed_principal(conn: Connection, token_id: int, principal_id: int) -> Principal | None:
    """The principal behind a managed token, if the token is live and its user enabled."""
    t, p, g = models.principal_tokens, models.principals, models.project_grants
    grants = select(func.array_agg(g.c.project)).where(g.c.principal_id == p.c.id).scalar_subquery()
    row = conn.execute(
        select(p.c.id, p.c.kind, p.c.role, p.c.username, p.c.display_name, grants.label("grants"))
        .join(t, t.c.principal_id == p.c.id)
        .where(
            t.c.id == token_id,
            p.c.id == principal_id,
            t.c.revoked_at.is_(None),
            p.c.enabled.is_(True),
        )
    ).first()
    if row is None:
        return None
    return Principal(
        kind=row.kind,
        role=row.role,
        source=SOURCE_MANAGED,
        username=row.username,
        display_name=row.display_name,
        id=row.id,
        token_id=token_id,
        grants=frozenset(row.grants or ()),
    )


def is_secure(scheme: str, forwarded_proto: str | None) -> bool:
    """Whether the browser reached us over HTTPS (directly or through a proxy that says so)."""
    return scheme == "https" or "https" in (forwarded_proto or "").lower()


# --- login rate limiting -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attempt:
    ids: tuple[int, ...]
    blocked: bool
    retry_after: int  # seconds, when blocked


def attempt_keys(secret: str, address: str, token: str) -> tuple[str, str]:
    """``(address key, address+token-prefix key)``. The prefix is kept only as an HMAC: a
    mistyped token's first characters may be a real token's."""
    prefix = token[:TOKEN_PREFIX_CHARS]
    pair = _mac(secret, f"login\0{address}\0{prefix}")[:22]
    return f"addr:{address[:100]}", f"pair:{pair}"


def begin_attempt(conn: Connection, secret: str, address: str, token: str) -> Attempt:
    """Record a login attempt (as failed until :func:`succeed`) and tell whether it may proceed."""
    a = models.login_attempts
    addr_key, pair_key = attempt_keys(secret, address, token)
    if random.random() < 0.01:  # amortized pruning; the table only needs the last window
        conn.execute(delete(a).where(a.c.attempted_at < func.now() - ATTEMPT_RETENTION))
    ids = tuple(
        conn.execute(insert(a).returning(a.c.id), [{"key": addr_key}, {"key": pair_key}]).scalars()
    )
    rows = conn.execute(
        select(
            a.c.key,
            func.count().label("failures"),
            func.extract("epoch", func.min(a.c.attempted_at) + FAILURE_WINDOW - func.now()).label(
                "wait"
            ),
        )
        .where(
            a.c.key.in_([addr_key, pair_key]),
            a.c.succeeded.is_(False),
            a.c.attempted_at > func.now() - FAILURE_WINDOW,
        )
        .group_by(a.c.key)
    ).all()
    limits = {addr_key: MAX_FAILURES_PER_ADDRESS, pair_key: MAX_FAILURES_PER_TOKEN}
    over = [r for r in rows if r.failures > limits[r.key]]
    if not over:
        return Attempt(ids, False, 0)
    wait = max(int(r.wait or 0) for r in over)
    return Attempt(ids, True, max(1, wait))


def succeed(conn: Connection, attempt: Attempt) -> None:
    a = models.login_attempts
    conn.execute(update(a).where(a.c.id.in_(attempt.ids)).values(succeeded=True))


# --- redirects -----------------------------------------------------------------------------------


def safe_next(raw: str | None) -> str:
    """``raw`` if it is a path inside the dashboard (not the login or logout page), else the
    dashboard's home. Never a URL with a scheme or a host, never ``//…`` or a backslash."""
    if not raw or len(raw) > 2000 or not raw.isascii():
        return HOME
    if any(ch == "\\" or ord(ch) < 0x21 or ord(ch) == 0x7F for ch in raw):
        return HOME
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc or parts.fragment:
        return HOME
    path = parts.path
    if not (path == COOKIE_PATH or path.startswith(COOKIE_PATH + "/")):
        return HOME
    # Browsers resolve "." and ".." segments, encoded ones (%2e) included: refuse them. An
    # encoded slash inside a segment is part of a name (a project "org/repo") and stays.
    if any(unquote(s) in (".", "..") for s in path.split("/")):
        return HOME
    if path.rstrip("/") in (LOGIN, "/dashboard/logout"):
        return HOME
    return urlunsplit(("", "", path, parts.query, ""))


def login_url(next_target: str | None = None) -> str:
    """The login page, remembering where to go afterwards."""
    if not next_target or next_target in (HOME, COOKIE_PATH):
        return LOGIN
    return f"{LOGIN}?next={quote(next_target, safe='')}"
