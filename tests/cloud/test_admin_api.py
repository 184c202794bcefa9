"""The admin JSON API (users, tokens, grants, project pause, audit) and who may use it."""

from __future__ import annotations

from collections.abc import Callable

from litestar.testing import TestClient

from tests.cloud import records as rec
from tests.support.cloud import ADMIN_TOKEN, LEGACY_TOKEN, bearer


def test_bootstrap_a_team_through_the_api(
    client: TestClient, make_user: Callable[..., str]
) -> None:
    admin = bearer(make_user("root", role="admin"))
    created = client.post(
        "/admin/users",
        json={"username": "carol", "email": "c@example.com", "display_name": "Carol"},
        headers=admin,
    )
    assert created.status_code == 201
    user = created.json()
    assert user["username"] == "carol" and user["role"] == "member" and user["enabled"]
    robot = client.post(
        "/admin/users", json={"username": "ci", "kind": "service_account"}, headers=admin
    ).json()
    assert robot["kind"] == "service_account"
    listed = client.get("/admin/users", headers=admin).json()["users"]
    assert [u["username"] for u in listed] == ["root", "carol", "ci"]
    assert client.get("/admin/users/carol", headers=admin).json() == user

    issued = client.post("/admin/users/carol/tokens", json={"name": "laptop"}, headers=admin)
    assert issued.status_code == 201
    raw, meta = issued.json()["raw_token"], issued.json()["token"]
    assert raw.startswith(meta["token_prefix"]) and meta["name"] == "laptop"
    listed_tokens = client.get(f"/admin/users/{user['principal_id']}/tokens", headers=admin).json()
    assert raw not in str(listed_tokens) and "token_hash" not in str(listed_tokens)

    carol = bearer(raw)
    record = rec.observation(project="acme")
    body = rec.push_body([record])
    assert client.post("/sync/mutations/push", json=body, headers=carol).status_code == 403
    grant = client.post("/admin/users/carol/grants", json={"project": "ACME"}, headers=admin)
    assert grant.status_code == 201 and grant.json()["project"] == "acme"
    assert (
        client.get("/admin/users/carol/grants", headers=admin).json()["grants"][0]["project"]
        == "acme"
    )
    assert client.post("/sync/mutations/push", json=body, headers=carol).status_code == 200
    revoked = client.post("/admin/users/carol/grants/acme/revoke", headers=admin)
    assert revoked.json() == {
        "status": "ok",
        "principal_id": user["principal_id"],
        "project": "acme",
    }
    assert (
        client.get("/sync/mutations/pull", params={"project": "acme"}, headers=carol).status_code
        == 403
    )

    disabled = client.post("/admin/users/carol/disable", headers=admin)
    assert disabled.json() == {
        "status": "ok",
        "principal_id": user["principal_id"],
        "enabled": False,
    }
    assert client.get("/api/v1/whoami", headers=carol).status_code == 401
    client.post("/admin/users/carol/enable", headers=admin)
    assert client.get("/api/v1/whoami", headers=carol).status_code == 200
    gone = client.post(f"/admin/tokens/{meta['id']}/revoke", json={"reason": "lost"}, headers=admin)
    assert gone.json()["status"] == "ok" and gone.json()["token_id"] == meta["id"]
    assert client.get("/api/v1/whoami", headers=carol).status_code == 401


def test_admin_errors(client: TestClient, make_user: Callable[..., str]) -> None:
    admin = bearer(make_user("root", role="admin"))
    for path, body, status, code in (
        ("/admin/users", {"username": "bad name"}, 400, "invalid_request"),
        ("/admin/users", {"username": 5}, 400, "payload_invalid"),
        ("/admin/users", {"username": "root"}, 409, "conflict"),
        ("/admin/users/nobody/tokens", {}, 404, "not_found"),
        ("/admin/tokens/999/revoke", {}, 404, "not_found"),
        ("/admin/users/root/grants", {"project": " "}, 400, "invalid_request"),
        ("/admin/users/root/grants/acme/revoke", None, 404, "not_found"),
        ("/admin/projects/acme/sync", {"enabled": "no"}, 400, "payload_invalid"),
    ):
        response = client.post(path, json=body, headers=admin)
        assert response.status_code == status, (path, response.text)
        assert response.json()["error_code"] == code, (path, response.json())
    broken = client.post("/admin/users", content=b"{nope", headers=admin)
    assert broken.status_code == 400
    assert client.get("/admin/tokens/abc/revoke", headers=admin).status_code in (404, 405)
    assert client.get("/admin/audit-log", params={"limit": "0"}, headers=admin).status_code == 400


