"""The older chunk routes: push a chunk (decomposed into the mutation log), list, fetch."""

from __future__ import annotations

import gzip
from collections.abc import Callable

import orjson
from litestar.testing import TestClient
from sqlalchemy import Engine, func, select

from engram_cloud import controls, models
from tests.support.cloud import LEGACY_TOKEN, bearer

AUTH = bearer(LEGACY_TOKEN)
CHUNK = {
    "sessions": [
        {
            "id": "s-go",
            "project": "whatever",
            "directory": "/src/acme",
            "started_at": "2026-01-02 03:04:05",
        }
    ],
    "observations": [
        {
            "sync_id": "obs-go1",
            "session_id": "s-go",
            "type": "decision",
            "title": "Use Go",
            "content": "It was fast",
            "scope": "project",
            "created_at": "2026-01-02 03:05:00",
            "updated_at": "2026-01-02 03:05:00",
        }
    ],
    "prompts": None,
    "mutations": [
        {
            "entity": "observation",
            "entity_key": "obs-go2",
            "op": "delete",
            "payload": '{"sync_id": "obs-go2", "hard_delete": true}',
            "occurred_at": "2026-01-02 04:00:00",
        }
    ],
}


def push_chunk(client: TestClient, body: dict, headers: dict[str, str] = AUTH, **params: str):
    return client.post("/sync/push", json=body, headers=headers, params=params)


def test_chunk_round_trip_and_decomposition(client: TestClient, engine: Engine) -> None:
    body = {
        "chunk_id": "deadbeef",
        "created_by": "gopher",
        "project": "Acme",
        "client_created_at": "2026-01-02T03:06:00Z",
        "data": CHUNK,
    }
    first = push_chunk(client, body)
    assert first.status_code == 200, first.text
    answer = first.json()
    chunk_id = answer["chunk_id"]
    assert answer["status"] == "ok" and len(chunk_id) == 8 and chunk_id != "deadbeef"
    assert answer["mutations"]["accepted"] == 3 and answer["latest_seq"] == 3
    # The same chunk again: idempotent, nothing new in the log.
    again = push_chunk(client, body).json()
    assert again["chunk_id"] == chunk_id and again["latest_seq"] == 3
    manifest = client.get("/sync/pull", params={"project": "acme"}, headers=AUTH).json()
    assert manifest == {
        "version": 1,
        "chunks": [
            {
                "id": chunk_id,
                "created_by": "gopher",
                "created_at": "2026-01-02T03:06:00Z",
                "sessions": 1,
                "memories": 1,
                "prompts": 0,
            }
        ],
    }
    raw = client.get(f"/sync/pull/{chunk_id}", params={"project": "acme"}, headers=AUTH)
    assert raw.headers["content-type"].startswith("application/json")
    stored = orjson.loads(raw.content)
    assert stored["observations"][0]["project"] == "acme"  # canonicalized for the project
    enveloped = client.get(
        f"/sync/pull/{chunk_id}",
        params={"project": "acme"},
        headers={**AUTH, "Accept": "application/vnd.engram.sync+gzip; version=1"},
    )
    assert enveloped.headers["content-type"].startswith("application/vnd.engram.sync+gzip")
    assert gzip.decompress(enveloped.content) == raw.content
    # Mutation clients see the chunk's rows.
    pulled = client.get("/sync/mutations/pull", headers=AUTH).json()["mutations"]
    assert [(m["entity"], m["key"], m["op"]) for m in pulled] == [
        ("session", "s-go", "upsert"),
        ("observation", "obs-go1", "upsert"),
        ("observation", "obs-go2", "delete"),
    ]
    assert all(m["origin"] == "0" * 16 and m["project"] == "acme" for m in pulled)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(models.chunks)).scalar_one() == 1
        title = conn.execute(select(models.observations.c.title)).scalar_one()
    assert title == "Use Go"


def test_chunk_errors(client: TestClient) -> None:
    cases = [
        ({"data": CHUNK}, 400, "upgrade_blocked_project_required"),
        ({"project": "acme"}, 400, "upgrade_repairable_payload_invalid"),
        ({"project": "acme", "data": []}, 400, "upgrade_repairable_payload_invalid"),
        ({"project": "acme", "data": {"sessions": 5}}, 400, "upgrade_repairable_payload_invalid"),
        (
            {"project": "acme", "data": {"observations": [{"sync_id": "x"}]}},
            400,
            "upgrade_repairable_payload_invalid",
        ),
        (
            {"project": "acme", "data": CHUNK, "client_created_at": "yesterday"},
            400,
            "upgrade_repairable_payload_invalid",
        ),
    ]
    for body, status, code in cases:
        response = push_chunk(client, body)
        assert response.status_code == status, body
        assert response.json()["error_code"] == code, (body, response.json())
    bad_json = client.post("/sync/push", content=b"{oops", headers=AUTH)
    assert bad_json.json()["error_code"] == "upgrade_repairable_payload_invalid"
    assert "invalid push payload" in bad_json.json()["error"]
    # The project may come from the query string instead of the body.
    assert push_chunk(client, {"data": CHUNK}, project="acme").status_code == 200
    missing = client.get("/sync/pull/00000000", params={"project": "acme"}, headers=AUTH)
    assert missing.status_code == 404 and "read chunk" in missing.json()["error"]
    assert (
        client.get("/sync/pull", headers=AUTH).json()["error_code"]
        == "upgrade_blocked_project_required"
    )


def test_chunk_access_and_pause(
    client: TestClient, make_user: Callable[..., str], engine: Engine
) -> None:
    token = bearer(make_user("bob", ["acme"]))
    assert (
        push_chunk(client, {"project": "widgets", "data": CHUNK}, headers=token).status_code == 403
    )
    assert client.get("/sync/pull", params={"project": "widgets"}, headers=token).status_code == 403
    assert (
        client.get("/sync/pull/abc", params={"project": "widgets"}, headers=token).status_code
        == 403
    )
    assert push_chunk(client, {"project": "acme", "data": CHUNK}, headers=token).status_code == 200
    with engine.begin() as conn:
        controls.set_sync_enabled(conn, "acme", False, reason=None, updated_by="test")
    paused = push_chunk(client, {"project": "acme", "data": CHUNK}, headers=token)
    assert paused.status_code == 409 and paused.json()["error_code"] == "sync-paused"
    with engine.connect() as conn:
        rows = controls.audit_rows(conn, outcome=controls.OUTCOME_PAUSED)
    assert [(r["action"], r["contributor"], r["entry_count"]) for r in rows] == [
        ("chunk_push", "bob", 2)
    ]
    assert client.get("/sync/pull", params={"project": "acme"}, headers=token).status_code == 200
