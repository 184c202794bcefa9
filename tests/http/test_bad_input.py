"""Bad input gets a clear JSON error with the right status, and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from litestar.testing import TestClient

from engram.http.app import create_app
from engram.settings import Config
from engram.store import Store
from tests.support.http import BASE_URL


def snapshot(store: Store) -> tuple[bytes, int]:
    """Everything a write could change: the entities and the journal."""
    return store.canonical_export(), store.journal.count_pending("test:all", include_personal=True)


def seed(client: TestClient) -> TestClient:
    response = client.post(
        "/observations",
        json={"title": "Seed", "content": "already here", "session_id": "s-1", "project": "acme"},
    )
    assert response.status_code == 201
    client.post("/prompts", json={"content": "a prompt", "session_id": "s-1"})
    return client


@pytest.fixture
def seeded(client: TestClient) -> TestClient:
    return seed(client)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[tuple[TestClient, Store]]:
    """One seeded server for the table of refused requests below: none of them may write,
    and each checks that, so they can share it (the table runs in a fraction of the time)."""
    config = Config(data_dir=tmp_path_factory.mktemp("bad-input"))
    with (
        Store.open(config=config) as store,
        TestClient(create_app(store), base_url=BASE_URL) as client,
    ):
        yield seed(client), store


JSON = {"content-type": "application/json"}
BAD_REQUESTS = [
    # (method, url, request kwargs, status, words the error must contain, field)
    (
        "post",
        "/observations",
        {"content": b"{bad json", "headers": JSON},
        400,
        "invalid JSON",
        None,
    ),
    ("post", "/observations", {"content": b"", "headers": JSON}, 400, "body", None),
    ("post", "/observations", {"json": [1, 2]}, 400, "Expected `object`", None),
    ("post", "/observations", {"json": {"content": "x"}}, 400, "title", "title"),
    ("post", "/observations", {"json": {"title": "x"}}, 400, "content", "content"),
    ("post", "/observations", {"json": {"title": 5, "content": "x"}}, 400, "title", "title"),
    ("post", "/observations", {"json": {"title": " \n", "content": "x"}}, 400, "title", "title"),
    (
        "post",
        "/observations",
        {"json": {"title": "t", "content": "c", "session_id": "s" * 129}},
        400,
        "session_id",
        "session_id",
    ),
    (
        "post",
        "/observations",
        {"json": {"title": "t", "content": "c", "scope": 7}},
        400,
        "scope",
        "scope",
    ),
    ("post", "/sessions", {"json": {"project": "acme"}}, 400, "id", "id"),
    ("post", "/sessions", {"json": {"id": "x" * 129}}, 400, "id", "id"),
    ("post", "/sessions/nope/end", {"json": {"summary": "s"}}, 404, "not found", None),
    ("post", "/sessions/s-1/end", {"json": {"summary": 3}}, 400, "summary", "summary"),
    ("patch", "/observations/1", {"json": {}}, 400, "at least one field", None),
    ("patch", "/observations/1", {"json": {"title": ""}}, 400, "title", "title"),
    ("patch", "/observations/1", {"json": {"title": ["x"]}}, 400, "title", "title"),
    ("patch", "/observations/99", {"json": {"title": "x"}}, 404, "not found", None),
    ("get", "/observations/0", {}, 400, "observation_id", "observation_id"),
    ("get", "/observations/99999999999999999999999", {}, 400, "observation_id", "observation_id"),
    ("get", "/observations/abc", {}, 404, "not found", None),
    ("get", "/observations/99", {}, 404, "#99 not found", None),
    ("get", "/observations?offset=-1", {}, 400, "offset", "offset"),
    ("get", "/observations?since=last+tuesday", {}, 400, "since", "since"),
    ("get", "/observations/recent?until=2026-13-45", {}, 400, "until", "until"),
    ("get", "/search", {}, 400, "q", "q"),
    ("get", "/search?q=", {}, 400, "query cannot be empty", "query"),
    ("get", "/search?q=%20%20", {}, 400, "query cannot be empty", "query"),
    ("get", "/search?q=x&match_mode=some", {}, 400, "match_mode", "match_mode"),
    ("get", "/search?q=x&scope=everyone", {}, 400, "scope", "scope"),
    ("get", "/search?q=x&since=2026-02-30", {}, 400, "since", "since"),
    ("get", "/prompts/search", {}, 400, "q", "q"),
    ("get", "/timeline", {}, 400, "observation_id", "observation_id"),
    ("get", "/timeline?observation_id=77", {}, 404, "not found", None),
    # (limit, before/after and hard are read leniently, as the Go tool reads them: see
    # test_go_lenient.py; observation_id stays strict there too)
    ("get", "/timeline?observation_id=abc", {}, 400, "observation_id", "observation_id"),
    ("get", "/context?max_bytes=0", {}, 400, "max_bytes", "max_bytes"),
    ("get", "/context?compact=perhaps", {}, 400, "compact", "compact"),
    ("get", "/sessions/unknown", {}, 404, "not found", None),
    ("delete", "/sessions/unknown", {}, 404, "not found", None),
    ("delete", "/observations/42", {}, 404, "not found", None),
    ("delete", "/prompts/42", {}, 404, "not found", None),
    ("delete", "/prompts/abc", {}, 404, "not found", None),
    ("post", "/projects/merge", {"json": {"from": [], "to": "acme"}}, 400, "source", "from"),
    ("post", "/projects/merge", {"json": {"from": ["acme"]}}, 400, "to", "to"),
    ("post", "/projects/merge", {"json": {"from": ["acme"], "to": " "}}, 400, "target", "to"),
    (
        "post",
        "/projects/migrate",
        {"json": {"old_project": "acme"}},
        400,
        "new_project",
        "new_project",
    ),
    ("post", "/topic-keys/suggest", {"json": {"title": 1}}, 400, "title", "title"),
    ("post", "/observations/passive", {"json": {}}, 400, "content", "content"),
    ("post", "/prompts", {"json": {"content": "   "}}, 400, "content", "content"),
    ("post", "/import", {"json": {"version": "9.9"}}, 400, "unsupported export version", None),
    ("post", "/import", {"json": {"sessions": []}}, 400, "version", "version"),
    (
        "post",
        "/import",
        {"json": {"version": "0.1.0", "observations": [{"session_id": "s", "title": "t"}]}},
        400,
        "content",
        "observations[0].content",
    ),
    (
        "post",
        "/import",
        {
            "json": {
                "version": "0.1.0",
                "observations": [
                    {"session_id": "s", "title": "t", "content": "c", "revision_count": 2**70}
                ],
            }
        },
        400,
        "revision_count",
        "observations[0].revision_count",
    ),
    ("get", "/nowhere", {}, 404, "not found: GET /nowhere", None),
    ("put", "/observations/1", {"json": {}}, 405, "PUT not allowed", None),
    ("post", "/health", {}, 405, "not allowed", None),
    ("get", "/sync/status?all_projects=true", {}, 400, "per project", None),
]


@pytest.mark.parametrize(
    ("method", "url", "kwargs", "status", "words", "field"),
    BAD_REQUESTS,
    ids=[f"{m.upper()} {u} {i}" for i, (m, u, *_) in enumerate(BAD_REQUESTS)],
)
def test_bad_request_is_refused_clearly_and_writes_nothing(
    shared, method, url, kwargs, status, words, field
) -> None:
    seeded, store = shared
    before = snapshot(store)
    response = getattr(seeded, method)(url, **kwargs) if method != "delete" else seeded.delete(url)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body.get("error"), str) and words.lower() in body["error"].lower(), body
    assert body.get("field") == field, body
    assert snapshot(store) == before
    assert seeded.get("/health").status_code == 200


def test_bodies_over_the_limit_get_413(seeded: TestClient, store: Store) -> None:
    before = snapshot(store)
    huge = {"title": "t", "content": "x" * (2 << 20)}
    response = seeded.post("/observations", json=huge)
    assert response.status_code == 413
    assert response.json() == {"error": "request body too large (limit 1,048,576 bytes)"}
    # Import takes up to 50 MB: 2 MB is fine there, 51 MB is not.
    document = {
        "version": "0.1.0",
        "observations": [
            {"session_id": "big", "title": f"big {i}", "content": "y" * 20_000} for i in range(100)
        ],
    }
    assert seeded.post("/import", json=document).json()["observations_imported"] == 100
    after_import = snapshot(store)
    oversized = b'{"version": "0.1.0", "pad": "' + b"z" * 51_000_000 + b'"}'
    refused = seeded.post("/import", content=oversized, headers=JSON)
    assert refused.status_code == 413 and "50,000,000" in refused.json()["error"]
    assert snapshot(store) == after_import != before


def test_import_is_all_or_nothing(seeded: TestClient, store: Store) -> None:
    before = snapshot(store)
    document = {
        "version": "0.1.0",
        "sessions": [{"id": "imported"}],
        "observations": [
            {"session_id": "imported", "title": "good", "content": "fine"},
            {"session_id": "imported", "title": "  ", "content": "blank title"},
        ],
    }
    response = seeded.post("/import", json=document)
    assert response.status_code == 400 and "observations[1].title" in response.json()["error"]
    assert snapshot(store) == before


def test_go_exports_with_null_lists_import(seeded: TestClient) -> None:
    body = orjson.dumps(
        {"version": "0.1.0", "sessions": None, "observations": None, "prompts": None}
    )
    response = seeded.post("/import", content=body, headers=JSON)
    assert response.status_code == 200 and response.json()["skipped"] == 0


def test_invalid_utf8_and_odd_characters_in_queries(seeded: TestClient, store: Store) -> None:
    before = snapshot(store)
    for url in (
        "/search?q=%ff%fe",
        "/search?q=%00",
        "/observations?project=%ff",
        "/context?project=%c3",
    ):
        response = seeded.get(url)
        assert response.status_code in (200, 400), (url, response.text)
        assert "error" in response.json() or response.status_code == 200
    assert snapshot(store) == before


def test_a_locked_database_answers_503_and_recovers(config, tmp_path) -> None:
    """Another process holding SQLite's write lock: the save is refused (503, nothing half
    written), reads still work, and the next save after the lock goes away succeeds."""
    import sqlite3
    from dataclasses import replace

    with Store.open(config=replace(config, busy_timeout_ms=100)) as store:
        store.add_observation(title="Before", content="saved before the lock")
        before = snapshot(store)
        other = sqlite3.connect(store.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # what a long write in another process looks like
        try:
            with TestClient(create_app(store), base_url=BASE_URL) as client:
                refused = client.post("/observations", json={"title": "t", "content": "c"})
                assert refused.status_code == 503
                assert "locked by another process" in refused.json()["error"]
                assert client.get("/search", params={"q": "saved"}).status_code == 200
                other.execute("ROLLBACK")
                saved = client.post("/observations", json={"title": "t", "content": "c"})
                assert saved.status_code == 201
        finally:
            other.close()
        assert snapshot(store) != before
        assert store.count_observations() == 2