def test_who_may_administer(
    make_client: Callable[..., TestClient], client: TestClient, make_user: Callable[..., str]
) -> None:
    member = bearer(make_user("dave", ["acme"]))
    for headers in (member, bearer(LEGACY_TOKEN)):
        denied = client.get("/admin/users", headers=headers)
        assert denied.status_code == 403
        assert denied.json()["error"] == "forbidden: admin role required"
    assert client.get("/admin/users").status_code == 401
    assert client.get("/admin/users", headers=bearer(ADMIN_TOKEN)).status_code == 200
    insecure = make_client(insecure=True, token=None, admin_token=None)
    assert insecure.get("/admin/users").status_code == 200


def test_pause_and_audit_through_the_api(client: TestClient) -> None:
    admin = bearer(ADMIN_TOKEN)
    paused = client.post(
        "/admin/projects/Acme/sync", json={"enabled": False, "reason": "audit"}, headers=admin
    ).json()
    assert paused["project"] == "acme" and not paused["sync_enabled"]
    assert paused["paused_reason"] == "audit" and paused["updated_by"] == "admin"
    push = client.post(
        "/sync/mutations/push",
        json=rec.push_body([rec.observation()]),
        headers=bearer(LEGACY_TOKEN),
    )
    assert push.status_code == 409
    assert client.get("/admin/projects", headers=admin).json()["projects"] == [paused]
    rows = client.get("/admin/audit-log", params={"project": "acme"}, headers=admin).json()["audit"]
    assert [(r["outcome"], r["reason_code"], r["contributor"]) for r in rows] == [
        ("rejected_project_paused", "sync-paused", "alice")
    ]
    resumed = client.post("/admin/projects/acme/sync", json={"enabled": True}, headers=admin).json()
    assert resumed["sync_enabled"] and resumed["paused_reason"] is None


def test_projects_with_slashes_can_be_paused_and_ungranted(
    client: TestClient, make_user: Callable[..., str]
) -> None:
    admin = bearer(ADMIN_TOKEN)
    member = bearer(make_user("dana", ["org/repo", "org/other"]))
    body = rec.push_body([rec.observation(project="org/repo")])
    paused = client.post(
        "/admin/projects/org/repo/sync", json={"enabled": False, "reason": "audit"}, headers=admin
    )
    assert paused.status_code == 200 and paused.json()["project"] == "org/repo"
    assert client.post("/sync/mutations/push", json=body, headers=member).status_code == 409
    resumed = client.post("/admin/projects/org%2Frepo/sync", json={"enabled": True}, headers=admin)
    assert resumed.status_code == 200 and resumed.json()["sync_enabled"] is True
    assert client.post("/sync/mutations/push", json=body, headers=member).status_code == 200

    revoked = client.post("/admin/users/dana/grants/org/repo/revoke", headers=admin)
    assert revoked.status_code == 200 and revoked.json()["project"] == "org/repo"
    assert client.post("/sync/mutations/push", json=body, headers=member).status_code == 403
    encoded = client.post("/admin/users/dana/grants/org%2Fother/revoke", headers=admin)
    assert encoded.status_code == 200 and encoded.json()["project"] == "org/other"
    for path in ("/admin/projects/org/repo", "/admin/users/dana/grants/org/repo/revoke/x"):
        missing = client.post(path, json={"enabled": False}, headers=admin)
        assert missing.status_code == 404 and missing.json()["error_code"] == "not_found"


def test_odd_ids_and_names_are_4xx(client: TestClient) -> None:
    admin = bearer(ADMIN_TOKEN)
    for path in ("/admin/users/²", "/admin/users/99999999999999999999", "/admin/users/%00"):
        answer = client.get(path, headers=admin)
        assert answer.status_code in (400, 404), path
        assert answer.json()["error_code"] in ("not_found", "invalid_parameter")
    huge = client.post("/admin/tokens/99999999999999999999/revoke", headers=admin)
    assert huge.status_code == 404
    pulled = client.get(
        "/sync/mutations/pull", params={"since": "99999999999999999999"}, headers=admin
    )
    assert pulled.status_code == 400
    assert pulled.json()["error"] == "since must be at most 9223372036854775807"
    named = client.post(
        "/admin/users", json={"username": "eve", "display_name": "E\x00ve"}, headers=admin
    )
    assert named.status_code == 400 and "NUL" in named.json()["error"]
