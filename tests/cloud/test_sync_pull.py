"""GET /sync/mutations/pull, access control on both routes, pause with audit, long-polling."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import orjson
import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine, select

from engram.store import Store
from engram_cloud import controls, models
from engram_cloud.settings import parse_allowlist
from tests.cloud import records as rec
from tests.support.cloud import LEGACY_TOKEN, bearer

AUTH = bearer(LEGACY_TOKEN)


def push(client: TestClient, records: list[dict], headers: dict[str, str] = AUTH):
    return client.post("/sync/mutations/push", json=rec.push_body(records), headers=headers)


def pull(client: TestClient, headers: dict[str, str] = AUTH, **params: object):
    return client.get("/sync/mutations/pull", params=params, headers=headers)


def test_pull_pages_in_commit_order(client: TestClient) -> None:
    records = [rec.observation(project=p) for p in ("acme", "widgets", "acme", "acme", "widgets")]
    push(client, records[:2])
    push(client, records[2:])
    first = pull(client, limit=2).json()
    assert [m["seq"] for m in first["mutations"]] == [1, 2]
    assert first["has_more"] and first["next"] == 2
    assert {k: v for k, v in first["mutations"][0].items() if k != "seq"} == records[0]
    rest = pull(client, since=first["next"], limit=10).json()
    assert [m["seq"] for m in rest["mutations"]] == [3, 4, 5]
    assert not rest["has_more"] and rest["next"] == 5
    assert pull(client, since=5).json() == {"mutations": [], "next": 5, "has_more": False}
    # Per-project filter; the cursor still advances past other projects' rows.
    acme = pull(client, project="acme").json()
    assert [m["seq"] for m in acme["mutations"]] == [1, 3, 4] and acme["next"] == 5
    both = client.get("/sync/mutations/pull?project=acme&project=Widgets&since_seq=3", headers=AUTH)
    assert [m["seq"] for m in both.json()["mutations"]] == [4, 5]


def test_pull_parameters_are_checked(client: TestClient) -> None:
    for params, text in (
        ({"since": "abc"}, "since must be an integer"),
        ({"since": -1}, "since must be 0 or more"),
        ({"limit": 0}, "limit must be at least 1"),
        ({"wait": "soon"}, "wait must be a number"),
        ({"wait": -2}, "wait must be 0 or more"),
        ({"project": " "}, "project must not be empty"),
    ):
        response = pull(client, **params)
        assert response.status_code == 400, params
        assert text in response.json()["error"]
    assert pull(client, limit=10**9).status_code == 200  # clamped, not refused


def test_a_store_converges_through_the_server(
    client: TestClient, store: Store, make_store: Callable[[str], Store]
) -> None:
    store.create_session("s-1", "acme", "/src/acme")
    saved = store.add_observation(
        title="Login timeout",
        content="Pool exhausted",
        type="bugfix",
        project="acme",
        session_id="s-1",
    )
    store.update_observation(saved.observation.id, title="Login timeout (fixed)")
    store.add_prompt("why is login slow?", session_id="s-1", project="acme")
    push(client, rec.store_records(store))
    pulled = pull(client).json()["mutations"]
    replica = make_store("teammate")
    replica.apply_mutations(
        [orjson.dumps({k: v for k, v in m.items() if k != "seq"}) for m in pulled],
        source="cloud:test",
    )
    assert replica.canonical_export() == store.canonical_export()


def test_managed_tokens_are_scoped_to_their_grants(
    client: TestClient, make_user: Callable[..., str], engine: Engine
) -> None:
    alice = bearer(make_user("alice", ["acme"]))
    mine, theirs = rec.observation(project="acme"), rec.observation(project="widgets")
    denied = push(client, [mine, theirs], headers=alice)
    assert denied.status_code == 403
    assert denied.json() == {
        "error_class": "policy",
        "error_code": "policy_forbidden",
        "error": "forbidden: project is not allowed",
        "projects": ["widgets"],
    }
    assert push(client, [mine], headers=alice).json()["accepted"] == [mine["mid"]]
    push(client, [theirs])  # the legacy token may write everything (allowlist *)
    assert [m["project"] for m in pull(client, headers=alice).json()["mutations"]] == ["acme"]
    assert pull(client, headers=alice, project="widgets").status_code == 403
    assert len(pull(client).json()["mutations"]) == 2
    with engine.connect() as conn:
        audit = controls.audit_rows(conn, outcome=controls.OUTCOME_FORBIDDEN)
        stored = conn.execute(select(models.mutations.c.created_by)).scalars().all()
    assert [(a["contributor"], a["project"], a["entry_count"]) for a in audit] == [
        ("alice", "widgets", 1)
    ]
    # A managed principal is named by the server, not by what its client claims.
    assert stored == ["alice", "alice"]


def test_allowlist_limits_legacy_tokens_and_pulls(make_client: Callable[..., TestClient]) -> None:
    client = make_client(allowed_projects=parse_allowlist("acme"))
    assert push(client, [rec.observation(project="widgets")]).status_code == 403
    assert push(client, [rec.observation(project="acme")]).status_code == 200
    assert pull(client, project="widgets").status_code == 403


def test_paused_project_refuses_pushes_with_audit_and_keeps_pulls(
    client: TestClient, engine: Engine
) -> None:
    push(client, [rec.observation()])
    with engine.begin() as conn:
        controls.set_sync_enabled(conn, "acme", False, reason="migrating", updated_by="ops")
    blocked = [rec.observation(), rec.observation(), rec.observation(project="widgets")]
    response = push(client, blocked)
    assert response.status_code == 409
    assert response.json() == {
        "error_class": "policy",
        "error_code": "sync-paused",
        "error": 'sync is paused for project "acme"',
        "project": "acme",
        "project_source": "request_body",
        "project_path": "",
        "paused_projects": ["acme"],
        "reason": "migrating",
    }
    assert len(pull(client).json()["mutations"]) == 1  # pulls keep working, nothing was stored
    with engine.begin() as conn:
        audit = controls.audit_rows(conn, outcome=controls.OUTCOME_PAUSED)
        assert [
            (a["contributor"], a["project"], a["action"], a["entry_count"], a["reason_code"])
            for a in audit
        ] == [("alice", "acme", "mutation_push", 2, "sync-paused")]
        controls.set_sync_enabled(conn, "acme", True, reason=None, updated_by="ops")
    assert push(client, blocked).status_code == 200
    with engine.connect() as conn:
        accepted = controls.audit_rows(conn, outcome=controls.OUTCOME_ACCEPTED)
    assert sorted((a["project"], a["entry_count"]) for a in accepted) == [
        ("acme", 1),
        ("acme", 2),
        ("widgets", 1),
    ]


def test_long_poll_answers_as_soon_as_something_commits(client: TestClient) -> None:
    push(client, [rec.observation()])
    started = time.monotonic()
    empty = pull(client, since=1, wait=0.3).json()
    assert empty["mutations"] == [] and time.monotonic() - started >= 0.3
    record = rec.observation()
    pusher = threading.Timer(0.5, lambda: push(client, [record]))
    pusher.start()
    started = time.monotonic()
    answer = pull(client, since=1, wait=20).json()
    waited = time.monotonic() - started
    pusher.join()
    assert [m["mid"] for m in answer["mutations"]] == [record["mid"]]
    assert waited < 10, waited  # woken by the commit, not by the end of the wait


def test_long_poll_ignores_other_projects(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    notifier = client.app.state.notifier
    real_wait = notifier.wait
    waits = threading.Semaphore(0)

    async def counted_wait(after: int, timeout: float) -> None:
        waits.release()  # the pull found nothing and is waiting for an announcement
        await real_wait(after, timeout)

    monkeypatch.setattr(notifier, "wait", counted_wait)

    def later() -> None:
        assert waits.acquire(timeout=30)
        push(client, [rec.observation(project="widgets")])
        assert waits.acquire(timeout=30)  # woken by widgets, found nothing for acme: waits again
        push(client, [rec.observation(project="acme")])

    thread = threading.Thread(target=later)
    thread.start()
    answer = pull(client, project="acme", wait=20).json()
    thread.join()
    assert [m["project"] for m in answer["mutations"]] == ["acme"]
    assert answer["mutations"][0]["seq"] == 2


def test_large_pull_pages_are_compressed(client: TestClient) -> None:
    push(client, [rec.observation(content="lorem ipsum " * 200) for _ in range(20)])
    for encoding in ("zstd", "gzip"):
        response = client.get("/sync/mutations/pull", headers={**AUTH, "Accept-Encoding": encoding})
        assert response.headers["content-encoding"] == encoding
        assert len(response.json()["mutations"]) == 20  # the client library inflates it
