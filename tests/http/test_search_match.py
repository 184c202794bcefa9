"""``GET /search`` and ``GET /prompts/search`` carry why each result matched (issue 14), and a
plain save matches only through its own words (the Go tool's e2e expectation)."""

from __future__ import annotations

from litestar.testing import TestClient


def test_search_results_carry_their_match(client: TestClient) -> None:
    for title, content in (
        ("Deploy credentials", "the deploy key lives in the vault"),
        ("Connection pooling", "pgbouncer runs in transaction mode"),
        ("Prefers tabs", "the user prefers tabs"),
    ):
        assert (
            client.post("/observations", json={"title": title, "content": content}).status_code
            == 201
        )
    found = client.get("/search", params={"q": "pgbouncer"}).json()
    assert [m["title"] for m in found] == ["Connection pooling"]
    assert found[0]["match"] == {
        "tier": "words",
        "words": ["pgbouncer"],
        "prefix_words": [],
        "context_words": [],
        "context": False,
    }
    schema = client.get("/schema/openapi.json").json()
    assert "match" in schema["components"]["schemas"]["Observation"]["properties"]


def test_prompt_search_carries_its_match(client: TestClient) -> None:
    client.post("/prompts", json={"content": "move everything to PostgreSQL", "session_id": "s1"})
    found = client.get("/prompts/search", params={"q": "postgres"}).json()
    assert found[0]["match"]["tier"] == "prefix"
    assert found[0]["match"]["prefix_words"] == ["postgres"]
