"""Who is calling, and which projects they may touch.

Authentication (``Authorization: Bearer <token>`` only; docs/cloud.md, "Who may do what"), in this order:

1. insecure mode: no credentials at all, the caller is the local developer (admin);
2. the legacy shared ``ENGRAM_CLOUD_TOKEN`` (a member bounded by the allowlist);
3. the legacy ``ENGRAM_CLOUD_ADMIN`` token (an admin bounded by the allowlist);
4. a managed token (``egt_…``) issued to a principal: looked up by its public prefix, its
   peppered HMAC-SHA256 compared in constant time; revoked tokens and disabled principals fail.

**Throttle.** A client address that presented :data:`~engram_cloud.ratelimit.MAX_BAD_TOKENS`
wrong bearer tokens within :data:`~engram_cloud.ratelimit.BAD_TOKEN_WINDOW` gets 429 for every
request (right token or not) until the oldest failure ages out; the count is kept in PostgreSQL,
so all server processes share it. A missing or malformed header is not a guess and is not
counted. The address is the connection's peer, or what a trusted proxy says
(``ENGRAM_CLOUD_TRUSTED_PROXIES``; nobody's ``X-Forwarded-For`` is believed otherwise).

Authorization (docs/cloud.md, "Who may do what"): the server allowlist bounds everybody (``*`` = every project);
managed principals are further bounded by their grants, deny by default (a grant of ``*`` means
every allowlisted project). Project names are normalized before any check.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, func, select, update

from engram.project import project_name
from engram.text import unstorable_reason
from engram_cloud import models, ratelimit
from engram_cloud.errors import ApiError, forbidden, unauthorized
from engram_cloud.settings import ALL_PROJECTS, Settings

TOKEN_PREFIX = "egt_"
PREFIX_LENGTH = len(TOKEN_PREFIX) + 8  # the public part stored in clear, for lookup and display
LAST_USED_RESOLUTION = timedelta(minutes=1)  # write last_used_at at most once a minute

SOURCE_MANAGED = "managed_token"
SOURCE_LEGACY = "legacy_env"
SOURCE_LEGACY_ADMIN = "legacy_admin_env"
SOURCE_INSECURE = "insecure"


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller.

    ``grants`` is ``None`` for callers bounded only by the allowlist (legacy tokens, insecure
    mode); for managed principals it is the set of granted project names (``*`` = all).
    """

    kind: str  # human | service_account | legacy | insecure
    role: str  # admin | member
    source: str  # managed_token | legacy_env | legacy_admin_env | insecure
    username: str
    display_name: str
    id: int | None = None
    token_id: int | None = None
    grants: frozenset[str] | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def is_managed(self) -> bool:
        return self.id is not None

    @property
    def label(self) -> str:
        """How audit rows and contributors name this caller."""
        return self.display_name or self.username or "unknown"


INSECURE_PRINCIPAL = Principal(
    kind="insecure",
    role="admin",
    source=SOURCE_INSECURE,
    username="insecure-dev",
    display_name="insecure-dev",
)
LEGACY_PRINCIPAL = Principal(
    kind="legacy", role="member", source=SOURCE_LEGACY, username="legacy", display_name=""
)
LEGACY_ADMIN_PRINCIPAL = Principal(
    kind="legacy", role="admin", source=SOURCE_LEGACY_ADMIN, username="admin", display_name="admin"
)


# --- tokens ----------------------------------------------------------------------------------


