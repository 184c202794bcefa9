"""The bearer token on destructive and bulk routes, the OpenAPI document, the lifespan seam
for background services, and /sync/status's extension point."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from litestar.testing import TestClient

from engram.http.app import create_app
from engram.store import Store
from engram.sync.cloud.status import sync_status
from tests.support.http import BASE_URL, TOKEN

# Every route of the local API (docs/http.md): (method, OpenAPI path).
EXPECTED_ROUTES = {
    ("get", "/health"),
    ("post", "/sessions"),
    ("post", "/sessions/{session_id}/end"),
    ("get", "/sessions/recent"),
    ("get", "/sessions/{session_id}"),
    ("delete", "/sessions/{session_id}"),
    ("post", "/observations"),
    ("post", "/observations/passive"),
    ("get", "/observations/recent"),
    ("get", "/observations"),
    ("get", "/observations/{observation_id}"),
    ("patch", "/observations/{observation_id}"),
    ("delete", "/observations/{observation_id}"),
    ("post", "/observations/restore"),
    ("get", "/observations/{observation_id}/history"),
    ("get", "/search"),
    ("get", "/timeline"),
    ("post", "/prompts"),
    ("get", "/prompts/recent"),
    ("get", "/prompts/search"),
    ("delete", "/prompts/{prompt_id}"),
    ("get", "/context"),
    ("get", "/export"),
    ("post", "/import"),
    ("get", "/stats"),
    ("get", "/projects"),
    ("post", "/projects/merge"),
    ("post", "/projects/migrate"),
    ("post", "/topic-keys/suggest"),
    ("get", "/project/current"),
    ("get", "/sync/status"),
    # issue 20: relations and the entity graph
    ("post", "/relations"),
    ("get", "/relations"),
    ("get", "/relations/conflicts"),
    ("get", "/relations/{relation_id}"),
    ("patch", "/relations/{relation_id}"),
    ("get", "/observations/{observation_id}/relations"),
    ("get", "/graph/query"),
    ("post", "/graph/ingest"),
    ("get", "/graph/entities"),
    ("get", "/graph/entities/{name}"),
    # importance, pins, review, consolidation (docs/importance.md)
    ("put", "/observations/{observation_id}/pin"),
    ("delete", "/observations/{observation_id}/pin"),
    ("post", "/observations/restore"),
    ("post", "/observations/archive"),
    ("get", "/observations/archived"),
    ("get", "/review"),
    ("post", "/review/mark_reviewed"),
    ("post", "/consolidate"),
}
GUARDED = [
    ("delete", "/sessions/s-1", None),
    ("delete", "/observations/1", None),
    ("delete", "/prompts/1", None),
    ("get", "/export", None),
    ("post", "/import", {"version": "0.1.0"}),
    ("post", "/projects/merge", {"from": ["acme"], "to": "other"}),
    ("post", "/projects/migrate", {"old_project": "acme", "new_project": "other"}),
    ("post", "/observations/archive", {"id": 1}),
    ("post", "/consolidate", {"dry_run": True}),
]


def documented_routes(doc: dict) -> set[tuple[str, str]]:
    return {(method, path) for path, item in doc["paths"].items() for method in item}


def test_schema_documents_every_route_with_typed_bodies(client: TestClient) -> None:
    doc = client.get("/schema").json()
    assert doc == client.get("/schema/openapi.json").json()
    assert documented_routes(doc) == EXPECTED_ROUTES
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            ok = next(code for code in operation["responses"] if code.startswith("2"))
            assert "content" in operation["responses"][ok], (method, path)
            for code, answer in operation["responses"].items():
                if code.startswith(("4", "5")):
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)
            if method in ("post", "patch"):
                body = operation["requestBody"]["content"]["application/json"]["schema"]
                refs = [body.get("$ref")] + [s.get("$ref") for s in body.get("oneOf", [])]
                assert any(r and r.startswith("#/components/schemas/") for r in refs), path
    saved = doc["components"]["schemas"]["ObservationCreate"]
    assert set(saved["required"]) == {"title", "content"}
    # Without a token nothing claims to need one.
    assert "securitySchemes" not in doc["components"]


def test_schema_marks_guarded_routes_when_a_token_is_set(guarded: TestClient) -> None:
    doc = guarded.get("/schema").json()
    assert doc["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"
    secured = {
        (method, path)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if op.get("security")
    }
    assert secured == {
        ("delete", "/sessions/{session_id}"),
        ("delete", "/observations/{observation_id}"),
        ("delete", "/prompts/{prompt_id}"),
        ("get", "/export"),
        ("post", "/import"),
        ("post", "/projects/merge"),
        ("post", "/projects/migrate"),
        ("post", "/observations/archive"),
        ("post", "/consolidate"),
    }


@pytest.mark.parametrize(("method", "url", "body"), GUARDED)
def test_guarded_routes_refuse_a_missing_or_wrong_token(
    guarded: TestClient, store: Store, method, url, body
) -> None:
    store.add_observation(title="t", content="c", session_id="s-1", project="acme")
    store.add_prompt("p", session_id="s-0")
    before = store.canonical_export()
    for header in (None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"):
        kwargs: dict[str, Any] = {"headers": {"Authorization": header} if header else {}}
        if body is not None:
            kwargs["json"] = body
        response = guarded.request(method.upper(), url, **kwargs)
        assert response.status_code == 401, header
        assert "Bearer" in response.json()["error"]
        assert response.headers["www-authenticate"] == "Bearer"
    assert store.canonical_export() == before


def test_guarded_routes_work_with_the_token(guarded: TestClient, store: Store) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    oid = store.add_observation(title="t", content="c", project="acme").observation.id
    assert guarded.get("/export", headers=auth).status_code == 200
    assert guarded.delete(f"/observations/{oid}", headers=auth).status_code == 200
    assert guarded.post("/import", json={"version": "0.1.0"}, headers=auth).status_code == 200
    # The scheme is case-insensitive, as HTTP says.
    assert guarded.get("/export", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200


def test_open_routes_need_no_token(guarded: TestClient) -> None:
    assert guarded.get("/health").status_code == 200
    saved = guarded.post("/observations", json={"title": "t", "content": "c"})
    assert saved.status_code == 201
    assert guarded.get("/search", params={"q": "c"}).status_code == 200


class Recorder:
    """A background service that records what the app asked of it."""

    def __init__(self, name: str, events: list[str]) -> None:
        self.name, self.events = name, events

    async def start(self) -> None:
        self.events.append(f"start {self.name}")

    async def stop(self) -> None:
        self.events.append(f"stop {self.name}")


def test_background_services_start_before_and_stop_after_serving(store: Store) -> None:
    events: list[str] = []
    app = create_app(store, services=[Recorder("a", events), Recorder("b", events)])
    with TestClient(app, base_url=BASE_URL) as client:
        assert events == ["start a", "start b"]
        client.get("/health")
    assert events == ["start a", "start b", "stop b", "stop a"]


class FakeCloud:
    """Stands in for the cloud client a later issue builds: a status snapshot per project."""

    def status(self, store: Store, project: str) -> Mapping[str, Any]:
        return {
            "phase": "healthy",
            "last_sync_at": "2026-11-21T10:00:00Z",
            "deferred_count": 2,
            "upgrade": {"stage": "done"},
        }


def test_sync_status_extension_point(store: Store) -> None:
    plain = sync_status(store, "acme")
    assert plain["enabled"] is False and plain["reason_code"] == "cloud_not_configured"
    needs_project = sync_status(store, "", source=FakeCloud())
    assert needs_project["enabled"] is False and needs_project["reason_code"] == "project_required"
    configured = sync_status(store, "acme", source=FakeCloud())
    assert configured["enabled"] is True and configured["phase"] == "healthy"
    assert configured["deferred_count"] == 2 and configured["dead_count"] == 0
    assert configured["upgrade"] == {"stage": "done", "reason_code": None, "reason_message": None}
    assert set(configured) == set(plain)

    with TestClient(create_app(store, sync_source=FakeCloud()), base_url=BASE_URL) as client:
        body = client.get("/sync/status", params={"project": "acme"}).json()
    assert body["enabled"] is True and body["last_sync_at"] == "2026-11-21T10:00:00Z"
