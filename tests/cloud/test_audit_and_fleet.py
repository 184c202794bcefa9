"""Audit and fleet pollution (issue 13): a refused push writes one audit row however many
projects it names, the audit log is pruned by age and size, a heartbeat cannot overwrite a
machine record another principal created, and members' heartbeats are rate-bounded."""

from __future__ import annotations

from collections.abc import Callable

import orjson
from litestar.testing import TestClient
from sqlalchemy import Engine, func, select, text

from engram_cloud import controls, models
from tests.cloud import records as rec
from tests.cloud.test_workers import beat
from tests.support.cloud import ADMIN_TOKEN, LEGACY_TOKEN, bearer

ADMIN = bearer(ADMIN_TOKEN)


def audit_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(models.sync_audit_log)).scalar_one()


def push(client: TestClient, records: list[dict], headers: dict[str, str]):
    return client.post(
        "/sync/mutations/push", content=orjson.dumps(rec.push_body(records)), headers=headers
    )


def test_a_refused_push_writes_one_audit_row_with_counts(
    client: TestClient, engine: Engine, make_user: Callable[..., str]
) -> None:
    member = bearer(make_user("mallory", ["gamma"]))
    records = [rec.observation(project=f"p{i:03d}") for i in range(499)]
    records.append(rec.observation(project="gamma"))
    for _ in range(4):
        answer = push(client, records, member)
        assert answer.status_code == 403
        assert len(answer.json()["projects"]) == 20  # the error names a few, not 499
    assert audit_count(engine) == 4  # was one row per project: 1,996
    with engine.connect() as conn:
        row = controls.audit_rows(conn, limit=1)[0]
    assert row["outcome"] == controls.OUTCOME_FORBIDDEN and row["project"] == "p000"
    assert row["entry_count"] == 499 and row["contributor"] == "mallory"
    assert row["metadata"]["projects"] == 499 and row["metadata"]["submitted"] == 500
    assert row["metadata"]["project_names"][:2] == ["p000", "p001"]
    assert len(row["metadata"]["project_names"]) == controls.MAX_NAMED


def test_a_push_to_several_paused_projects_writes_one_row(
    client: TestClient, engine: Engine
) -> None:
    with engine.begin() as conn:
        for name in ("acme", "widgets", "gizmos"):
            controls.set_sync_enabled(conn, name, False, reason="freeze", updated_by="test")
    records = [rec.observation(project=p) for p in ("acme", "widgets", "gizmos", "acme")]
    answer = push(client, records, bearer(LEGACY_TOKEN))
    assert answer.status_code == 409
    assert answer.json()["paused_projects"] == ["acme", "gizmos", "widgets"]
    with engine.connect() as conn:
        rows = controls.audit_rows(conn)
    assert len(rows) == 1 and rows[0]["entry_count"] == 4
    assert rows[0]["project"] == "acme" and rows[0]["metadata"]["projects"] == 3


def test_the_audit_log_is_pruned_by_size_and_age(
    make_client: Callable[..., TestClient], engine: Engine
) -> None:
    row = {
        "contributor": "old",
        "project": "acme",
        "action": "mutation_push",
        "outcome": "accepted",
        "entry_count": 1,
    }
    with engine.begin() as conn:
        controls.write_audit(conn, [row] * (controls.PRUNE_EVERY * 6 - 1))  # no limits: kept
    assert audit_count(engine) == 1199
    client = make_client(audit_max_rows=1000)
    # The 1,200th row written is a prune point: only the newest 1,000 stay.
    push(client, [rec.observation(project="acme")], bearer(LEGACY_TOKEN))
    assert audit_count(engine) == 1000
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE cloud_sync_audit_log SET occurred_at = now() - interval '100 days' "
                "WHERE id <= 1100"
            )
        )
        removed = controls.prune_audit(conn, controls.AuditLimits(90, 1000))
    assert removed == 900 and audit_count(engine) == 100


def test_a_member_cannot_overwrite_another_principals_machine(
    client: TestClient, engine: Engine, make_user: Callable[..., str]
) -> None:
    bob = bearer(make_user("bob", ["acme"]))
    carol = bearer(make_user("carol", ["acme"]))
    assert beat(client, bob, hostname="bobs-laptop", pending=2).status_code == 200
    stolen = beat(client, carol, hostname="evil", pending=999)
    assert stolen.status_code == 409
    assert stolen.json()["error_code"] == "worker_owned_elsewhere"
    legacy = beat(client, bearer(LEGACY_TOKEN), hostname="evil")  # the shared token is another
    assert legacy.status_code == 409
    machine = client.get("/api/v1/workers/0123456789abcdef", headers=ADMIN).json()
    assert (machine["hostname"], machine["pending"], machine["principal_name"]) == (
        "bobs-laptop",
        2,
        "bob",
    )
    assert beat(client, bob, hostname="bobs-laptop", pending=0).status_code == 200  # his own
    # A record written before owners existed is claimed by its next heartbeat, then kept.
    with engine.begin() as conn:
        conn.execute(text("UPDATE cloud_workers SET owner = ''"))
    assert beat(client, carol, hostname="carols-desk").status_code == 200
    assert beat(client, bob).status_code == 409


def test_member_heartbeats_are_rate_bounded(
    make_client: Callable[..., TestClient], make_user: Callable[..., str]
) -> None:
    client = make_client(heartbeats_per_minute=3)
    dave = bearer(make_user("dave", ["acme"]))
    codes = [
        beat(client, dave, origin=f"{i:016x}").status_code for i in range(5)
    ]  # invented machines
    assert codes == [200, 200, 200, 429, 429]
    refused = beat(client, dave, origin=f"{9:016x}")
    assert refused.json()["error_code"] == "rate_limited"
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    listed = client.get("/api/v1/workers", headers=ADMIN).json()
    assert len(listed) == 3
    # Another member has their own budget; admins are not limited.
    erin = bearer(make_user("erin", ["acme"]))
    assert beat(client, erin, origin="e" * 16).status_code == 200
    assert all(beat(client, ADMIN, origin=f"{100 + i:016x}").status_code == 200 for i in range(5))
