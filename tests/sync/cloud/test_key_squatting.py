"""Issue 12, hole 1, end to end: a member granted only project gamma cannot reach project alpha's
memories by naming their sync ids inside gamma (identity is per project, docs/architecture.md, "Identity, the journal and replication").

Real processes and real HTTP: ``engram cloud serve`` on a throwaway PostgreSQL database, two
managed members made with ``engram cloud admin`` (one granted alpha and gamma, one only gamma),
and local stores that push and pull through the cloud client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from engram.record import build_record, format_hlc, new_mid, new_origin
from engram.store import Store
from engram.sync.cloud import state as cloud_state
from engram.sync.cloud.sync import CloudSync
from engram.text import topic_sync_id
from tests.support.sync_cloud import CloudServer, cloud_config


def member(server: CloudServer, name: str, *projects: str) -> str:
    """A managed member with grants; returns their raw token."""
    server.admin("create-user", name)
    server.admin("grant", name, *projects)
    issued = json.loads(server.admin("issue-token", name, "--json").stdout)
    return issued["raw_token"]


def attacker_record(op: str, project: str, key: str, payload: dict) -> dict:
    origin = new_origin()
    return build_record(
        mid=new_mid(),
        hlc=format_hlc(time.time_ns() // 1_000_000, 0, origin),
        origin=origin,
        entity="observation",
        key=key,
        op=op,
        project=project,
        scope="project",
        payload=payload,
    )


def test_a_gamma_only_member_cannot_delete_or_overwrite_alpha_memories(
    server: CloudServer, open_store: Callable[[str], Store]
) -> None:
    owner_token = member(server, "owner", "alpha", "gamma")
    mallory_token = member(server, "mallory", "gamma")
    alice, bob = open_store("alice"), open_store("bob")
    plain = alice.add_observation(title="Deploy", content="blue-green via nginx", project="alpha")
    topic = alice.add_observation(
        title="Auth", content="sessions in redis", project="alpha", topic_key="architecture/auth"
    )
    # A topic memory's id is computable by anyone who knows the project and topic.
    assert topic.observation.sync_id == topic_sync_id("alpha", "project", "architecture/auth")
    owner = cloud_config(server.url, owner_token)
    for store in (alice, bob):
        for project in ("alpha", "gamma"):
            cloud_state.enroll(store, project)
    with CloudSync(alice, owner) as sync:
        sync.push(["alpha"])

    # Mallory, granted only gamma, pushes inside gamma a hard delete and an upsert that carry
    # the sync ids of the two alpha memories. The server accepts them: they are gamma records.
    victim_plain, victim_topic = plain.observation.sync_id, topic.observation.sync_id
    delete = attacker_record(
        "delete",
        "gamma",
        victim_plain,
        {"sync_id": victim_plain, "project": "gamma", "deleted_at": None, "hard": True},
    )
    upsert = attacker_record(
        "upsert",
        "gamma",
        victim_topic,
        {
            "sync_id": victim_topic,
            "session_id": "s-mallory",
            "type": "decision",
            "title": "Auth",
            "content": "ATTACKER TEXT: disable auth",
            "project": "gamma",
            "scope": "project",
            "topic_key": "architecture/auth",
        },
    )
    answer = httpx.post(
        f"{server.url}/sync/mutations/push",
        json={"created_by": "mallory", "mutations": [delete, upsert]},
        headers={"Authorization": f"Bearer {mallory_token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert sorted(answer.json()["accepted"]) == sorted([delete["mid"], upsert["mid"]])

    # A teammate pulling both projects keeps both alpha memories intact…
    with CloudSync(bob, owner) as sync:
        sync.pull(["alpha", "gamma"])
    # …and so does their author, pulling gamma after writing alpha.
    with CloudSync(alice, owner) as sync:
        sync.pull(["gamma", "alpha"])
    for store in (bob, alice):
        alpha = {o.sync_id: o.content for o in store.recent_observations("alpha", limit=10)}
        assert alpha == {victim_plain: "blue-green via nginx", victim_topic: "sessions in redis"}
        assert [o.content for o in store.search("auth", project="alpha")] == ["sessions in redis"]
        # Mallory's records changed gamma, the only project Mallory may write.
        gamma = {o.sync_id: o.content for o in store.recent_observations("gamma", limit=10)}
        assert gamma == {victim_topic: "ATTACKER TEXT: disable auth"}
    assert alice.canonical_export(projects=["alpha"]) == bob.canonical_export(projects=["alpha"])
