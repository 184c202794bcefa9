"""Fixtures for the Hub API: a store filled through its own import path with memories of known
dates, sessions and topics, and litestar's test client over ``engram hub``'s app."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from engram.http.hub import HubIndex, create_hub
from engram.settings import Config
from engram.store import Store

TOKEN = "seed-hub-token"
#: The test client must name a loopback host: the hub refuses others (DNS rebinding).
HUB_URL = "http://127.0.0.1:8000"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def memory(
    n: int,
    title: str,
    content: str,
    *,
    session: str = "Session_42",
    day: str = "2026-03-10",
    type: str = "decision",
    topic: str | None = None,
    project: str = "acme",
    deleted: bool = False,
) -> dict[str, Any]:
    moment = f"{day} 10:{n // 60 % 60:02d}:{n % 60:02d}"
    return {
        "sync_id": f"obs-{n:016x}",
        "session_id": session,
        "type": type,
        "title": title,
        "content": content,
        "project": project,
        "scope": "project",
        "topic_key": topic,
        "created_at": moment,
        "updated_at": moment,
        "deleted_at": moment if deleted else None,
    }


def fill(store: Store, observations: list[dict[str, Any]]) -> None:
    sessions = sorted({(o["session_id"], o["project"]) for o in observations})
    store.import_data(
        {
            "version": "0.1.0",
            "exported_at": "2026-04-01T00:00:00Z",
            "sessions": [
                {"id": s, "project": p, "directory": "/src", "started_at": "2026-01-01 00:00:00"}
                for s, p in sessions
            ],
            "observations": observations,
            "prompts": [],
        }
    )


SAMPLE = [
    memory(1, "Tailscale mesh", "Nodes join the tailscale mesh at boot.", day="2026-03-01",
           topic="network/mesh"),
    memory(2, "Headscale", "We run headscale instead of the hosted control plane.",
           day="2026-03-15", session="Session_7", type="architecture"),
    memory(3, "Edge deploy", "edge devices pull images nightly", day="2026-03-31",
           session="Chatrecall_Session_42", type="edge", topic="edge"),
    memory(4, "Gone", "tailscale mesh text that was deleted", day="2026-03-20", deleted=True),
    memory(5, "Login fix", "fixed the login timeout", day="2026-04-02", session="s-other",
           type="bugfix", topic="auth/login"),
]  # fmt: skip


@pytest.fixture
def hub_store(config: Config) -> Iterator[Store]:
    with Store.open(config=config) as opened:
        fill(opened, SAMPLE)
        yield opened


@pytest.fixture
def hub(config: Config, hub_store: Store) -> Iterator[TestClient]:
    """The hub with ENGRAM_API_TOKEN set, over the sample memories."""
    with TestClient(create_hub(HubIndex(config), token=TOKEN), base_url=HUB_URL) as client:
        client.headers.update(AUTH)
        yield client
