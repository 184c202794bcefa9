"""Status codes not covered elsewhere: the database unreachable (readiness 503, sync 503),
a chunk id clash (409), credentials on every route family, service accounts, and hostile
query strings."""

from __future__ import annotations

from collections.abc import Callable

import orjson
from litestar.testing import TestClient
from sqlalchemy import Engine, insert

from engram_cloud import models
from engram_cloud.legacy import canonical_chunk
from tests.cloud import records as rec
from tests.support import free_port
from tests.support.cloud import LEGACY_TOKEN, bearer

AUTH = bearer(LEGACY_TOKEN)


def test_database_unreachable(make_client: Callable[..., TestClient]) -> None:
    client = make_client(database_url=f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none")
    assert client.get("/health").status_code == 200  # liveness needs no database
    ready = client.get("/health/ready")
    assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
    push = client.post(
        "/sync/mutations/push", json=rec.push_body([rec.observation()]), headers=AUTH
    )
    assert push.status_code == 503
    assert push.json()["error_code"] == "database_unavailable"
    assert push.headers["retry-after"] == "1"
    assert client.get("/sync/mutations/pull", headers=AUTH).status_code == 503


def test_chunk_id_clash_is_a_conflict(client: TestClient, engine: Engine) -> None:
    data = {"sessions": [{"id": "s-1", "directory": "/src"}]}
    first = client.post("/sync/push", json={"project": "acme", "data": data}, headers=AUTH).json()
    other = {"sessions": [{"id": "s-2", "directory": "/src"}]}
    clash_id, _, _ = canonical_chunk(other, "acme")
    with engine.begin() as conn:  # another chunk already stored under that id (a hash clash)
        conn.execute(
            insert(models.chunks).values(
                project="acme",
                chunk_id=clash_id,
                created_by="x",
                payload=orjson.dumps(data).decode(),
            )
        )
    clash = client.post("/sync/push", json={"project": "acme", "data": other}, headers=AUTH)
    assert clash.status_code == 409
    assert clash.json()["error_code"] == "upgrade_repairable_chunk_conflict"
    assert first["status"] == "ok"
    log = client.get("/sync/mutations/pull", headers=AUTH).json()["mutations"]
    assert [m["key"] for m in log] == ["s-1"]  # the refused chunk left nothing behind


def test_every_route_family_wants_credentials(client: TestClient) -> None:
    for method, path in (
        ("POST", "/sync/mutations/push"),
        ("GET", "/sync/mutations/pull"),
        ("POST", "/sync/push"),
        ("GET", "/sync/pull"),
        ("GET", "/sync/pull/abcdef01"),
        ("GET", "/admin/users"),
        ("POST", "/api/v1/workers/heartbeat"),
        ("GET", "/api/v1/workers"),
    ):
        response = client.request(method, path, headers={"Authorization": "Bearer nope"})
        assert response.status_code == 401, path
        assert response.json()["error_code"] == "auth_required", path


def test_service_account_syncs_its_grants(
    client: TestClient, make_user: Callable[..., str]
) -> None:
    robot = bearer(make_user("ci-bot", ["*"], kind="service_account"))
    me = client.get("/api/v1/whoami", headers=robot).json()
    assert me["kind"] == "service_account" and me["projects"] == "*"
    record = rec.observation(project="anything")
    assert client.post(
        "/sync/mutations/push", json=rec.push_body([record], "spoofed"), headers=robot
    ).json()["accepted"] == [record["mid"]]
    pulled = client.get("/sync/mutations/pull", headers=robot).json()["mutations"]
    assert [m["mid"] for m in pulled] == [record["mid"]]


def test_hostile_query_strings(client: TestClient) -> None:
    long_name = "x" * 20_000
    response = client.get("/sync/mutations/pull", params={"project": long_name}, headers=AUTH)
    assert response.status_code == 200 and response.json()["mutations"] == []
    quoted = client.get(
        "/sync/mutations/pull", params={"project": "a'; DROP TABLE x; --"}, headers=AUTH
    )
    assert quoted.status_code == 200
    assert (
        client.get(
            "/sync/pull/..%2F..%2Fetc%2Fpasswd", params={"project": "acme"}, headers=AUTH
        ).status_code
        == 404
    )
