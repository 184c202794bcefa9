"""Managing principals (users and service accounts), their tokens and their project grants.

One implementation for the CLI (``engram cloud admin …``) and the admin JSON API; every change
writes a row to ``cloud_auth_audit_log``. Raw tokens are returned exactly once, at creation;
only their prefix and peppered hash are stored. Functions take an open connection and run in
the caller's transaction; errors are :mod:`engram.errors` exceptions (400/404/409).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.text import unstorable_reason
from engram.times import iso
from engram_cloud import models
from engram_cloud.auth import Principal, hash_token, new_token, normalize_project_name, token_prefix
from engram_cloud.settings import ALL_PROJECTS

KINDS = ("human", "service_account")
ROLES = ("admin", "member")
_USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")


@dataclass(frozen=True, slots=True)
class Actor:
    """Who makes a change, for the audit log."""

    principal_id: int | None
    source: str

    @classmethod
    def of(cls, principal: Principal) -> Actor:
        return cls(principal.id, principal.source)


CLI_ACTOR = Actor(None, "cli")


def _now() -> datetime:
    return datetime.now(UTC)


def storable(value: str | None, field: str) -> str | None:
    """``value``, or :class:`ValidationError` when PostgreSQL cannot store it (NUL…)."""
    problem = unstorable_reason(value) if value else None
    if problem:
        raise ValidationError(f"{field} {problem}", field=field)
    return value


def audit(
    conn: Connection,
    actor: Actor,
    action: str,
    *,
    outcome: str = "ok",
    target: int | None = None,
    project: str | None = None,
    reason: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        insert(models.auth_audit_log).values(
            actor_principal_id=actor.principal_id,
            actor_source=actor.source,
            target_principal_id=target,
            project=project,
            action=action,
            outcome=outcome,
            reason_code=reason,
            metadata=metadata,
        )
    )


# --- shapes ------------------------------------------------------------------------------------


def user_dict(row: Row) -> dict[str, Any]:
    return {
        "principal_id": row.id,
        "kind": row.kind,
        "username": row.username,
        "email": row.email,
        "display_name": row.display_name,
        "role": row.role,
        "enabled": row.enabled,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }


def token_dict(row: Row) -> dict[str, Any]:
    return {
        "id": row.id,
        "principal_id": row.principal_id,
        "token_prefix": row.token_prefix,
        "name": row.name,
        "created_by_principal_id": row.created_by_principal_id,
        "created_at": iso(row.created_at),
        "last_used_at": iso(row.last_used_at),
        "revoked_at": iso(row.revoked_at),
        "revoked_by_principal_id": row.revoked_by_principal_id,
        "revocation_reason": row.revocation_reason,
    }


def grant_dict(row: Row) -> dict[str, Any]:
    return {
        "principal_id": row.principal_id,
        "project": row.project,
        "granted_by_principal_id": row.granted_by_principal_id,
        "created_at": iso(row.created_at),
    }


# --- principals --------------------------------------------------------------------------------


def create_principal(
    conn: Connection,
    actor: Actor,
    username: str,
    *,
    kind: str = "human",
    role: str = "member",
    email: str | None = None,
    display_name: str | None = None,
) -> dict[str, Any]:
    username = (username or "").strip()
    storable(email, "email")
    storable(display_name, "display_name")
    if not _USERNAME.fullmatch(username):
        raise ValidationError(
            "username must be 1-128 characters: letters, digits and . _ @ + - "
            "(starting with a letter or digit)",
            field="username",
        )
    if kind not in KINDS:
        raise ValidationError(f"kind must be one of {', '.join(KINDS)}", field="kind")
    if role not in ROLES:
        raise ValidationError(f"role must be one of {', '.join(ROLES)}", field="role")
    email = (email or "").strip() or None
    if email is not None and (
        len(email) > 254 or "@" not in email or any(c.isspace() for c in email)
    ):
        raise ValidationError("email is not an address", field="email")
    display = (display_name or "").strip() or username
    if len(display) > 200:
        raise ValidationError("display_name is longer than 200 characters", field="display_name")
    p = models.principals
    try:
        with conn.begin_nested():
            row = conn.execute(
                insert(p)
                .values(kind=kind, username=username, email=email, display_name=display, role=role)
                .returning(*p.c)
            ).one()
    except IntegrityError:
        raise ConflictError(
            f"a user named {username!r} or with that email already exists"
        ) from None
    audit(conn, actor, "create_user", target=row.id, metadata={"username": username, "role": role})
    return user_dict(row)


MAX_ID = 2**63 - 1  # PostgreSQL bigint: a larger "id" can name nothing


def _as_id(text_ref: str) -> int | None:
    """``text_ref`` as a principal id: ASCII digits within bigint range (``int()`` would also
    read "٣", and fail on "²", which ``isdigit`` accepts)."""
    if not (text_ref.isascii() and text_ref.isdigit()) or len(text_ref) > 19:
        return None
    value = int(text_ref)
    return value if value <= MAX_ID else None


def get_principal(conn: Connection, ref: int | str) -> dict[str, Any]:
    """A principal by id or by username."""
    p = models.principals
    text_ref = str(ref).strip()
    if "\x00" in text_ref or len(text_ref) > 255:
        raise NotFoundError(f"no user {text_ref[:100]!r}")
    found_id = _as_id(text_ref)
    where = p.c.id == found_id if found_id is not None else p.c.username == text_ref
    row = conn.execute(select(p).where(where)).first()
    if row is None:
        raise NotFoundError(f"no user {text_ref[:100]!r}")
    return user_dict(row)


def list_principals(conn: Connection) -> list[dict[str, Any]]:
    p = models.principals
    return [user_dict(r) for r in conn.execute(select(p).order_by(p.c.id))]


def set_enabled(conn: Connection, actor: Actor, ref: int | str, enabled: bool) -> dict[str, Any]:
    user = get_principal(conn, ref)
    p = models.principals
    conn.execute(
        update(p).where(p.c.id == user["principal_id"]).values(enabled=enabled, updated_at=_now())
    )
    audit(conn, actor, "enable_user" if enabled else "disable_user", target=user["principal_id"])
    return {**user, "enabled": enabled}


# --- tokens ------------------------------------------------------------------------------------


def issue_token(
    conn: Connection, actor: Actor, pepper: bytes, ref: int | str, *, name: str = ""
) -> tuple[str, dict[str, Any]]:
    """A new token for a principal: ``(raw token — shown once, metadata)``."""
    user = get_principal(conn, ref)
    if len(name) > 200:
        raise ValidationError("token name is longer than 200 characters", field="name")
    storable(name, "name")
    raw = new_token()
    t = models.principal_tokens
    row = conn.execute(
        insert(t)
        .values(
            principal_id=user["principal_id"],
            token_prefix=token_prefix(raw),
            token_hash=hash_token(raw, pepper),
            name=name.strip(),
            created_by_principal_id=actor.principal_id,
        )
        .returning(*t.c)
    ).one()
    audit(conn, actor, "issue_token", target=user["principal_id"], metadata={"token_id": row.id})
    return raw, token_dict(row)


def list_tokens(conn: Connection, ref: int | str) -> list[dict[str, Any]]:
    user = get_principal(conn, ref)
    t = models.principal_tokens
    rows = conn.execute(select(t).where(t.c.principal_id == user["principal_id"]).order_by(t.c.id))
    return [token_dict(r) for r in rows]


def revoke_token(
    conn: Connection, actor: Actor, token_id: int, *, reason: str | None = None
) -> dict[str, Any]:
    storable(reason, "reason")
    t = models.principal_tokens
    found = token_id if 0 < token_id <= MAX_ID else None
    row = None if found is None else conn.execute(select(t).where(t.c.id == found)).first()
    if row is None:
        raise NotFoundError(f"no token with id {str(token_id)[:30]}")
    if row.revoked_at is None:
        row = conn.execute(
            update(t)
            .where(t.c.id == token_id)
            .values(
                revoked_at=_now(),
                revoked_by_principal_id=actor.principal_id,
                revocation_reason=(reason or "").strip() or None,
            )
            .returning(*t.c)
        ).one()
        audit(conn, actor, "revoke_token", target=row.principal_id, metadata={"token_id": token_id})
    return token_dict(row)


# --- grants ------------------------------------------------------------------------------------


def grant_project_name(raw: str) -> str:
    if isinstance(raw, str) and raw.strip() == ALL_PROJECTS:
        return ALL_PROJECTS
    name = normalize_project_name(raw)
    if not name:
        raise ValidationError("project is required", field="project")
    storable(name, "project")
    if len(name) > 200:
        raise ValidationError("project name is longer than 200 characters", field="project")
    return name


def grant(conn: Connection, actor: Actor, ref: int | str, project: str) -> dict[str, Any]:
    """Grant a project (or ``*``) to a principal; granting twice is harmless."""
    user = get_principal(conn, ref)
    name = grant_project_name(project)
    g = models.project_grants
    conn.execute(
        pg_insert(g)
        .values(
            principal_id=user["principal_id"],
            project=name,
            granted_by_principal_id=actor.principal_id,
        )
        .on_conflict_do_nothing()
    )
    row = conn.execute(
        select(g).where(g.c.principal_id == user["principal_id"], g.c.project == name)
    ).one()
    audit(conn, actor, "grant_project", target=user["principal_id"], project=name)
    return grant_dict(row)


def revoke_grant(conn: Connection, actor: Actor, ref: int | str, project: str) -> dict[str, Any]:
    user = get_principal(conn, ref)
    name = grant_project_name(project)
    g = models.project_grants
    deleted = conn.execute(
        delete(g).where(g.c.principal_id == user["principal_id"], g.c.project == name)
    ).rowcount
    if not deleted:
        raise NotFoundError(f"user {user['username']!r} has no grant for {name!r}")
    audit(conn, actor, "revoke_project", target=user["principal_id"], project=name)
    return {"status": "ok", "principal_id": user["principal_id"], "project": name}


def list_grants(conn: Connection, ref: int | str) -> list[dict[str, Any]]:
    user = get_principal(conn, ref)
    g = models.project_grants
    rows = conn.execute(
        select(g).where(g.c.principal_id == user["principal_id"]).order_by(g.c.project)
    )
    return [grant_dict(r) for r in rows]
