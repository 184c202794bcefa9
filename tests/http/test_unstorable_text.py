"""Issue 12, hole 4, through the HTTP API: text the store cannot keep (a NUL character, a lone
surrogate) is refused with 400 naming the field, and nothing is written."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from engram.store import Store


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/observations", {"title": "t\u0000", "content": "c", "project": "acme"}, "title"),
        ("/observations", {"title": "t", "content": "c\u0000d", "project": "acme"}, "content"),
        ("/observations", {"title": "t", "content": "c", "session_id": "s\u0000"}, "session_id"),
        ("/observations", {"title": "t", "content": "c", "topic_key": "a/\u0000"}, "topic_key"),
        ("/prompts", {"content": "why\u0000", "project": "acme"}, "content"),
        ("/sessions", {"id": "s-1", "project": "acme", "directory": "/src\u0000"}, "directory"),
    ],
)
def test_nul_is_refused_with_400_naming_the_field(
    client: TestClient, store: Store, path: str, body: dict, field: str
) -> None:
    before = store.canonical_export(), store.journal.count_pending("x")
    response = client.post(path, json=body)
    assert response.status_code == 400, response.text
    assert field in response.json()["error"] and "NUL" in response.json()["error"]
    assert (store.canonical_export(), store.journal.count_pending("x")) == before


def test_a_lone_surrogate_is_refused_too(client: TestClient, store: Store) -> None:
    # JSON can carry an unpaired surrogate escape; it is not text any store can encode.
    raw = b'{"title": "t", "content": "broken \\udcff here", "project": "acme"}'
    response = client.post(
        "/observations", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert store.stats().total_observations == 0
