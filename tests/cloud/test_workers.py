"""Client machines' heartbeats and the admin's view of them."""

from __future__ import annotations

from collections.abc import Callable

from litestar.testing import TestClient
from sqlalchemy import Engine, text

from tests.support.cloud import ADMIN_TOKEN, LEGACY_TOKEN, bearer

ADMIN = bearer(ADMIN_TOKEN)
LEGACY = bearer(LEGACY_TOKEN)


def beat(client: TestClient, headers: dict[str, str] = LEGACY, **fields: object):
    body = {
        "origin": "0123456789abcdef",
        "hostname": "laptop",
        "version": "0.1.0",
        "projects": ["Acme", "widgets"],
        "pending": 3,
        "quarantined": 1,
        "last_push_at": "2026-11-21T10:00:00Z",
        "last_pull_at": None,
        **fields,
    }
    return client.post("/api/v1/workers/heartbeat", json=body, headers=headers)


def test_heartbeats_list_and_cleanup(
    client: TestClient, engine: Engine, make_user: Callable[..., str]
) -> None:
    first = beat(client)
    assert first.status_code == 200 and first.json()["origin"] == "0123456789abcdef"
    member = bearer(make_user("erin", ["acme"]))
    beat(client, member, origin="fedcba9876543210", pending=0)  # a second replica, same host
    beat(client, pending=5)  # the first one again: updated, not duplicated
    workers = client.get("/api/v1/workers", headers=ADMIN).json()  # the seed's array
    assert len(workers) == 2 and len({w["id"] for w in workers}) == 2
    mine = next(w for w in workers if w["origin"] == "0123456789abcdef")
    assert mine["pending"] == 5 and mine["projects"] == ["acme", "widgets"]
    assert mine["status"] == "online" and mine["last_push_at"] == "2026-11-21T10:00:00Z"
    assert mine["last_pull_at"] is None and mine["principal_name"] == "legacy"
    other = client.get("/api/v1/workers/fedcba9876543210", headers=ADMIN).json()
    assert other["principal_name"] == "erin"
    by_host = client.get("/api/v1/workers/laptop", headers=ADMIN).json()
    assert by_host["origin"] == "0123456789abcdef"  # of the two on that host, the latest heard
    assert client.get("/api/v1/workers/nowhere", headers=ADMIN).status_code == 404

    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE cloud_workers SET last_seen_at = now() - interval '2 hours' "
                "WHERE origin = 'fedcba9876543210'"
            )
        )
    cleaned = client.post("/api/v1/workers/cleanup", params={"minutes": 30}, headers=ADMIN).json()
    assert cleaned == {"status": "completed", "workers_marked_offline": 1, "minutes": 30}
    offline = client.get("/api/v1/workers", params={"status": "offline"}, headers=ADMIN).json()
    assert [w["origin"] for w in offline] == ["fedcba9876543210"]
    assert offline[0]["seconds_since_seen"] >= 7200
    beat(client, member, origin="fedcba9876543210")  # it came back
    assert client.get("/api/v1/workers", params={"status": "offline"}, headers=ADMIN).json() == []


def test_heartbeat_validation_and_access(client: TestClient) -> None:
    for fields, text_ in (
        ({"origin": "nothex"}, "origin must be 16 lowercase hex"),
        ({"hostname": ""}, "hostname is required"),
        ({"hostname": "h" * 300}, "hostname is longer than 255"),
        ({"pending": -1}, "pending must be a non-negative integer"),
        ({"pending": True}, "pending must be a non-negative integer"),
        ({"projects": "acme"}, "projects must be a list"),
        ({"last_push_at": "last tuesday"}, "not an RFC 3339 time"),
    ):
        response = beat(client, **fields)
        assert response.status_code == 400, fields
        assert text_ in response.json()["error"], (fields, response.json())
    assert beat(client, headers={}).status_code == 401
    # Not only for admins any more: everyone sees the machines of projects they may read (none
    # here: every heartbeat above was refused).
    assert client.get("/api/v1/workers", headers=bearer(LEGACY_TOKEN)).json() == []
    assert (
        client.post("/api/v1/workers/cleanup", params={"minutes": "x"}, headers=ADMIN).status_code
        == 400
    )
    assert (
        client.post("/api/v1/workers/cleanup", params={"minutes": 0}, headers=ADMIN).status_code
        == 400
    )
    assert (
        client.get("/api/v1/workers", params={"status": "asleep"}, headers=ADMIN).status_code == 400
    )
