"""The memory page's "Related" panel lists memories of the same agent session or topic — never
every sessionless save of the project, which share one pseudo session (issue 14)."""

from __future__ import annotations

from collections.abc import Callable

from litestar.testing import TestClient

from tests.cloud import records as rec


def related_titles(admin: TestClient, session_id: str, key: str) -> str:
    page = admin.get(f"/dashboard/observations/acme/{session_id}/{key}").text
    return page.split("<h2>Related</h2>", 1)[1]


def test_sessionless_saves_are_not_related(seed: Callable[..., None], admin: TestClient) -> None:
    plain = "manual-save-acme"
    seed(
        [
            rec.session(plain, project="acme"),
            rec.observation("o-creds", session_id=plain, title="Deploy credentials"),
            rec.observation("o-tabs", session_id=plain, title="Prefers tabs"),
            rec.observation("o-pool", session_id=plain, title="Connection pooling"),
            rec.session("s-agent", project="acme"),
            rec.observation("o-a1", session_id="s-agent", title="Agent step one"),
            rec.observation("o-a2", session_id="s-agent", title="Agent step two"),
        ]
    )
    related = related_titles(admin, plain, "o-pool")
    assert "Deploy credentials" not in related and "Prefers tabs" not in related
    assert "Nothing related" in related
    related = related_titles(admin, "s-agent", "o-a1")
    assert "Agent step two" in related and "Prefers tabs" not in related
