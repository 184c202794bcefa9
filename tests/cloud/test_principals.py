"""Managing users, tokens and grants (the functions behind the CLI and the admin API)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram_cloud import models
from engram_cloud.principals import (
    CLI_ACTOR,
    create_principal,
    get_principal,
    grant,
    issue_token,
    list_grants,
    list_principals,
    list_tokens,
    revoke_grant,
    revoke_token,
    set_enabled,
)
from engram_cloud.settings import Settings


def test_user_lifecycle_with_audit(engine: Engine, settings: Settings) -> None:
    with engine.begin() as conn:
        user = create_principal(
            conn, CLI_ACTOR, "alice", email="alice@example.com", role="admin", display_name="Alice"
        )
        assert user["username"] == "alice" and user["role"] == "admin" and user["enabled"]
        assert user["display_name"] == "Alice" and user["created_at"].endswith("Z")
        robot = create_principal(conn, CLI_ACTOR, "ci-bot", kind="service_account")
        assert robot["display_name"] == "ci-bot" and robot["kind"] == "service_account"
        assert [u["username"] for u in list_principals(conn)] == ["alice", "ci-bot"]
        assert get_principal(conn, user["principal_id"]) == get_principal(conn, "alice")

        raw, meta = issue_token(conn, CLI_ACTOR, settings.token_pepper, "alice", name="laptop")
        assert raw.startswith("egt_") and len(raw) > 40
        assert meta["token_prefix"] == raw[:12] and "token_hash" not in meta
        assert [t["id"] for t in list_tokens(conn, "alice")] == [meta["id"]]
        revoked = revoke_token(conn, CLI_ACTOR, meta["id"], reason="rotated")
        assert revoked["revoked_at"] and revoked["revocation_reason"] == "rotated"
        assert revoke_token(conn, CLI_ACTOR, meta["id"])["revoked_at"] == revoked["revoked_at"]

        g = grant(conn, CLI_ACTOR, "alice", "  Acme--Web ")
        assert g["project"] == "acme-web"
        grant(conn, CLI_ACTOR, "alice", "acme-web")  # twice is harmless
        grant(conn, CLI_ACTOR, "alice", "*")
        assert [x["project"] for x in list_grants(conn, "alice")] == ["*", "acme-web"]
        assert revoke_grant(conn, CLI_ACTOR, "alice", "acme-web")["status"] == "ok"
        with pytest.raises(NotFoundError):
            revoke_grant(conn, CLI_ACTOR, "alice", "acme-web")
        assert not set_enabled(conn, CLI_ACTOR, "alice", False)["enabled"]

        actions = (
            conn.execute(
                select(models.auth_audit_log.c.action).order_by(models.auth_audit_log.c.id)
            )
            .scalars()
            .all()
        )
    assert actions == [
        "create_user",
        "create_user",
        "issue_token",
        "revoke_token",
        "grant_project",
        "grant_project",
        "grant_project",
        "revoke_project",
        "disable_user",
    ]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"username": ""}, ValidationError),
        ({"username": "has space"}, ValidationError),
        ({"username": "x'; DROP TABLE cloud_principals; --"}, ValidationError),
        ({"username": "ok", "role": "owner"}, ValidationError),
        ({"username": "ok", "kind": "robot"}, ValidationError),
        ({"username": "ok", "email": "not-an-address"}, ValidationError),
        ({"username": "ok", "display_name": "x" * 201}, ValidationError),
    ],
)
def test_bad_user_input_is_refused(engine: Engine, kwargs: dict, error: type) -> None:
    username = kwargs.pop("username")
    with engine.begin() as conn, pytest.raises(error):
        create_principal(conn, CLI_ACTOR, username, **kwargs)


def test_duplicates_conflict_and_unknowns_are_not_found(engine: Engine, settings: Settings) -> None:
    with engine.begin() as conn:
        create_principal(conn, CLI_ACTOR, "alice", email="a@example.com")
        with pytest.raises(ConflictError):
            create_principal(conn, CLI_ACTOR, "alice")
        with pytest.raises(ConflictError):
            create_principal(conn, CLI_ACTOR, "other", email="a@example.com")
        # The transaction survives a refused insert (savepoint): later writes still work.
        create_principal(conn, CLI_ACTOR, "bob")
        for call in (
            lambda: get_principal(conn, "nobody"),
            lambda: get_principal(conn, 9999),
            lambda: revoke_token(conn, CLI_ACTOR, 9999),
            lambda: issue_token(conn, CLI_ACTOR, settings.token_pepper, "nobody"),
            lambda: grant(conn, CLI_ACTOR, "nobody", "acme"),
        ):
            with pytest.raises(NotFoundError):
                call()
        with pytest.raises(ValidationError):
            grant(conn, CLI_ACTOR, "bob", "   ")
