"""Authentication and authorization for each kind of caller, through the real app."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine, select

from engram_cloud import models
from engram_cloud.auth import hash_token, parse_bearer, readable_projects, token_prefix
from engram_cloud.errors import ApiError
from engram_cloud.principals import CLI_ACTOR, revoke_token, set_enabled
from engram_cloud.settings import Settings, parse_allowlist
from tests.support.cloud import ADMIN_TOKEN, LEGACY_TOKEN, bearer


def test_health_needs_no_auth(client: TestClient) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"service": "engram-cloud", "status": "ok"}
    ready = client.get("/health/ready")
    assert ready.status_code == 200 and ready.json()["database"] == "ok"


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing authorization header"),
        ("", "missing authorization header"),
        ("Basic dXNlcjpwYXNz", "authorization must use Bearer token"),
        ("Bearer", "bearer token is required"),
        ("Bearer one two", "bearer token is required"),
        ("Bearer wrong-token", "invalid bearer token"),
        ("Bearer egt_AAAAAAAAwrong", "invalid bearer token"),
    ],
)
def test_bad_credentials_get_401_envelopes(
    client: TestClient, header: str | None, reason: str
) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = client.get("/api/v1/whoami", headers=headers)
    assert response.status_code == 401
    assert response.json() == {
        "error_class": "policy",
        "error_code": "auth_required",
        "error": f"unauthorized: {reason}",
    }
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_bearer_scheme_is_case_insensitive() -> None:
    assert parse_bearer("  bearer   abc ") == "abc"
    with pytest.raises(ApiError):
        parse_bearer("Token abc")


def test_legacy_tokens(client: TestClient) -> None:
    legacy = client.get("/api/v1/whoami", headers=bearer(LEGACY_TOKEN)).json()
    assert legacy["kind"] == "legacy" and legacy["role"] == "member"
    assert legacy["projects"] == "*" and legacy["source"] == "legacy_env"
    admin = client.get("/api/v1/whoami", headers=bearer(ADMIN_TOKEN)).json()
    assert admin["role"] == "admin" and admin["source"] == "legacy_admin_env"


def test_managed_token_sees_only_its_grants(
    client: TestClient, make_user: Callable[..., str], engine: Engine, settings: Settings
) -> None:
    token = make_user("alice", ["Acme", "widgets"])
    me = client.get("/api/v1/whoami", headers=bearer(token)).json()
    assert me["username"] == "alice" and me["kind"] == "human" and me["role"] == "member"
    assert me["projects"] == ["acme", "widgets"] and me["source"] == "managed_token"
    with engine.connect() as conn:
        row = conn.execute(select(models.principal_tokens)).one()
    # Stored: the public prefix and a peppered hash, never the token itself.
    assert row.token_prefix == token_prefix(token) and bytes(row.token_hash) == hash_token(
        token, settings.token_pepper
    )
    assert token not in repr(tuple(row))
    assert row.last_used_at is not None


def test_no_grant_means_no_project(client: TestClient, make_user: Callable[..., str]) -> None:
    token = make_user("bob")
    assert client.get("/api/v1/whoami", headers=bearer(token)).json()["projects"] == []


def test_revoked_token_and_disabled_user_are_refused(
    client: TestClient, make_user: Callable[..., str], engine: Engine
) -> None:
    carol = make_user("carol", ["acme"])
    dave = make_user("dave", ["acme"])
    assert client.get("/api/v1/whoami", headers=bearer(carol)).status_code == 200
    with engine.begin() as conn:
        token_id = conn.execute(
            select(models.principal_tokens.c.id).where(
                models.principal_tokens.c.token_prefix == token_prefix(carol)
            )
        ).scalar_one()
        revoke_token(conn, CLI_ACTOR, token_id, reason="left the team")
        set_enabled(conn, CLI_ACTOR, "dave", False)
    for token in (carol, dave):
        response = client.get("/api/v1/whoami", headers=bearer(token))
        assert response.status_code == 401
        assert response.json()["error"] == "unauthorized: invalid bearer token"


def test_a_token_with_another_pepper_is_refused(
    make_client: Callable[..., TestClient], make_user: Callable[..., str]
) -> None:
    token = make_user("erin", ["acme"])
    other = make_client(token_pepper=b"x" * 32)
    assert other.get("/api/v1/whoami", headers=bearer(token)).status_code == 401


def test_insecure_mode_needs_no_header(make_client: Callable[..., TestClient]) -> None:
    client = make_client(insecure=True, token=None, admin_token=None)
    me = client.get("/api/v1/whoami").json()
    assert me["kind"] == "insecure" and me["role"] == "admin" and me["mode"] == "insecure"


def test_allowlist_bounds_grants(
    make_client: Callable[..., TestClient], make_user: Callable[..., str]
) -> None:
    client = make_client(allowed_projects=parse_allowlist("acme,widgets"))
    token = make_user("frank", ["widgets", "secret"])
    star = make_user("grace", ["*"])
    assert client.get("/api/v1/whoami", headers=bearer(token)).json()["projects"] == ["widgets"]
    assert client.get("/api/v1/whoami", headers=bearer(star)).json()["projects"] == [
        "acme",
        "widgets",
    ]
    assert client.get("/api/v1/whoami", headers=bearer(LEGACY_TOKEN)).json()["projects"] == [
        "acme",
        "widgets",
    ]


def test_readable_projects_with_star_everywhere(settings: Settings) -> None:
    from engram_cloud.auth import LEGACY_PRINCIPAL

    assert readable_projects(settings, LEGACY_PRINCIPAL) is None


def test_unknown_route_and_wrong_method_get_envelopes(client: TestClient) -> None:
    missing = client.get("/no/such/route")
    assert missing.status_code == 404
    assert missing.json() == {
        "error_class": "invalid_request",
        "error_code": "not_found",
        "error": "404 page not found",
    }
    wrong = client.delete("/health")
    assert wrong.status_code == 405 and wrong.json()["error_code"] == "method_not_allowed"
