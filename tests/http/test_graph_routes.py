"""Issue 20 over HTTP: relations (create, list, judge, a memory's relations, pending conflicts),
the entity graph (query, ingest, entities), relations in search results and in 0.2.0 imports;
bad input answered 400/404 naming the problem, nothing written."""

from __future__ import annotations

from litestar.testing import TestClient

from engram.store import Store


def save(client: TestClient, title: str, content: str, project: str = "acme") -> dict:
    answer = client.post(
        "/observations", json={"title": title, "content": content, "project": project}
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["observation"]


def test_relations_over_http(client: TestClient, store: Store) -> None:
    old = save(client, "Session store", "We keep sessions in Redis with a 30 minute TTL")
    new = save(client, "Session store", "We keep sessions in PostgreSQL with a 30 minute TTL")
    # The conflict found off the save path shows on the next read.
    [conflict] = client.get("/relations/conflicts", params={"project": "acme"}).json()
    assert (conflict["relation"], conflict["state"]) == ("conflicts_with", "pending")
    mine = client.get(f"/observations/{old['id']}/relations").json()
    assert mine["needs_review"] is True and mine["relations"][0]["sync_id"] == conflict["sync_id"]
    judged = client.patch(
        f"/relations/{conflict['sync_id']}", json={"status": "judged", "relation": "supersedes"}
    )
    assert judged.status_code == 200 and judged.json()["relation"] == "supersedes"
    found = client.get("/search", params={"q": "sessions redis", "project": "acme"}).json()
    assert [o["id"] for o in found] == [new["id"], old["id"]]
    assert found[1]["relations"][0]["note"].startswith(f"superseded by #{new['id']}")
    assert client.get(f"/relations/{conflict['sync_id']}").json()["state"] == "judged"
    listed = client.get("/relations", params={"project": "acme"}).json()
    assert [r["sync_id"] for r in listed] == [conflict["sync_id"]]
    made = client.post(
        "/relations",
        json={"source_id": old["sync_id"], "target_id": new["id"], "relation": "related",
              "project": "acme"},
    )  # fmt: skip
    assert made.status_code == 201 and made.json()["sync_id"] == conflict["sync_id"]


def test_bad_relation_requests(client: TestClient, store: Store) -> None:
    a = save(client, "A", "first")
    b = save(client, "B", "second", project="widgets")
    before = store.db.scalar("SELECT COUNT(*) FROM sync_journal")
    cases = [
        ({"source_id": a["id"], "target_id": b["id"], "relation": "related"}, 400, "two projects"),
        ({"source_id": a["id"], "target_id": 999, "relation": "related"}, 404, "#999"),
        ({"source_id": a["id"], "target_id": a["id"], "relation": "related"}, 400, "itself"),
        ({"source_id": a["id"], "target_id": b["id"], "relation": "loves"}, 400, "relation"),
        ({"source_id": a["id"], "relation": "related"}, 400, "target_id"),
        ({"source_id": a["id"], "target_id": "x\u0000", "relation": "related"}, 400, "target_id"),
        (
            {"source_id": a["id"], "target_id": b["id"], "relation": "related", "confidence": 3},
            400,
            "confidence",
        ),
    ]
    for body, status, text in cases:
        answer = client.post("/relations", json=body)
        assert answer.status_code == status, (body, answer.text)
        assert text in answer.json()["error"] or text == answer.json().get("field"), answer.text
    assert store.db.scalar("SELECT COUNT(*) FROM sync_journal") == before
    assert client.patch("/relations/rel-nope", json={"status": "judged"}).status_code == 404
    assert client.patch("/relations/rel-nope", json={"status": "orphaned"}).status_code == 400


def test_graph_over_http(client: TestClient) -> None:
    save(
        client,
        "Auth middleware",
        "The auth middleware validates the JWT and loads the user from the session cache.",
    )
    save(
        client,
        "Session cache",
        "The session cache reads entries from the session store when a key expires.",
    )
    ingested = client.post("/graph/ingest", json={"project": "acme"})
    assert ingested.status_code == 200 and ingested.json()["memories"] == 2
    answer = client.get(
        "/graph/query", params={"q": "what connects the auth middleware to the session store?",
                                "project": "acme"},
    ).json()  # fmt: skip
    assert answer["connected"] and [t["predicate"] for t in answer["triples"]] == ["reads_from"] * 2
    assert answer["triples"][0]["source"]["title"] == "Auth middleware"
    entities = client.get("/graph/entities", params={"project": "acme"}).json()
    assert entities[0]["name"] == "session cache"
    one = client.get("/graph/entities/Session Cache", params={"project": "acme"}).json()
    assert one["count"] == 2 and one["kind"] == "service"
    assert client.get("/graph/entities/nothing").json()["relationships"] == []
    assert client.get("/graph/query", params={"q": " "}).status_code == 400
    assert client.get("/graph/query", params={"q": "x", "limit": 0}).status_code == 400
    assert client.post("/graph/ingest", json={"id": 999}).status_code == 404


def test_import_of_a_0_2_0_document(client: TestClient, make_store) -> None:
    from engram.http.app import create_app
    from tests.support.http import BASE_URL

    a = save(client, "A", "first")
    b = save(client, "B", "second")
    client.post(
        "/relations", json={"source_id": b["id"], "target_id": a["id"], "relation": "supersedes"}
    )
    document = client.get("/export").json()
    assert document["version"] == "0.2.0" and len(document["relations"]) == 1
    with TestClient(create_app(make_store("other")), base_url=BASE_URL) as other:
        answer = other.post("/import", json=document)
        assert answer.status_code == 200 and answer.json()["relations_imported"] == 1
        assert other.get("/relations").json()[0]["relation"] == "supersedes"
        bad = {**document, "version": "0.1.0"}
        assert other.post("/import", json=bad).status_code == 400
