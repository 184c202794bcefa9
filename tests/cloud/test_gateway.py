"""The first seed's WebSocket gateway at ``/ws`` of a real ``engram cloud serve`` process, spoken
to by a real WebSocket client (``websockets``), in the seed's exact message shapes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from engram_cloud.db import create_db_engine
from engram_cloud.principals import CLI_ACTOR, create_principal, grant, issue_token
from engram_cloud.settings import derive_pepper
from tests.cloud import records as rec
from tests.support import REPO, engram_env, free_port, stop_process, wait_for_port
from tests.support.cloud import ADMIN_TOKEN, JWT_SECRET, LEGACY_TOKEN, bearer
from tests.support.postgres import PostgresCluster

WAIT = 20  # seconds a receive may take before the test fails (never a timing assertion)


@pytest.fixture(scope="module")
def database(postgres_cluster: PostgresCluster, cloud_template: str) -> Iterator[str]:
    name = postgres_cluster.create_database(template=cloud_template)
    yield postgres_cluster.url(name)
    postgres_cluster.drop_database(name)


@pytest.fixture(scope="module")
def engine(database: str) -> Iterator[Engine]:
    db = create_db_engine(database, pool_size=2)
    yield db
    db.dispose()


@pytest.fixture(scope="module")
def server(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    env = engram_env(
        tmp_path_factory.mktemp("server-data"),
        {
            "ENGRAM_DATABASE_URL": database,
            "ENGRAM_JWT_SECRET": JWT_SECRET,
            "ENGRAM_CLOUD_TOKEN": LEGACY_TOKEN,
            "ENGRAM_CLOUD_ADMIN": ADMIN_TOKEN,
            "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*",
        },
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "engram", "cloud", "serve", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, timeout=60)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(process)


def make_user(engine: Engine, name: str, projects: list[str], role: str = "member") -> str:
    with engine.begin() as conn:
        create_principal(conn, CLI_ACTOR, name, role=role)
        for project in projects:
            grant(conn, CLI_ACTOR, name, project)
        raw, _ = issue_token(conn, CLI_ACTOR, derive_pepper(JWT_SECRET), name)
    return raw


def receive(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=WAIT))


def send(ws: ClientConnection, message: Any) -> None:
    ws.send(message if isinstance(message, str) else json.dumps(message))


def handshake(server: str, token: str | None, path: str = "/ws", **kw: Any) -> ClientConnection:
    ws = connect(f"ws://{server}{path}", open_timeout=WAIT, legacy=True, **kw)
    send(ws, {"token": token})
    return ws


def closed_with(ws: ClientConnection) -> int | None:
    """Read until the server closes; the close code."""
    try:
        while True:
            ws.recv(timeout=WAIT)
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None


def is_seed_timestamp(value: str) -> bool:
    return datetime.fromisoformat(value).tzinfo is None and len(value) == 26


def push(server: str, token: str, *records: dict[str, Any]) -> None:
    answer = httpx.post(
        f"http://{server}/sync/mutations/push",
        json={"created_by": "bob", "mutations": list(records)},
        headers=bearer(token),
        timeout=WAIT,
    )
    assert answer.status_code == 200 and not answer.json()["rejected"], answer.text


def test_the_seeds_session_handshake_ping_and_status(server: str) -> None:
    with handshake(server, LEGACY_TOKEN) as ws:
        hello = receive(ws)
        assert set(hello) == {"type", "status", "timestamp", "agents", "gateway_version"}
        assert hello["type"] == "handshake" and hello["status"] == "connected"
        assert hello["gateway_version"] == "1.0.0" and is_seed_timestamp(hello["timestamp"])
        assert set(hello["agents"]) == {"librarian", "consolidator", "hub"}
        send(ws, {"type": "ping"})
        pong = receive(ws)
        assert set(pong) == {"type", "timestamp"} and pong["type"] == "pong"
        with handshake(server, LEGACY_TOKEN) as other:
            receive(other)
            send(ws, {"type": "status"})
            status = receive(ws)
            assert set(status) == {"type", "agents", "connected_clients", "timestamp"}
            assert status["type"] == "status" and status["connected_clients"] >= 2


def test_a_wrong_token_is_refused_with_1008(server: str) -> None:
    ws = handshake(server, "not-a-token")
    assert receive(ws) == {"type": "error", "message": "Invalid authentication token"}
    assert closed_with(ws) == 1008


def test_invalid_json_in_the_handshake_closes_1008(server: str) -> None:
    ws = connect(f"ws://{server}/ws", open_timeout=WAIT, legacy=True)
    send(ws, "{token: nope")
    assert receive(ws) == {"type": "error", "message": "Invalid JSON"}
    assert closed_with(ws) == 1008


def test_silence_past_five_seconds_is_a_handshake_timeout(server: str) -> None:
    ws = connect(f"ws://{server}/ws", open_timeout=WAIT, legacy=True)
    assert receive(ws) == {"type": "error", "message": "Handshake timeout"}
    assert closed_with(ws) == 1008


def test_bad_messages_get_the_seeds_errors_and_the_connection_stays(server: str) -> None:
    with handshake(server, LEGACY_TOKEN) as ws:
        receive(ws)
        send(ws, "not json at all")
        assert receive(ws) == {"type": "error", "message": "Invalid JSON"}
        send(ws, {"type": "dance"})
        assert receive(ws) == {"type": "error", "message": "Unknown message type: dance"}
        send(ws, [1, 2])
        assert receive(ws)["type"] == "error"
        send(ws, {"type": "ping"})
        assert receive(ws)["type"] == "pong"


def test_agent_commands_we_have_and_the_ones_we_do_not(server: str, engine: Engine) -> None:
    member = make_user(engine, "gw-member", ["gw-acme"])
    push(server, ADMIN_TOKEN, rec.observation(project="gw-acme"))
    push(server, ADMIN_TOKEN, rec.observation(project="gw-secret"))
    with handshake(server, member) as ws:
        receive(ws)
        send(ws, {"type": "agent_command", "agent": "hub", "command": "sync_status"})
        answer = receive(ws)
        assert set(answer) == {"type", "agent", "command", "status", "result", "timestamp"}
        assert answer["type"] == "agent_response" and answer["status"] == "executed"
        names = [p["project"] for p in answer["result"]["projects"]]
        assert names == ["gw-acme"]  # gw-secret exists but is not granted
        send(ws, {"type": "agent_command", "agent": "librarian", "command": "reindex"})
        assert receive(ws) == {"type": "error", "message": "forbidden: admin role required"}
        send(ws, {"type": "agent_command", "agent": "consolidator", "command": "consolidate"})
        assert receive(ws) == {
            "type": "error",
            "message": "Unknown command for consolidator: consolidate",
        }
        send(ws, {"type": "agent_command", "agent": "janitor", "command": "sweep"})
        assert receive(ws) == {"type": "error", "message": "Unknown agent: janitor"}
    with handshake(server, ADMIN_TOKEN) as ws:
        receive(ws)
        send(ws, {"type": "agent_command", "agent": "librarian", "command": "reindex"})
        answer = receive(ws)
        assert answer["type"] == "agent_response" and answer["result"]["applied"] >= 2


def test_subscribers_see_only_their_projects_events(server: str, engine: Engine) -> None:
    member = make_user(engine, "gw-watcher", ["gw-live"])
    with handshake(server, member) as ws:
        receive(ws)
        send(ws, {"type": "subscribe"})
        assert receive(ws) == {"type": "subscribed", "projects": ["gw-live"]}
        push(server, ADMIN_TOKEN, rec.observation(project="gw-hidden", title="Not for you"))
        push(server, ADMIN_TOKEN, rec.observation(project="gw-live", title="Fresh memory"))
        event = receive(ws)
        # The hidden project's push came first and was never delivered.
        assert event["event"] == "memory" and event["project"] == "gw-live"
        assert event["title"] == "Fresh memory" and event["created_by"] == "bob"
        assert receive(ws)["event"] == "push"
        # Request/answer still works while subscribed.
        send(ws, {"type": "ping"})
        assert receive(ws)["type"] == "pong"


def test_seed_heartbeats_reach_subscribers_with_the_seeds_fields(
    server: str, engine: Engine
) -> None:
    """A seed worker's heartbeat is a ``heartbeat`` event carrying hostname, IPs, RAM and GPU, for
    those who may see the machine: teammates of the project it is filed under, and its owner
    even when it is filed under none. Who owns it is never sent."""
    watcher = make_user(engine, "gw-fleet-watcher", ["gw-fleet"])
    fleet = make_user(engine, "gw-fleet-bot", ["gw-fleet"])
    stranger = make_user(engine, "gw-stranger", ["gw-elsewhere"])
    with handshake(server, watcher) as ws, handshake(server, LEGACY_TOKEN) as owner_ws:
        for socket in (ws, owner_ws):
            receive(socket)
            send(socket, {"type": "subscribe"})
            assert receive(socket)["type"] == "subscribed"
        body = {"tailscale_ip": "100.64.0.7", "ram_gb": 4, "gpu_type": "edge device"}
        for token, hostname in ((stranger, "gw-stranger-nano"), (fleet, "gw-nano-01")):
            answer = httpx.post(
                f"http://{server}/api/v1/workers/heartbeat",
                json={"hostname": hostname, **body},
                headers=bearer(token),
                timeout=WAIT,
            )
            assert answer.json()["status"] == "accepted", answer.text
        event = receive(ws)  # the stranger's machine came first and was never delivered
        assert event["event"] == "heartbeat" and event["hostname"] == "gw-nano-01"
        assert (event["kind"], event["tailscale_ip"], event["local_ip"]) == (
            "seed",
            "100.64.0.7",
            None,
        )
        assert (event["ram_gb"], event["gpu_type"], event["status"]) == (
            4.0,
            "edge device",
            "online",
        )
        assert event["projects"] == ["gw-fleet"] and isinstance(event["worker_id"], int)
        assert "owner" not in event
        # The shared token reads every project, so its own worker is filed under none: it still
        # sees it (its owner), though no project names it.
        own = httpx.post(
            f"http://{server}/api/v1/workers/heartbeat",
            json={"hostname": "gw-legacy-nano", **body},
            headers=bearer(LEGACY_TOKEN),
            timeout=WAIT,
        )
        assert own.json()["status"] == "accepted"
        seen = receive(owner_ws)
        while seen["hostname"] != "gw-legacy-nano":  # the teammates' machines came first
            seen = receive(owner_ws)
        assert seen["projects"] == [] and "owner" not in seen


def test_the_dashboard_cookie_works_only_from_the_servers_own_pages(server: str) -> None:
    with httpx.Client(base_url=f"http://{server}", timeout=WAIT) as browser:
        browser.get("/dashboard/login")
        csrf = browser.cookies.get("engram_dashboard_csrf") or next(
            v for k, v in browser.cookies.items() if "csrf" in k
        )
        answer = browser.post("/dashboard/login", data={"_csrf_token": csrf, "token": ADMIN_TOKEN})
        assert answer.status_code in (200, 303), answer.text
        cookie = browser.cookies.get("engram_dashboard_token")
    assert cookie
    headers = {"Cookie": f"engram_dashboard_token={cookie}"}
    own = handshake(
        server, None, "/dashboard/ws", origin=f"http://{server}", additional_headers=headers
    )
    with own:
        assert receive(own)["type"] == "handshake"
    foreign = handshake(
        server, None, "/dashboard/ws", origin="http://evil.example", additional_headers=headers
    )
    assert receive(foreign) == {"type": "error", "message": "Invalid authentication token"}
    assert closed_with(foreign) == 1008
    # Without any Origin (not a browser) a cookie alone is not enough either.
    bare = handshake(server, None, "/dashboard/ws", additional_headers=headers)
    assert receive(bare)["type"] == "error"


def test_wrong_handshake_tokens_are_throttled_like_the_api(server: str, engine: Engine) -> None:
    """The handshake is one more place to guess tokens: the same per-address count as the HTTP
    API (in PostgreSQL), so 30 wrong ones refuse even the right one for a while. (Last in the
    module: it cleans the count up for whoever runs after it.)"""
    from engram_cloud.ratelimit import MAX_BAD_TOKENS

    with engine.begin() as conn:  # earlier tests in the module sent a wrong token or two
        conn.exec_driver_sql("DELETE FROM cloud_login_attempts")
    try:
        for i in range(MAX_BAD_TOKENS):
            ws = handshake(server, f"egt_guess-{i:04d}")
            assert receive(ws) == {"type": "error", "message": "Invalid authentication token"}
            assert closed_with(ws) == 1008
        ws = handshake(server, LEGACY_TOKEN)
        assert receive(ws)["message"].startswith("Too many invalid authentication tokens")
        assert closed_with(ws) == 1008
        api = httpx.get(f"http://{server}/api/v1/whoami", headers=bearer(LEGACY_TOKEN))
        assert api.status_code == 429  # one count for both doors
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM cloud_login_attempts")
