"""The managed-identity admin JSON API (docs/cloud.md, "Who may do what"), plus project pause and the sync audit
log: ``/admin/users``, ``/admin/users/{id}/tokens|grants``, ``/admin/tokens/{id}/revoke``,
``/admin/projects``, ``/admin/audit-log``.

Project names may contain ``/`` (``org/repo``), so the two routes that carry one in the path
take the rest of it: ``POST /admin/projects/{project…}/sync`` and
``POST /admin/users/{id}/grants/{project…}/revoke`` (literal or percent-encoded slashes both
work).

Handlers are ``async`` and run their transaction on a worker thread (litestar 2.25 mis-wraps
two ``sync_to_thread`` handlers that share a path and return a ``Response``). Every route needs
an admin (the :func:`~engram_cloud.api.access.require_admin` guard): a managed principal with
role ``admin``, the legacy
``ENGRAM_CLOUD_ADMIN`` token, or insecure mode. ``{id}`` is a principal id or a username. A new
token's raw value is in the answer of its creation only.
"""

from __future__ import annotations

from typing import Any

import anyio
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, RawBody

from engram.record import find_unstorable
from engram_cloud import controls, principals
from engram_cloud.api.access import require_admin
from engram_cloud.auth import Principal, normalize_project_name
from engram_cloud.bodies import read_small_json
from engram_cloud.errors import ApiError, invalid_request, json_response
from engram_cloud.guards import bigint
from engram_cloud.principals import Actor


