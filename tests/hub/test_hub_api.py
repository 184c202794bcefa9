"""``engram hub``'s app: the seed's exact request and response shapes and error codes."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from litestar.testing import TestClient

from engram.http.hub import HubIndex, create_hub
from engram.settings import Config
from engram.store import Store
from tests.support.http import BASE_URL
from tests.support.hub import HUB_URL, TOKEN


def is_seed_timestamp(value: str) -> bool:
    """``2026-04-03T12:00:00.000000``: ISO-8601, microseconds, no zone."""
    parsed = datetime.fromisoformat(value)
    return parsed.tzinfo is None and len(value) == 26


def test_root_describes_the_service(hub: TestClient) -> None:
    body = hub.get("/", headers={"Authorization": ""}).json()
    assert body["service"] == "Engram Hub" and body["status"] == "online"
    assert body["endpoints"] == {
        "health": "/health",
        "status": "/status",
        "search": "/search (POST)",
        "docs": "/docs",
        "openapi": "/openapi.json",
    }
    assert set(body) == {"service", "status", "version", "description", "endpoints"}


def test_health_is_open_and_has_the_seeds_three_fields(hub: TestClient) -> None:
    response = hub.get("/health", headers={"Authorization": ""})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"status", "timestamp", "version"}
    assert body["status"] == "online" and is_seed_timestamp(body["timestamp"])


def test_docs_and_openapi_are_served(hub: TestClient) -> None:
    assert hub.get("/docs").status_code == 200
    schema = hub.get("/openapi.json").json()
    assert "/search" in schema["paths"] and "/health" in schema["paths"]


def test_search_answers_query_results_and_elapsed_ms(hub: TestClient) -> None:
    response = hub.post("/search", json={"query": "tailscale.*mesh|headscale"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"query", "results", "elapsed_ms"}
    assert body["query"] == "tailscale.*mesh|headscale"
    assert isinstance(body["elapsed_ms"], float)
    assert body["results"].index("Headscale") < body["results"].index("Tailscale mesh")
    assert "deleted" not in body["results"]


def test_the_seeds_example_requests(hub: TestClient) -> None:
    scoped = hub.post("/search", json={"query": "edge", "session_id": "Session_42"}).json()
    assert "Edge deploy" in scoped["results"]
    tagged = hub.post(
        "/search", json={"tags": ["edge"], "date_from": "2026-03-01", "date_to": "2026-03-31"}
    ).json()
    assert "Edge deploy" in tagged["results"] and tagged["query"] == ""
    assert "Login fix" not in tagged["results"]


def test_unknown_fields_are_ignored_as_the_seeds_model_does(hub: TestClient) -> None:
    response = hub.post("/search", json={"query": "headscale", "limit": 3})
    assert response.status_code == 200 and "Headscale" in response.json()["results"]


def test_the_seeds_400s(hub: TestClient) -> None:
    cases = {
        "invalid regex": {"query": "(unclosed"},
        "query too long": {"query": "q" * 501},
        "bad session id": {"session_id": "../etc"},
        "bad date": {"date_from": "03/01/2026"},
        "no filter at all": {},
        "only empty filters": {"query": "", "tags": None},
    }
    for case, body in cases.items():
        response = hub.post("/search", json=body)
        assert response.status_code == 400, case
        assert set(response.json()) == {"detail"} and response.json()["detail"], case


def test_no_matching_sessions_is_404(hub: TestClient) -> None:
    response = hub.post("/search", json={"session_id": "Session_999"})
    assert response.status_code == 404
    assert "no matching sessions" in response.json()["detail"]


def test_malformed_bodies_are_422_in_fastapis_shape(hub: TestClient) -> None:
    bodies = [
        {"content": b"{not json", "headers": {"Content-Type": "application/json"}},
        {"json": {"query": 42}},
        {"json": {"tags": "edge"}},
        {"json": {"tags": [1, 2]}},
        {"json": ["query"]},
        {},
    ]
    for kwargs in bodies:
        response = hub.post("/search", **kwargs)
        assert response.status_code == 422, kwargs
        detail = response.json()["detail"]
        assert isinstance(detail, list) and detail, kwargs
        assert {"type", "loc", "msg"} <= set(detail[0]) and detail[0]["loc"][0] == "body"
    typed = hub.post("/search", json={"query": 42}).json()["detail"][0]
    assert typed["loc"] == ["body", "query"]


def test_search_and_status_need_the_token_when_it_is_set(hub: TestClient) -> None:
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"},
                    {"Authorization": f"Basic {TOKEN}"}):  # fmt: skip
        for method, path in (("POST", "/search"), ("GET", "/status")):
            response = hub.request(method, path, json={"query": "x"}, headers=headers)
            assert response.status_code == 401, (headers, path)
            assert response.json() == {"detail": "Invalid or missing token"}
            assert response.headers["www-authenticate"] == "Bearer"


def test_without_a_token_everything_is_open(config: Config, hub_store: Store) -> None:
    with TestClient(create_hub(HubIndex(config)), base_url=HUB_URL) as client:
        assert client.post("/search", json={"query": "edge"}).status_code == 200
        assert client.get("/status").status_code == 200


def test_status_names_the_store(hub: TestClient, config: Config) -> None:
    body = hub.get("/status").json()
    assert body["service"] == "engram-hub" and body["status"] == "online"
    assert body["index_path"] == str(config.db_path)
    assert body["entities_path"] == str(config.data_dir)
    assert is_seed_timestamp(body["timestamp"])
    assert body["index"] == "available" and body["memories"] == 4


def test_an_unreadable_index_is_503_and_the_hub_stays_up(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "engram.db").write_bytes(b"this is not a SQLite database, it is a text file" * 100)
    config = Config(data_dir=data)
    with TestClient(create_hub(HubIndex(config)), base_url=HUB_URL) as client:
        response = client.post("/search", json={"query": "x"})
        assert response.status_code == 503
        assert "not a valid Engram database" in response.json()["detail"]
        assert client.get("/health").json()["status"] == "online"
        status = client.get("/status").json()
        assert status["index"].startswith("unavailable") and status["memories"] is None
        # Once the file is a database again, the next request reads it (no restart).
        (data / "engram.db").unlink()
        assert client.post("/search", json={"query": "x"}).status_code == 200


def test_engram_serve_keeps_its_own_health(store: Store) -> None:
    from engram.http.app import create_app

    with TestClient(create_app(store), base_url=BASE_URL) as client:
        body = client.get("/health").json()
    assert body["status"] == "ok" and body["service"] == "engram" and "timestamp" not in body


def test_web_pages_can_neither_read_nor_drive_the_hub(hub: TestClient) -> None:
    """The same rules as engram serve: DNS rebinding (a foreign Host), a page's Origin and a
    non-JSON body are refused before any search runs, in the seed's error shape."""
    query = {"query": "anything"}
    rebinding = hub.post("/search", json=query, headers={"Host": "evil.example"})
    assert rebinding.status_code == 421 and "Host" in rebinding.json()["detail"]
    page = hub.post("/search", json=query, headers={"Origin": "https://evil.example"})
    assert page.status_code == 403 and "web pages" in page.json()["detail"]
    form = hub.post(
        "/search",
        content=b'{"query": "anything"}',
        headers={"Content-Type": "text/plain", "Origin": "http://localhost:8000"},
    )
    assert form.status_code == 415
    # A local program (no Origin, a loopback Host) is served as before.
    assert hub.get("/health", headers={"Host": "localhost:8000"}).status_code == 200