def new_token() -> str:
    """A fresh managed token: ``egt_`` + 43 url-safe characters (256 random bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_prefix(token: str) -> str:
    return token[:PREFIX_LENGTH]


def hash_token(token: str, pepper: bytes) -> bytes:
    """Peppered HMAC-SHA256: a stolen database alone cannot be used to test guesses offline."""
    return hmac.new(pepper, token.encode(), hashlib.sha256).digest()


def parse_bearer(header: str | None) -> str:
    """The credential of an ``Authorization: Bearer …`` header, or 401 naming the problem."""
    if header is None or not header.strip():
        raise unauthorized("missing authorization header")
    fields = header.strip().split()
    if fields[0].lower() != "bearer":
        raise unauthorized("authorization must use Bearer token")
    if len(fields) != 2 or not fields[1]:
        raise unauthorized("bearer token is required")
    return fields[1]


def _equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def too_many_bad_tokens(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "policy",
        "rate_limited",
        "too many invalid bearer tokens from this address: wait and try again",
        headers={"Retry-After": str(retry_after)},
    )


def authenticate(
    conn: Connection, settings: Settings, header: str | None, address: str | None = None
) -> Principal:
    """Resolve the caller of a request (see the module docstring for the order). With the
    client's ``address``, wrong tokens are counted and a flooding address is refused (429);
    the caller must commit ``conn`` even when this raises, so the count is kept."""
    if settings.insecure:
        return INSECURE_PRINCIPAL
    token = parse_bearer(header)
    key = f"bearer:{address[:100]}" if address else None
    if key is not None:
        window = ratelimit.recent(
            conn, key, ratelimit.BAD_TOKEN_WINDOW, limit=ratelimit.MAX_BAD_TOKENS
        )
        if window.over(ratelimit.MAX_BAD_TOKENS):
            raise too_many_bad_tokens(window.retry_after)
    principal = principal_for_token(conn, settings, token)
    if principal is None:
        if key is not None:
            ratelimit.record(conn, key)
        raise unauthorized("invalid bearer token")
    return principal


def principal_for_token(conn: Connection, settings: Settings, token: str) -> Principal | None:
    """Whose token this is, or ``None``."""
    if settings.token and _equal(token, settings.token):
        return LEGACY_PRINCIPAL
    if settings.admin_token and _equal(token, settings.admin_token):
        return LEGACY_ADMIN_PRINCIPAL
    if token.startswith(TOKEN_PREFIX) and unstorable_reason(token) is None:
        return _managed(conn, settings, token)
    return None


def _managed(conn: Connection, settings: Settings, token: str) -> Principal | None:
    t, p, g = models.principal_tokens, models.principals, models.project_grants
    digest = hash_token(token, settings.token_pepper)
    grants = select(func.array_agg(g.c.project)).where(g.c.principal_id == p.c.id).scalar_subquery()
    rows = conn.execute(
        select(
            t.c.id.label("token_id"),
            t.c.token_hash,
            t.c.last_used_at,
            p.c.id,
            p.c.kind,
            p.c.role,
            p.c.username,
            p.c.display_name,
            grants.label("grants"),
        )
        .join(p, p.c.id == t.c.principal_id)
        .where(
            t.c.token_prefix == token_prefix(token),
            t.c.revoked_at.is_(None),
            p.c.enabled.is_(True),
        )
    ).all()
    for row in rows:
        if hmac.compare_digest(bytes(row.token_hash), digest):
            now = datetime.now(UTC)
            if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
                conn.execute(
                    update(t).where(t.c.id == row.token_id).values(last_used_at=func.now())
                )
            return Principal(
                kind=row.kind,
                role=row.role,
                source=SOURCE_MANAGED,
                username=row.username,
                display_name=row.display_name,
                id=row.id,
                token_id=row.token_id,
                grants=frozenset(row.grants or ()),
            )
    return None


# --- projects --------------------------------------------------------------------------------


def normalize_project_name(raw: object) -> str:
    """The server's form of a project name ('' when missing or blank)."""
    return project_name(raw) if isinstance(raw, str) else ""


def can_access(settings: Settings, principal: Principal, project: str) -> bool:
    """Whether ``principal`` may push to and pull from ``project`` (normalized, non-empty)."""
    if not settings.project_allowed(project):
        return False
    if principal.grants is None:
        return True
    return ALL_PROJECTS in principal.grants or project in principal.grants


def require_projects(settings: Settings, principal: Principal, projects: set[str]) -> None:
    """403 unless every project is allowed for the caller."""
    if not settings.allowed_projects:
        raise forbidden("forbidden: cloud project allowlist is not configured")
    denied = sorted(p for p in projects if not can_access(settings, principal, p))
    if denied:
        # Name at most a few (shortened): the caller sent them, but error bodies stay small.
        raise forbidden(projects=[p[:200] for p in denied[:20]])


def readable_projects(settings: Settings, principal: Principal) -> frozenset[str] | None:
    """The projects a pull may return: ``None`` = every project, else the exact set."""
    allow_all = settings.allows_every_project
    granted = principal.grants
    if granted is None or ALL_PROJECTS in granted:
        return None if allow_all else frozenset(settings.allowed_projects)
    if allow_all:
        return frozenset(granted)
    return frozenset(granted & settings.allowed_projects)
