"""The first seed's Worker API (``reference/seed-engram-hub-api.md``, "Worker API") on the
machines table, in its exact request and response shapes: heartbeats keyed by hostname beside
our clients' (keyed by origin), the array of workers with derived status, one worker by name,
cleanup — scoped by the caller's grants, with the seed's ``detail`` on every error and never a
5xx for bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine, text

from tests.support.cloud import ADMIN_TOKEN, LEGACY_TOKEN, RunningServer, bearer

ADMIN = bearer(ADMIN_TOKEN)
LEGACY = bearer(LEGACY_TOKEN)
#: The reference's example heartbeat, byte for byte.
SEED_BODY = {
    "hostname": "edge-nano-01",
    "tailscale_ip": "100.64.0.5",
    "local_ip": "192.168.1.50",
    "ram_gb": 8.0,
    "gpu_type": "edge device",
}
#: ``WorkerResponse``'s fields, in the reference's order.
WORKER_FIELDS = [
    "id",
    "hostname",
    "tailscale_ip",
    "status",
    "gpu_type",
    "ram_gb",
    "last_heartbeat",
    "created_at",
]


def seed_beat(client: Any, headers: dict[str, str] = LEGACY, **fields: Any) -> httpx.Response:
    return client.post("/api/v1/workers/heartbeat", json={**SEED_BODY, **fields}, headers=headers)


def our_beat(client: Any, headers: dict[str, str] = LEGACY, **fields: Any) -> httpx.Response:
    body = {"origin": "0123456789abcdef", "hostname": "laptop", "projects": ["acme"], **fields}
    return client.post("/api/v1/workers/heartbeat", json=body, headers=headers)


def silence(engine: Engine, hostname: str, interval: str) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE cloud_workers SET last_seen_at = now() - CAST(:i AS interval) "
                "WHERE hostname = :h"
            ),
            {"i": interval, "h": hostname},
        )


def test_seed_heartbeat_list_detail_and_cleanup_in_the_seeds_shapes(
    client: TestClient, engine: Engine
) -> None:
    first = seed_beat(client)
    assert first.status_code == 200
    worker_id = first.json()["worker_id"]
    assert first.json() == {
        "status": "accepted",
        "worker_id": worker_id,
        "message": "Heartbeat received from edge-nano-01",
    }
    assert isinstance(worker_id, int)
    # The same hostname again: the same worker, updated (the seed keys workers by hostname).
    again = seed_beat(client, ram_gb=16, local_ip=None, gpu_type="Jetson Orin")
    assert again.json()["worker_id"] == worker_id

    listed = client.get("/api/v1/workers", headers=LEGACY)
    assert listed.status_code == 200 and isinstance(listed.json(), list)
    [worker] = listed.json()
    assert list(worker)[: len(WORKER_FIELDS)] == WORKER_FIELDS
    assert {k: worker[k] for k in WORKER_FIELDS if k not in ("last_heartbeat", "created_at")} == {
        "id": worker_id,
        "hostname": "edge-nano-01",
        "tailscale_ip": "100.64.0.5",
        "status": "online",
        "gpu_type": "Jetson Orin",
        "ram_gb": 16.0,
    }
    assert isinstance(worker["ram_gb"], float)
    assert worker["last_heartbeat"].endswith("Z") and worker["created_at"].endswith("Z")
    assert worker["local_ip"] is None and worker["kind"] == "seed" and worker["origin"] is None

    detail = client.get("/api/v1/workers/edge-nano-01", headers=LEGACY)
    assert detail.status_code == 200 and detail.json() == worker
    missing = client.get("/api/v1/workers/edge-nano-99", headers=LEGACY)
    assert missing.status_code == 404
    assert missing.json()["detail"] == "Worker 'edge-nano-99' not found"
    assert missing.json()["error_code"] == "not_found"  # our envelope stays beside it

    # Cleanup: the seed's default threshold is 60 minutes.
    silence(engine, "edge-nano-01", "30 minutes")
    cleaned = client.post("/api/v1/workers/cleanup", headers=LEGACY)
    assert cleaned.status_code == 200
    assert cleaned.json() == {"status": "completed", "workers_marked_offline": 0, "minutes": 60}
    cleaned = client.post("/api/v1/workers/cleanup", params={"minutes": 20}, headers=LEGACY)
    assert cleaned.json()["workers_marked_offline"] == 1
    again = client.post("/api/v1/workers/cleanup", params={"minutes": 20}, headers=LEGACY)
    assert again.json()["workers_marked_offline"] == 0  # already offline: not counted twice
    assert client.get("/api/v1/workers/edge-nano-01", headers=LEGACY).json()["status"] == "offline"
    # A heartbeat brings it back, as in the seed ("updates status to online").
    seed_beat(client)
    assert client.get("/api/v1/workers/edge-nano-01", headers=LEGACY).json()["status"] == "online"


def test_status_is_derived_from_silence(
    make_client: Callable[..., TestClient], engine: Engine
) -> None:
    client = make_client(worker_unhealthy_s=120, worker_offline_s=1800)
    for name in ("fresh", "quiet", "gone"):
        assert seed_beat(client, hostname=name).status_code == 200
    silence(engine, "quiet", "5 minutes")
    silence(engine, "gone", "2 hours")
    statuses = {
        w["hostname"]: w["status"] for w in client.get("/api/v1/workers", headers=LEGACY).json()
    }
    assert statuses == {"fresh": "online", "quiet": "unhealthy", "gone": "offline"}
    unhealthy = client.get("/api/v1/workers", params={"status": "unhealthy"}, headers=LEGACY)
    assert [w["hostname"] for w in unhealthy.json()] == ["quiet"]
    # With the default thresholds (5 minutes, an hour) five minutes of silence is unhealthy too.
    assert client.get("/api/v1/workers/quiet", headers=LEGACY).json()["status"] == "unhealthy"


def test_one_table_two_vocabularies(client: TestClient, engine: Engine) -> None:
    """Our client on a host, then a seed worker with the same hostname: two machines, each keyed
    its own way; a name answers the one heard most recently; each shows the other's fields
    empty (never null where the seed's types are not optional)."""
    ours = our_beat(client, hostname="edge-nano-01", pending=4)
    assert ours.status_code == 200
    assert ours.json()["status"] == "ok" and isinstance(ours.json()["worker_id"], int)
    silence(engine, "edge-nano-01", "1 minute")  # ours was heard a minute ago
    theirs = seed_beat(client)
    assert theirs.json()["worker_id"] != ours.json()["worker_id"]

    machines = client.get("/api/v1/workers", headers=ADMIN).json()
    assert sorted(m["kind"] for m in machines) == ["engram", "seed"]
    engram = next(m for m in machines if m["kind"] == "engram")
    assert (engram["tailscale_ip"], engram["gpu_type"], engram["ram_gb"]) == ("", "", 0.0)
    assert engram["pending"] == 4 and engram["origin"] == "0123456789abcdef"
    by_name = client.get("/api/v1/workers/edge-nano-01", headers=ADMIN).json()
    assert by_name["kind"] == "seed"
    our_beat(client, hostname="edge-nano-01")  # now ours is the latest heard
    assert client.get("/api/v1/workers/edge-nano-01", headers=ADMIN).json()["kind"] == "engram"
    # An origin names exactly one machine.
    assert client.get("/api/v1/workers/0123456789abcdef", headers=ADMIN).json()["kind"] == "engram"


def test_everything_is_scoped_by_grants(
    client: TestClient, engine: Engine, make_user: Callable[..., str]
) -> None:
    alice = bearer(make_user("alice", ["acme", "secret"]))
    carol = bearer(make_user("carol", ["acme"]))
    bob = bearer(make_user("bob", ["widgets"]))
    assert seed_beat(client, alice, hostname="alices-jetson").status_code == 200
    assert seed_beat(client, bob, hostname="bobs-jetson").status_code == 200
    assert our_beat(client, bob, origin="b" * 16, hostname="bobs-laptop", projects=[]).is_success

    def names(headers: dict[str, str]) -> list[str]:
        return [w["hostname"] for w in client.get("/api/v1/workers", headers=headers).json()]

    assert names(ADMIN) == ["alices-jetson", "bobs-jetson", "bobs-laptop"]
    assert names(carol) == ["alices-jetson"]  # filed under alice's projects: acme is carol's too
    assert names(bob) == ["bobs-jetson", "bobs-laptop"]  # his own, even one naming no project
    # Of a machine's projects, only those the caller may see are named.
    seen_by_carol = client.get("/api/v1/workers/alices-jetson", headers=carol).json()
    assert seen_by_carol["projects"] == ["acme"]
    assert client.get("/api/v1/workers/alices-jetson", headers=ADMIN).json()["projects"] == [
        "acme",
        "secret",
    ]
    # A machine one may not see does not exist for them: 404, and cleanup never touches it.
    assert client.get("/api/v1/workers/alices-jetson", headers=bob).status_code == 404
    silence(engine, "alices-jetson", "2 hours")
    silence(engine, "bobs-jetson", "2 hours")
    cleaned = client.post("/api/v1/workers/cleanup", params={"minutes": 60}, headers=bob).json()
    assert cleaned["workers_marked_offline"] == 1
    with engine.connect() as conn:
        stored = dict(conn.execute(text("SELECT hostname, status FROM cloud_workers")).all())
    assert stored == {"alices-jetson": "online", "bobs-jetson": "offline", "bobs-laptop": "online"}
    assert (
        client.post("/api/v1/workers/cleanup", headers=ADMIN).json()["workers_marked_offline"] == 1
    )


def test_a_seed_hostname_belongs_to_whoever_registered_it(
    make_client: Callable[..., TestClient], make_user: Callable[..., str]
) -> None:
    client = make_client(heartbeats_per_minute=3)
    alice = bearer(make_user("alice", ["acme"]))
    mallory = bearer(make_user("mallory", ["acme"]))
    assert seed_beat(client, alice, tailscale_ip="100.64.0.5").status_code == 200
    stolen = seed_beat(client, mallory, tailscale_ip="6.6.6.6")
    assert stolen.status_code == 409
    assert stolen.json()["error_code"] == "worker_owned_elsewhere"
    assert "registered by another user" in stolen.json()["detail"]
    kept = client.get("/api/v1/workers/edge-nano-01", headers=ADMIN).json()
    assert (kept["tailscale_ip"], kept["principal_name"]) == ("100.64.0.5", "alice")
    # Seed and our heartbeats share one member's budget.
    assert seed_beat(client, alice).status_code == 200
    assert our_beat(client, alice, origin="a" * 16).status_code == 200
    limited = seed_beat(client, alice)
    assert limited.status_code == 429 and limited.headers["retry-after"]
    assert limited.json()["detail"].startswith("too many heartbeats")


@pytest.mark.parametrize(
    ("fields", "loc", "kind"),
    [
        ({"hostname": None}, "hostname", "string_type"),
        ({"tailscale_ip": 5}, "tailscale_ip", "string_type"),
        ({"gpu_type": ["a"]}, "gpu_type", "string_type"),
        ({"local_ip": 7}, "local_ip", "string_type"),
        ({"ram_gb": "lots"}, "ram_gb", "float_parsing"),
        ({"ram_gb": True}, "ram_gb", "float_type"),
        ({"ram_gb": "NaN"}, "ram_gb", "finite_number"),
        ({"ram_gb": -1}, "ram_gb", "greater_than_equal"),
        ({"ram_gb": 1e300}, "ram_gb", "less_than_equal"),
        ({"hostname": ""}, "hostname", "string_too_short"),
        ({"hostname": "h" * 256}, "hostname", "string_too_long"),
        ({"hostname": "edge/../01"}, "hostname", "value_error"),
        ({"hostname": "edge 01"}, "hostname", "value_error"),
        ({"hostname": "edge\x00"}, "hostname", "value_error"),
        ({"gpu_type": "gpu\x00"}, "gpu_type", "value_error"),
    ],
)
def test_bad_seed_heartbeats_get_the_seeds_422(
    client: TestClient, fields: dict[str, Any], loc: str, kind: str
) -> None:
    answer = seed_beat(client, **fields)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert [(d["loc"], d["type"]) for d in detail] == [(["body", loc], kind)]
    assert answer.json()["error_code"] == "payload_invalid"
    assert client.get("/api/v1/workers", headers=ADMIN).json() == []  # nothing written


def test_malformed_seed_bodies(client: TestClient) -> None:
    url = "/api/v1/workers/heartbeat"
    # A lone surrogate (not text any database can store), escaped in otherwise valid JSON.
    surrogate = client.post(
        url,
        content=b'{"hostname": "a", "tailscale_ip": "\\ud800", "ram_gb": 1, "gpu_type": "g"}',
        headers={**LEGACY, "Content-Type": "application/json"},
    )
    assert surrogate.status_code == 422
    assert surrogate.json()["detail"][0]["loc"] == ["body", "tailscale_ip"]
    # Every missing field at once, as pydantic lists them.
    missing = client.post(url, json={"hostname": "edge-nano-01"}, headers=LEGACY)
    assert missing.status_code == 422
    assert [(d["loc"][-1], d["type"], d["msg"]) for d in missing.json()["detail"]] == [
        ("tailscale_ip", "missing", "Field required"),
        ("gpu_type", "missing", "Field required"),
        ("ram_gb", "missing", "Field required"),
    ]
    # local_ip may be left out; unknown fields are ignored.
    body = {k: v for k, v in SEED_BODY.items() if k != "local_ip"}
    assert client.post(url, json={**body, "extra": "x"}, headers=LEGACY).status_code == 200
    for raw in (b"{not json", b"", b"[1, 2]", b'"edge"'):
        answer = client.post(
            url, content=raw, headers={**LEGACY, "Content-Type": "application/json"}
        )
        assert answer.status_code == 422, raw
        assert isinstance(answer.json()["detail"], list) and answer.json()["detail"][0]["msg"]
    huge = client.post(url, json={**SEED_BODY, "gpu_type": "x" * 200_000}, headers=LEGACY)
    assert huge.status_code == 413 and "detail" in huge.json()
    unauthenticated = client.post(url, json=SEED_BODY)
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["detail"].startswith("unauthorized")
    nul_path = client.get("/api/v1/workers/edge%00", headers=LEGACY)
    assert nul_path.status_code == 400 and "NUL" in nul_path.json()["detail"]


@pytest.mark.parametrize("minutes", ["-5", "0", "x", "1.5", "1e3", "525601", "9" * 30, "٣"])
def test_bad_cleanup_minutes(client: TestClient, minutes: str) -> None:
    answer = client.post("/api/v1/workers/cleanup", params={"minutes": minutes}, headers=ADMIN)
    assert answer.status_code == 400, minutes
    assert "minutes" in answer.json()["detail"] and answer.json()["error_code"]


def test_bad_status_filter(client: TestClient) -> None:
    answer = client.get("/api/v1/workers", params={"status": "asleep"}, headers=ADMIN)
    assert answer.status_code == 400
    assert answer.json()["detail"] == "status must be online, unhealthy or offline"


def test_a_seed_client_against_a_real_server(
    serve: Callable[..., RunningServer], make_user: Callable[..., str]
) -> None:
    """What the seed's own scripts do (its curl examples), against ``engram cloud serve``."""
    server = serve()
    token = make_user("edge-fleet", ["acme"], kind="service_account")
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        accepted = http.post("/api/v1/workers/heartbeat", json=SEED_BODY, headers=auth)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json() == {
            "status": "accepted",
            "worker_id": accepted.json()["worker_id"],
            "message": "Heartbeat received from edge-nano-01",
        }
        [worker] = http.get("/api/v1/workers", headers=auth).json()
        assert worker["hostname"] == "edge-nano-01" and worker["status"] == "online"
        assert worker["id"] == accepted.json()["worker_id"] and worker["ram_gb"] == 8.0
        one = http.get("/api/v1/workers/edge-nano-01", headers=auth)
        assert one.status_code == 200 and one.json()["tailscale_ip"] == "100.64.0.5"
        assert http.get("/api/v1/workers/nope", headers=auth).json()["detail"]
        cleanup = http.post("/api/v1/workers/cleanup", params={"minutes": 30}, headers=auth)
        assert cleanup.json()["status"] == "completed"
        assert cleanup.json()["workers_marked_offline"] == 0
        bad = http.post("/api/v1/workers/heartbeat", json={"hostname": "x"}, headers=auth)
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "tailscale_ip"]
        assert (
            http.get("/api/v1/workers", headers={"Authorization": "Bearer no"}).status_code == 401
        )


def test_many_seed_heartbeats_on_one_connection(engine: Engine) -> None:
    """psycopg prepares a statement on its sixth use on a connection; the upsert of a seed
    worker must still find its partial unique index then (a bound ``kind = $1`` did not)."""
    from engram_cloud import fleet
    from engram_cloud.auth import LEGACY_PRINCIPAL

    row = {k: v for k, v in SEED_BODY.items()}
    with engine.begin() as conn:
        ids = {
            fleet.record_seed_heartbeat(conn, {**row, "ram_gb": float(n)}, LEGACY_PRINCIPAL, [])
            for n in range(12)
        }
        assert len(ids) == 1
        stored = conn.execute(text("SELECT ram_gb FROM cloud_workers")).scalar_one()
    assert stored == 11.0