def _body(request: Request, body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    doc = read_small_json(request, body)
    if not isinstance(doc, dict):
        raise invalid_request("payload_invalid", "the body must be a JSON object")
    problem = find_unstorable(doc, "body")
    if problem:
        raise invalid_request("payload_invalid", problem)
    return doc


def _name_before(rest: str, action: str) -> str:
    """The project name of a ``{rest:path}`` tail ``<name>/<action>`` (404 otherwise)."""
    tail = rest.strip("/")
    name = tail.removesuffix("/" + action) if tail.endswith("/" + action) else ""
    if not name:
        raise ApiError(404, "invalid_request", "not_found", "404 page not found")
    return name


def _string(doc: dict[str, Any], name: str, default: str | None = None) -> str | None:
    value = doc.get(name, default)
    if value is not None and not isinstance(value, str):
        raise invalid_request("payload_invalid", f"{name} must be a string")
    return value


async def _run(request: Request, action: Any) -> Any:
    """``action(conn)`` in one transaction, on a worker thread."""

    def run() -> Any:
        with request.app.state.engine.begin() as conn:
            return action(conn)

    return await anyio.to_thread.run_sync(run)


@get("/admin/users", guards=[require_admin])
async def users(request: Request) -> Response[bytes]:
    return json_response({"users": await _run(request, principals.list_principals)})


@post("/admin/users", status_code=201, guards=[require_admin])
async def create_user(
    request: Request, body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    doc = _body(request, body)
    user = await _run(
        request,
        lambda conn: principals.create_principal(
            conn,
            Actor.of(principal),
            _string(doc, "username") or "",
            kind=_string(doc, "kind", "human") or "human",
            role=_string(doc, "role", "member") or "member",
            email=_string(doc, "email"),
            display_name=_string(doc, "display_name"),
        ),
    )
    return json_response(user, 201)


@get("/admin/users/{user:str}", guards=[require_admin])
async def user_detail(request: Request, user: FromPath[str]) -> Response[bytes]:
    return json_response(await _run(request, lambda conn: principals.get_principal(conn, user)))


async def _set_enabled(
    request: Request, user: str, principal: Principal, enabled: bool
) -> Response[bytes]:
    found = await _run(
        request, lambda conn: principals.set_enabled(conn, Actor.of(principal), user, enabled)
    )
    return json_response(
        {"status": "ok", "principal_id": found["principal_id"], "enabled": found["enabled"]}
    )


@post("/admin/users/{user:str}/enable", status_code=200, guards=[require_admin])
async def enable_user(
    request: Request, user: FromPath[str], principal: NamedDependency[Principal]
) -> Response[bytes]:
    return await _set_enabled(request, user, principal, True)


@post("/admin/users/{user:str}/disable", status_code=200, guards=[require_admin])
async def disable_user(
    request: Request, user: FromPath[str], principal: NamedDependency[Principal]
) -> Response[bytes]:
    return await _set_enabled(request, user, principal, False)


@get("/admin/users/{user:str}/tokens", guards=[require_admin])
async def tokens(request: Request, user: FromPath[str]) -> Response[bytes]:
    return json_response(
        {"tokens": await _run(request, lambda conn: principals.list_tokens(conn, user))}
    )


@post("/admin/users/{user:str}/tokens", status_code=201, guards=[require_admin])
async def issue_token(
    request: Request, user: FromPath[str], body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    name = _string(_body(request, body), "name", "") or ""
    pepper = request.app.state.settings.token_pepper
    raw, meta = await _run(
        request,
        lambda conn: principals.issue_token(conn, Actor.of(principal), pepper, user, name=name),
    )
    return json_response({"raw_token": raw, "token": meta}, 201)


@post("/admin/tokens/{token_id:int}/revoke", status_code=200, guards=[require_admin])
async def revoke_token(
    request: Request, token_id: FromPath[int], body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    reason = _string(_body(request, body), "reason")
    meta = await _run(
        request,
        lambda conn: principals.revoke_token(conn, Actor.of(principal), token_id, reason=reason),
    )
    return json_response({"status": "ok", "token_id": meta["id"], "revoked_at": meta["revoked_at"]})


@get("/admin/users/{user:str}/grants", guards=[require_admin])
async def grants(request: Request, user: FromPath[str]) -> Response[bytes]:
    return json_response(
        {"grants": await _run(request, lambda conn: principals.list_grants(conn, user))}
    )


@post("/admin/users/{user:str}/grants", status_code=201, guards=[require_admin])
async def grant(
    request: Request, user: FromPath[str], body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    project = _string(_body(request, body), "project") or ""
    found = await _run(
        request, lambda conn: principals.grant(conn, Actor.of(principal), user, project)
    )
    return json_response(found, 201)


@post("/admin/users/{user:str}/grants/{rest:path}", status_code=200, guards=[require_admin])
async def revoke_grant(
    request: Request,
    user: FromPath[str],
    rest: FromPath[str],
    principal: NamedDependency[Principal],
) -> Response[bytes]:
    """``…/grants/{project}/revoke``; the project may contain slashes."""
    project = _name_before(rest, "revoke")
    found = await _run(
        request, lambda conn: principals.revoke_grant(conn, Actor.of(principal), user, project)
    )
    return json_response(found)


@get("/admin/projects", guards=[require_admin])
async def projects(request: Request) -> Response[bytes]:
    return json_response({"projects": await _run(request, controls.list_controls)})


@post("/admin/projects/{rest:path}", status_code=200, guards=[require_admin])
async def project_sync(
    request: Request, rest: FromPath[str], body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    """``/admin/projects/{project}/sync``: pause (``{"enabled": false, "reason": …}``) or
    resume a project's pushes; the project may contain slashes."""
    project = _name_before(rest, "sync")
    doc = _body(request, body)
    enabled = doc.get("enabled")
    if not isinstance(enabled, bool):
        raise invalid_request("payload_invalid", "enabled must be true or false")
    name = normalize_project_name(project)
    if not name:
        raise invalid_request("empty_project", "project is required")
    reason = _string(doc, "reason")
    control = await _run(
        request,
        lambda conn: controls.set_sync_enabled(
            conn, name, enabled, reason=reason, updated_by=principal.label
        ),
    )
    return json_response(control)


@get("/admin/audit-log", guards=[require_admin])
async def audit_log(
    request: Request,
    limit: FromQuery[str | None] = None,
    project: FromQuery[str | None] = None,
    contributor: FromQuery[str | None] = None,
    outcome: FromQuery[str | None] = None,
) -> Response[bytes]:
    """The newest audit rows (``limit`` 1…1000, default 100), filtered by project, contributor
    and outcome."""
    rows_wanted = bigint(limit or "100", "limit", minimum=1)
    if rows_wanted > 1000:
        raise invalid_request("invalid_parameter", "limit must be between 1 and 1000")
    name = normalize_project_name(project) or None
    rows = await _run(
        request,
        lambda conn: controls.audit_rows(
            conn,
            project=name,
            contributor=contributor or None,
            outcome=outcome or None,
            limit=rows_wanted,
        ),
    )
    return json_response({"audit": rows})


ROUTES = [
    users,
    create_user,
    user_detail,
    enable_user,
    disable_user,
    tokens,
    issue_token,
    revoke_token,
    grants,
    grant,
    revoke_grant,
    projects,
    project_sync,
    audit_log,
]
