"""The dashboard's user admin pages (admins only): managed users with their tokens (a new token
is shown once, on the page that answers its creation) and project grants.

Changes go through the same functions as the admin JSON API and the CLI
(:mod:`engram_cloud.principals`), so they are validated and audited the same way; forms follow
:mod:`engram_cloud.dashboard.admin`'s rules (a 303 to the result, or the form again with the error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template
from sqlalchemy import Connection

from engram.errors import EngramError
from engram_cloud import principals
from engram_cloud.dashboard.admin import MAX_REASON_CHARS, Form, admin_page, done
from engram_cloud.dashboard.auth import Viewer
from engram_cloud.dashboard.common import tail
from engram_cloud.dashboard.errors import PageError, not_found
from engram_cloud.dashboard.render import with_query
from engram_cloud.principals import Actor


def _users(
    request: Request,
    admin: Viewer,
    db: Connection,
    *,
    error: str = "",
    form: dict[str, str] | None = None,
    status_code: int = 200,
) -> Template:
    return admin_page(
        request,
        admin,
        "admin/users.html",
        {
            "title": "Users",
            "users": principals.list_principals(db),
            "error": error,
            "form": form or {},
        },
        fragment="admin/partials/users_table.html",
        status_code=status_code,
    )


@get("/admin/users", sync_to_thread=True)
def admin_users(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _users(request, admin, db)


@get("/admin/users/list", sync_to_thread=True)
def admin_users_list(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection]
) -> Template:
    return _users(request, admin, db)


@post("/admin/users", sync_to_thread=True, status_code=303)
def admin_create_user(
    request: Request, admin: NamedDependency[Viewer], db: NamedDependency[Connection], data: Form
) -> Response[Any]:
    try:
        with request.app.state.engine.begin() as conn:
            user = principals.create_principal(
                conn,
                Actor.of(admin.principal),
                data.get("username", ""),
                kind=data.get("kind") or "human",
                role=data.get("role") or "member",
                email=data.get("email"),
                display_name=data.get("display_name"),
            )
    except EngramError as exc:
        return _users(request, admin, db, error=str(exc), form=data, status_code=exc.status_code)
    return done(
        request, with_query(f"/dashboard/admin/users/{user['principal_id']}", done="created")
    )


def _user_page(
    request: Request,
    admin: Viewer,
    db: Connection,
    ref: str,
    *,
    error: str = "",
    new_token: str = "",
    status_code: int = 200,
) -> Template:
    try:
        user = principals.get_principal(db, ref)
    except EngramError:
        raise not_found(f"There is no user {ref!r}.") from None
    return admin_page(
        request,
        admin,
        "admin/user.html",
        {
            "title": user["username"],
            "user": user,
            "tokens": principals.list_tokens(db, user["principal_id"]),
            "grants": principals.list_grants(db, user["principal_id"]),
            "error": error,
            "new_token": new_token,
        },
        status_code=status_code,
    )


@get("/admin/users/{user:str}", sync_to_thread=True)
def admin_user(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
) -> Template:
    return _user_page(request, admin, db, user)


#: A change to one user: ``(connection, actor, the user's principal id)``.
Change = Callable[[Connection, Actor, int], object]


def _change_user(
    request: Request, admin: Viewer, db: Connection, user: str, notice_code: str, change: Change
) -> Response[Any]:
    """Make ``change`` as ``admin`` and go to the user's page saying ``notice_code``, or show
    the page again with the error."""
    try:
        with request.app.state.engine.begin() as conn:
            found = principals.get_principal(conn, user)
            change(conn, Actor.of(admin.principal), found["principal_id"])
    except EngramError as exc:
        if exc.status_code == 404:
            raise not_found(str(exc)) from None
        # The page is read on the request's connection, which began before the change:
        # end its snapshot so it shows the current state.
        db.rollback()
        return _user_page(request, admin, db, user, error=str(exc), status_code=exc.status_code)
    return done(
        request, with_query(f"/dashboard/admin/users/{found['principal_id']}", done=notice_code)
    )


@post("/admin/users/{user:str}/enable", sync_to_thread=True, status_code=303)
def admin_enable_user(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
) -> Response[Any]:
    return _change_user(
        request, admin, db, user, "enabled",
        lambda conn, actor, uid: principals.set_enabled(conn, actor, uid, True),
    )  # fmt: skip


@post("/admin/users/{user:str}/disable", sync_to_thread=True, status_code=303)
def admin_disable_user(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
) -> Response[Any]:
    return _change_user(
        request, admin, db, user, "disabled",
        lambda conn, actor, uid: principals.set_enabled(conn, actor, uid, False),
    )  # fmt: skip


@post("/admin/users/{user:str}/tokens", sync_to_thread=True, status_code=200)
def admin_issue_token(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
    data: Form,
) -> Template:
    """Issue a token and show it — on this answer only (it is stored hashed)."""
    name = (data.get("name") or "").strip()
    pepper = request.app.state.settings.token_pepper
    try:
        with request.app.state.engine.begin() as conn:
            raw, _ = principals.issue_token(
                conn, Actor.of(admin.principal), pepper, user, name=name
            )
    except EngramError as exc:
        if exc.status_code == 404:
            raise not_found(str(exc)) from None
        return _user_page(request, admin, db, user, error=str(exc), status_code=exc.status_code)
    db.rollback()  # see _change_user: read the state after the commit above
    return _user_page(request, admin, db, user, new_token=raw)


@post("/admin/tokens/{token_id:int}/revoke", sync_to_thread=True, status_code=303)
def admin_revoke_token(
    request: Request, token_id: FromPath[int], admin: NamedDependency[Viewer], data: Form
) -> Response[Any]:
    reason = (data.get("reason") or "").strip()
    if len(reason) > MAX_REASON_CHARS:
        raise PageError(
            400, "Bad request", f"the reason is longer than {MAX_REASON_CHARS} characters"
        )
    try:
        with request.app.state.engine.begin() as conn:
            meta = principals.revoke_token(conn, Actor.of(admin.principal), token_id, reason=reason)
    except EngramError as exc:
        raise not_found(str(exc)) from None
    return done(
        request, with_query(f"/dashboard/admin/users/{meta['principal_id']}", done="revoked")
    )


@post("/admin/users/{user:str}/grants", sync_to_thread=True, status_code=303)
def admin_grant(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
    data: Form,
) -> Response[Any]:
    project = data.get("project") or ""
    return _change_user(
        request, admin, db, user, "granted",
        lambda conn, actor, uid: principals.grant(conn, actor, uid, project),
    )  # fmt: skip


@post("/admin/users/{user:str}/grants/{rest:path}", sync_to_thread=True, status_code=303)
def admin_revoke_grant(
    request: Request,
    user: FromPath[str],
    admin: NamedDependency[Viewer],
    db: NamedDependency[Connection],
) -> Response[Any]:
    parts = tail(request, f"/dashboard/admin/users/{user}/grants/")
    if len(parts) != 2 or parts[1] != "revoke":
        raise not_found("There is no dashboard page at this address.")
    return _change_user(
        request, admin, db, user, "ungranted",
        lambda conn, actor, uid: principals.revoke_grant(conn, actor, uid, parts[0]),
    )  # fmt: skip


ROUTES = [
    admin_users,
    admin_users_list,
    admin_create_user,
    admin_user,
    admin_enable_user,
    admin_disable_user,
    admin_issue_token,
    admin_revoke_token,
    admin_grant,
    admin_revoke_grant,
]
