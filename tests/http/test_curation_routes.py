"""Importance, pins, review, restore, archive, as-of and consolidation over the local HTTP API:
every memory carries its importance; bad input is a 400 naming the field and changes nothing."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from engram.store import Store
from tests.support.http import TOKEN


def test_every_memory_shows_its_importance_and_pin(client: TestClient, store: Store) -> None:
    saved = client.post(
        "/observations", json={"title": "Rule", "content": "always rebase", "project": "acme",
                               "importance": 0.6},
    )  # fmt: skip
    assert saved.status_code == 201, saved.text
    body = saved.json()["observation"]
    assert body["importance"] == 0.6 and body["pinned"] is False and body["access_count"] == 0
    oid = body["id"]
    pinned = client.put(f"/observations/{oid}/pin")
    assert pinned.status_code == 200 and pinned.json()["pinned"] is True
    for route in (f"/observations/{oid}", "/observations/recent", "/search?q=rebase"):
        answer = client.get(route).json()
        first = answer if isinstance(answer, dict) else answer[0]
        assert first["importance"] == 0.6 and first["pinned"] is True, route
    patched = client.patch(
        f"/observations/{oid}", json={"importance": "auto", "valid_to": "2030-01-01"}
    )
    assert patched.status_code == 200
    assert patched.json()["importance_override"] is None
    assert patched.json()["valid_to"] == "2030-01-01 00:00:00"
    assert client.delete(f"/observations/{oid}/pin").json()["pinned"] is False


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        ("post", "/observations", {"title": "t", "content": "c", "importance": 1.5}, "importance"),
        ("post", "/observations", {"title": "t", "content": "c", "importance": -0.5}, "importance"),
        ("post", "/observations", {"title": "t", "content": "c", "importance": "x"}, "importance"),
        ("patch", "/observations/1", {"importance": 7}, "importance"),
        ("patch", "/observations/1", {"importance": "maybe"}, "importance"),
        ("patch", "/observations/1", {"pinned": "yes"}, "pinned"),
        ("patch", "/observations/1", {"valid_from": "2030-01-01", "valid_to": "2020-01-01"},
         "valid_to"),
        ("get", "/search?q=rebase&as_of=soon", None, "as_of"),
        ("post", "/consolidate", {"threshold": 2}, "threshold"),
        ("post", "/consolidate", {"max": 0}, "max"),
        ("post", "/review/mark_reviewed", {"id": 0}, "id"),
        ("get", "/review?days=0", None, "days"),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_naming_the_field(
    client: TestClient, store: Store, method: str, url: str, body: dict | None, field: str
) -> None:
    store.add_observation(title="Rule", content="always rebase", project="acme")
    before = store.canonical_export()
    answer = client.request(method.upper(), url, json=body)
    assert answer.status_code == 400, answer.text
    assert field in answer.json()["error"]
    assert store.canonical_export() == before


def test_pin_restore_archive_review_and_consolidate(client: TestClient, store: Store) -> None:
    text = "**What**: raised the gunicorn worker timeout to 60s\n**Why**: slow SSO redirect"
    store.import_data({"version": "0.1.0", "observations": [
        {"sync_id": "obs-a", "session_id": "s", "project": "acme", "title": "Login fix",
         "content": text, "created_at": "2026-01-01 10:00:00", "updated_at": "2026-01-01 10:00:00"},
        {"sync_id": "obs-b", "session_id": "s", "project": "acme", "title": "Login fixed",
         "content": text + "\nnginx", "created_at": "2026-01-02 10:00:00",
         "updated_at": "2026-01-02 10:00:00"},
    ]})  # fmt: skip
    review = client.get("/review?project=acme").json()
    assert {o["sync_id"] for o in review} == {"obs-a", "obs-b"}  # old, never read
    marked = client.post("/review/mark_reviewed", json={"id": review[0]["id"]})
    assert marked.status_code == 200 and marked.json()["reviewed_at"]
    dry = client.post("/consolidate", json={"project": "acme", "dry_run": True}).json()
    assert dry["merged"] == 2 and dry["merges"][0]["status"] == "planned"
    done = client.post("/consolidate", json={"project": "acme"}).json()
    merged_id = done["merges"][0]["merged"]["id"]
    archived = client.get("/observations/archived?project=acme").json()
    assert {o["sync_id"] for o in archived} == {"obs-a", "obs-b"}
    assert all(o["delete_reason"] == "archived" for o in archived)
    assert client.put(f"/observations/{archived[0]['id']}/pin").status_code == 409
    back = client.post("/observations/restore", json={"id": archived[0]["id"]})
    assert back.status_code == 200 and back.json()["superseded_by"] is None
    gone = client.post("/observations/archive", json={"id": merged_id})
    assert gone.status_code == 200 and gone.json()["delete_reason"] == "archived"
    assert client.post("/observations/restore", json={"id": 999}).status_code == 404


def test_archive_and_consolidate_need_the_token_when_one_is_set(
    guarded: TestClient, store: Store
) -> None:
    memory = store.add_observation(title="Rule", content="always rebase", project="acme")
    assert guarded.post("/observations/archive", json={"id": 1}).status_code == 401
    assert guarded.post("/consolidate", json={}).status_code == 401
    assert store.get_observation(memory.observation.id).deleted_at is None
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded.post("/observations/archive", json={"id": 1}, headers=headers).status_code == 200
    assert guarded.put("/observations/1/pin").status_code == 409  # open, but it is archived now
