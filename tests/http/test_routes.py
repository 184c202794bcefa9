"""Every route through litestar's test client: status codes, answer shapes and store effects."""

from __future__ import annotations

import orjson
from litestar.testing import TestClient

from engram import __version__
from engram.store import Store
from tests.support.http import BASE_URL


def save(client: TestClient, title: str, content: str, **extra) -> dict:
    response = client.post("/observations", json={"title": title, "content": content, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def test_health_names_the_service_and_instance(client: TestClient, store: Store) -> None:
    body = client.get("/health").json()
    assert body == {
        "status": "ok",
        "service": "engram",
        "version": __version__,
        "instance_id": store.origin,
    }


def test_session_lifecycle(client: TestClient, store: Store) -> None:
    created = client.post("/sessions", json={"id": "s-1", "project": "Acme", "directory": "/src"})
    assert created.status_code == 201 and created.json() == {"id": "s-1", "status": "created"}
    assert store.get_session("s-1").project == "acme"

    ended = client.post("/sessions/s-1/end", json={"summary": "fixed the login"})
    assert ended.status_code == 200 and ended.json() == {"id": "s-1", "status": "completed"}
    assert store.get_session("s-1").summary == "fixed the login"
    # The body is optional: ending without a summary works too.
    assert client.post("/sessions/s-1/end").status_code == 200

    save(client, "Login fix", "raised the token TTL", session_id="s-1", project="acme")
    client.post("/prompts", json={"content": "why does login fail?", "session_id": "s-1"})
    detail = client.get("/sessions/s-1").json()
    assert detail["session"]["id"] == "s-1" and detail["session"]["directory"] == "/src"
    assert [o["title"] for o in detail["observations"]] == ["Login fix"]
    assert [p["content"] for p in detail["prompts"]] == ["why does login fail?"]

    recent = client.get("/sessions/recent", params={"project": "acme"}).json()
    assert recent[0]["id"] == "s-1" and recent[0]["observation_count"] == 1


def test_delete_session_rules(client: TestClient, store: Store) -> None:
    save(client, "Busy", "a memory in the session", session_id="s-busy")
    refused = client.delete("/sessions/s-busy")
    assert refused.status_code == 409 and "still has 1 observation" in refused.json()["error"]
    assert store.get_session("s-busy")

    client.post("/sessions", json={"id": "s-empty"})
    client.post("/prompts", json={"content": "a prompt", "session_id": "s-empty"})
    gone = client.delete("/sessions/s-empty")
    assert gone.status_code == 200 and gone.json() == {"id": "s-empty", "status": "deleted"}
    assert client.get("/sessions/s-empty").status_code == 404
    assert store.recent_prompts() == []
    assert client.delete("/sessions/s-empty").status_code == 404


def test_save_dedupe_topic_and_warnings(client: TestClient) -> None:
    first = save(client, "Auth model", "JWT with refresh tokens", type="decision", project="acme")
    assert first["status"] == "saved" and first["action"] == "created"
    assert first["observation"]["type"] == "decision" and first["id"] == first["observation"]["id"]
    assert first["suggested_topic_key"] and first["truncated"] is False
    again = save(client, "Auth model", "JWT with refresh tokens", type="decision", project="acme")
    assert again["action"] == "deduplicated" and again["id"] == first["id"]
    assert again["observation"]["duplicate_count"] == 2

    topic = save(client, "Auth", "sessions in redis", topic_key="architecture/auth", project="acme")
    updated = save(
        client, "Auth", "sessions in postgres", topic_key="architecture/auth", project="acme"
    )
    assert updated["action"] == "topic_updated" and updated["id"] == topic["id"]
    assert updated["observation"]["revision_count"] == 2

    noisy = save(client, "Note", "x" * 60_000, project="ACME--web")
    assert noisy["truncated"] is True and noisy["original_bytes"] == 60_000
    assert noisy["limit_bytes"] == 50_000
    assert any("normalized" in w for w in noisy["warnings"])
    assert noisy["observation"]["project"] == "acme-web"

    private = save(client, "Key", "token is <private>sk-123</private>")
    assert private["observation"]["content"] == "token is [REDACTED]"


def test_get_patch_and_delete_observation(client: TestClient, store: Store) -> None:
    oid = save(client, "Cache", "redis for sessions", project="acme")["id"]
    got = client.get(f"/observations/{oid}").json()
    assert got["title"] == "Cache" and "rank" not in got and got["deleted_at"] is None

    patched = client.patch(
        f"/observations/{oid}", json={"title": "Cache layer", "scope": "personal"}
    )
    assert patched.status_code == 200
    assert patched.json()["title"] == "Cache layer" and patched.json()["scope"] == "personal"
    assert patched.json()["revision_count"] == 2

    soft = client.delete(f"/observations/{oid}")
    assert soft.json() == {"id": oid, "status": "deleted", "hard_delete": False}
    assert client.get(f"/observations/{oid}").status_code == 404
    assert store.get_observation(oid, include_deleted=True).deleted_at is not None

    hard = client.delete(f"/observations/{oid}", params={"hard": "true"})
    assert hard.json() == {"id": oid, "status": "deleted", "hard_delete": True}
    missing = client.get(f"/observations/{oid}")
    assert missing.status_code == 404 and missing.json() == {
        "error": f"Observation #{oid} not found"
    }


def test_recent_and_paged_lists(client: TestClient) -> None:
    for i in range(5):
        save(client, f"Memory {i}", f"content number {i}", project="acme", type="bugfix")
    save(client, "Elsewhere", "another project", project="other")
    recent = client.get("/observations/recent", params={"project": "acme", "limit": 3}).json()
    assert [o["title"] for o in recent] == ["Memory 4", "Memory 3", "Memory 2"]

    page = client.get("/observations", params={"limit": 2, "offset": 2}).json()
    assert page["total"] == 6 and page["offset"] == 2 and page["limit"] == 2
    assert [o["title"] for o in page["observations"]] == ["Memory 3", "Memory 2"]
    typed = client.get("/observations", params={"type": "bugfix", "scope": "project"}).json()
    assert typed["total"] == 5
    dated = client.get("/observations", params={"since": "2000-01-01", "until": "2001-01-01"})
    assert dated.json()["total"] == 0 and dated.json()["observations"] == []


def test_search_ranks_and_filters(client: TestClient) -> None:
    save(client, "Login timeout", "raised the token TTL to fix login", project="acme")
    save(client, "Postgres", "chose postgres for the cloud", project="acme")
    save(client, "Login elsewhere", "login page redesign", project="web")
    found = client.get("/search", params={"q": "how did we fix the login?"}).json()
    assert found[0]["title"] == "Login timeout" and "rank" in found[0]
    only = client.get("/search", params={"q": "login", "project": "web"}).json()
    assert [o["title"] for o in only] == ["Login elsewhere"]
    strict = client.get("/search", params={"q": "postgres redesign", "match_mode": "all"}).json()
    assert strict == []
    assert len(client.get("/search", params={"q": "login", "limit": 1}).json()) == 1


def test_search_treats_fts_syntax_as_text(client: TestClient) -> None:
    save(client, "Quotes", 'the "NEAR" operator and col:umn syntax')
    for q in ['"unbalanced', "NEAR(a b)", "col:umn", "a* OR -b", "(((", "'; DROP TABLE x; --"]:
        response = client.get("/search", params={"q": q})
        assert response.status_code == 200, (q, response.text)
    assert client.get("/search", params={"q": "NEAR"}).json()[0]["title"] == "Quotes"


def test_timeline_around_a_memory(client: TestClient) -> None:
    ids = [
        save(client, f"Step {i}", f"step {i} of the work", session_id="s-t")["id"] for i in range(5)
    ]
    body = client.get(
        "/timeline", params={"observation_id": ids[2], "before": 1, "after": 5}
    ).json()
    assert body["focus"]["id"] == ids[2]
    assert [e["id"] for e in body["before"]] == [ids[1]]
    assert [e["id"] for e in body["after"]] == ids[3:]
    assert body["total_in_range"] == 5 and body["session_info"]["id"] == "s-t"
    assert client.get("/timeline", params={"observation_id": 999}).status_code == 404


def test_prompts(client: TestClient) -> None:
    saved = client.post("/prompts", json={"content": "how do we deploy?", "project": "acme"})
    assert saved.status_code == 201
    body = saved.json()
    assert body["status"] == "saved" and body["prompt"]["session_id"] == "manual-save-acme"
    client.post("/prompts", json={"content": "what about rollbacks?", "project": "acme"})
    recent = client.get("/prompts/recent", params={"limit": 1}).json()
    assert [p["content"] for p in recent] == ["what about rollbacks?"]
    found = client.get("/prompts/search", params={"q": "deploy"}).json()
    assert [p["content"] for p in found] == ["how do we deploy?"] and "rank" in found[0]
    deleted = client.delete(f"/prompts/{body['id']}")
    assert deleted.json() == {"id": body["id"], "status": "deleted"}
    assert client.delete(f"/prompts/{body['id']}").status_code == 404


def test_context_with_byte_budget(client: TestClient) -> None:
    empty = client.get("/context").json()
    assert empty == {"project": None, "context": ""}
    for i in range(10):
        save(client, f"Memory {i}", "some longer content " * 20, project="acme")
    full = client.get("/context", params={"project": "ACME"}).json()
    assert full["project"] == "acme"
    assert full["context"].startswith("## Memory from Previous Sessions")
    cut = client.get("/context", params={"project": "acme", "max_bytes": 300}).json()["context"]
    assert len(cut.encode()) <= 300 and cut.endswith("[truncated]")
    capped = client.get("/context", params={"max_bytes": 10**9}).json()["context"]
    assert capped == full["context"]  # over the 64 KiB cap: capped, not refused
    compact = client.get("/context", params={"compact": "true", "observations": -1}).json()
    assert "### Recent Observations" not in compact["context"]


def test_stats_projects_and_merge(client: TestClient, store: Store) -> None:
    save(client, "One", "first", project="acme")
    save(client, "Two", "second", project="acme_web")
    stats = client.get("/stats").json()
    assert stats["total_observations"] == 2 and set(stats["projects"]) == {"acme", "acme_web"}
    assert client.get("/stats", params={"project": "acme"}).json()["total_observations"] == 1
    listed = client.get("/projects").json()
    assert listed["count"] == 2 and {p["name"] for p in listed["projects"]} == {"acme", "acme_web"}

    merged = client.post("/projects/merge", json={"from": ["acme_web"], "to": "acme"}).json()
    assert merged["canonical"] == "acme" and merged["observations_updated"] == 1
    assert store.project_names() == ["acme"]
    migrated = client.post(
        "/projects/migrate", json={"old_project": "acme", "new_project": "acme-corp"}
    ).json()
    assert migrated["sources_merged"] == ["acme"] and store.project_names() == ["acme-corp"]


def test_topic_key_suggestion(client: TestClient) -> None:
    body = {"type": "bug", "title": "Login fails after deploy"}
    assert client.post("/topic-keys/suggest", json=body).json() == {
        "topic_key": "bug/login-fails-after-deploy"
    }
    refused = client.post("/topic-keys/suggest", json={"type": "bug", "title": " "})
    assert refused.status_code == 400 and refused.json()["field"] == "title"


def test_current_project_is_the_servers(client: TestClient, monkeypatch, tmp_path) -> None:
    repo = tmp_path / "my-service"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    body = client.get("/project/current").json()
    assert body["project"] == "my-service" and body["project_source"] == "git_root"
    assert body["cwd"] == str(repo)


def test_current_project_honours_engram_project(store: Store) -> None:
    from dataclasses import replace

    from engram.http.app import create_app

    app = create_app(store, config=replace(store.config, project_override="Team-X"))
    with TestClient(app, base_url=BASE_URL) as client:
        body = client.get("/project/current").json()
    assert body["project"] == "team-x" and body["project_source"] == "process_override"


def test_sync_status_without_cloud(client: TestClient) -> None:
    body = client.get("/sync/status", params={"project": "acme"}).json()
    assert body["project"] == "acme" and body["enabled"] is False
    assert body["reason_code"] == "cloud_not_configured" and body["phase"] == "disabled"
    assert body["upgrade"] == {"stage": None, "reason_code": None, "reason_message": None}
    for key in ("last_error", "consecutive_failures", "backoff_until", "last_sync_at"):
        assert key in body
    refused = client.get("/sync/status", params={"all_projects": "true"})
    assert refused.status_code == 400
    assert refused.json()["error_code"] == "unsupported_project_scope"


def test_export_then_import_into_another_store(client: TestClient, make_store) -> None:
    from engram.http.app import create_app

    save(client, "Exported", "travels in the backup", project="acme", session_id="s-x")
    client.post("/prompts", json={"content": "a prompt", "session_id": "s-x"})
    response = client.get("/export")
    assert response.status_code == 200
    assert 'filename="engram-export.json"' in response.headers["content-disposition"]
    document = response.json()
    assert document["version"] == "0.1.0" and len(document["observations"]) == 1
    assert client.get("/export", params={"project": "nobody"}).json()["observations"] == []

    other = make_store("other")
    with TestClient(create_app(other), base_url=BASE_URL) as second:
        first = second.post("/import", json=document)
        assert first.status_code == 200
        assert first.json() == {
            "sessions_imported": 1,
            "observations_imported": 1,
            "prompts_imported": 1,
            "skipped": 0,
            "relations_imported": 0,  # issue 20: 0.2.0 documents carry relations
            "copies_retired": 0,  # memories that came back through the Go tool (issue 16)
        }
        again = second.post("/import", json=document).json()
        assert again["observations_imported"] == 0 and again["skipped"] == 3
        copy = second.get("/export").json()
    for section in ("sessions", "observations", "prompts"):
        assert copy[section] == document[section]


def test_null_optional_fields_mean_their_defaults(client: TestClient) -> None:
    body = {"title": "t", "content": "c", "type": None, "project": None, "scope": None}
    saved = client.post("/observations", json=body).json()["observation"]
    # no project: the server's own (issue 17 item 1), no longer project ""
    here = client.get("/project/current").json()["project"]
    assert here and (saved["type"], saved["project"], saved["scope"]) == ("manual", here, "project")
    assert client.post("/sessions", json={"id": "s", "project": None}).status_code == 201
    assert client.post("/prompts", json={"content": "p", "project": None}).status_code == 201
    suggested = client.post("/topic-keys/suggest", json={"title": "Cache", "type": None})
    assert suggested.json() == {"topic_key": "topic/cache"}


def test_restore_undoes_soft_deletes(client: TestClient, store: Store) -> None:
    """Issue 17 item 10: POST /observations/restore brings soft-deleted memories back (all or
    none); GET on a deleted id says it was deleted and how to restore it."""
    one = save(client, "One", "first", project="acme")["id"]
    two = save(client, "Two", "second", project="acme")["id"]
    assert client.delete(f"/observations/{one}").status_code == 200
    gone = client.get(f"/observations/{one}")
    assert gone.status_code == 404 and f"#{one} was deleted at" in gone.json()["error"]
    refused = client.post("/observations/restore", json={"ids": [one, two]})
    assert refused.status_code == 409 and "is not deleted" in refused.json()["error"]
    assert store.get_observation(one, include_deleted=True).deleted_at is not None
    back = client.post("/observations/restore", json={"ids": [one]})
    assert back.status_code == 200
    assert back.json()["count"] == 1 and back.json()["restored"][0]["title"] == "One"
    assert client.get(f"/observations/{one}").status_code == 200
    assert client.post("/observations/restore", json={"ids": []}).status_code == 400
    # one route for archives and soft deletes: {"id"} answers with the memory, {"ids"} a list
    assert client.post("/observations/restore", json={}).status_code == 400
    both = client.post("/observations/restore", json={"id": one, "ids": [one]})
    assert both.status_code == 400 and "not both" in both.json()["error"]
    client.delete(f"/observations/{one}")
    alone = client.post("/observations/restore", json={"id": one})
    assert alone.status_code == 200 and alone.json()["id"] == one
    client.delete(f"/observations/{two}", params={"hard": "true"})
    assert client.post("/observations/restore", json={"ids": [two]}).status_code == 404


def test_history_shows_earlier_versions(client: TestClient, store: Store) -> None:
    """Issue 17 item 11: GET /observations/{id}/history, the same data as engram history."""
    oid = save(client, "Auth", "JWT", project="acme")["id"]
    assert client.patch(f"/observations/{oid}", json={"content": "Sessions"}).status_code == 200
    history = client.get(f"/observations/{oid}/history")
    assert history.status_code == 200
    body = history.json()
    assert body["observation"]["content"] == "Sessions" and body["count"] == 1
    assert body["revisions"][0]["content"] == "JWT" and body["revisions"][0]["written_here"]
    assert body == orjson.loads(orjson.dumps(store.history(oid).to_dict()))
    assert client.get("/observations/999/history").status_code == 404
