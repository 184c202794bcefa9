"""The push/pull services against a real ``engram cloud serve`` over a real PostgreSQL: two
stores converge through the server with edits, deletes, topic upserts and prompts; only exact
mids are acknowledged; rejected records are quarantined and retried by repair; personal scope
and non-enrolled projects stay home."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from engram.errors import NotFoundError
from engram.store import Store
from engram.sync import cloud_state
from engram.sync.cloud_client import CloudError
from engram.sync.cloud_sync import CloudSync
from engram.sync.status import project_status
from tests.cloud_client.conftest import CloudServer, canonical, cloud_config, configure, enroll


def exchange(server: CloudServer, *stores: Store, project: str = "acme") -> None:
    """Push from every store, then pull into every store (twice, so relays settle)."""
    config = cloud_config(server.url)
    for _ in range(2):
        for store in stores:
            with CloudSync(store, config) as sync:
                report = sync.push([project])[0]
                assert not report.rejected and report.error is None
        for store in stores:
            with CloudSync(store, config) as sync:
                sync.pull([project])


def no_duplicates(server: CloudServer) -> list[str]:
    mids = server.mids()
    assert not [m for m, n in Counter(mids).items() if n > 1], "a mid stored twice"
    return mids


def test_two_stores_converge_with_edits_deletes_topics_and_prompts(
    server: CloudServer, open_store: Callable[[str], Store]
) -> None:
    a, b = open_store("a"), open_store("b")
    enroll(a, b)
    a.create_session("s-a", "acme", "/src/acme")
    kept = a.add_observation(
        title="Pool size",
        content="Raised to 20",
        type="decision",
        project="acme",
        session_id="s-a",
    ).observation
    soft = a.add_observation(title="Old idea", content="Drop caching", project="acme").observation
    hard = a.add_observation(title="Secret", content="will vanish", project="acme").observation
    a.add_observation(
        title="Auth", content="JWT with rotation", project="acme", topic_key="architecture/auth"
    )
    prompt = a.add_prompt("why is login slow?", session_id="s-a", project="acme")
    exchange(server, a, b)
    assert canonical(a) == canonical(b)

    # Edits on both sides, deletes, a topic upserted on both machines, prompts, session end.
    a.update_observation(kept.id, content="Raised to 30 after load tests")
    a.delete_observation(soft.id)
    a.delete_observation(hard.id, hard=True)
    a.delete_prompt(prompt.id)
    a.end_session("s-a", "tuned the pool")
    b.add_observation(
        title="Auth",
        content="JWT, rotation every 24h",
        project="acme",
        topic_key="architecture/auth",
    )
    b.add_prompt("and the cache?", project="acme")
    b_memory = b.add_observation(title="From B", content="B's own note", project="acme")
    b.update_observation(b_memory.observation.id, title="From B (edited)")
    exchange(server, a, b)

    assert canonical(a) == canonical(b)
    topic = [o for o in a.recent_observations(project="acme", limit=50) if o.title == "Auth"]
    assert len(topic) == 1 and topic[0].content == "JWT, rotation every 24h"
    with pytest.raises(NotFoundError):  # the hard delete reached B
        b.get_observation_by_sync_id(hard.sync_id)
    assert b.get_observation_by_sync_id(soft.sync_id).deleted_at is not None
    mids = no_duplicates(server)
    local = {e.mid for e in a.journal.pending("nowhere", projects=["acme"])}
    assert local <= set(mids)  # every mutation of A is on the server, once


def test_only_exact_mids_are_acknowledged_and_rejections_are_quarantined(
    server: CloudServer, open_store: Callable[[str], Store]
) -> None:
    a = open_store("a")
    enroll(a)
    config = configure(a, server)
    first = a.add_observation(title="One", content="first memory", project="acme").observation
    with CloudSync(a, config) as sync:
        sync.push(["acme"])
    # Corrupt the journal text of an already pushed mutation (same mid, other content), make
    # it pending again: the server must refuse it (mid_conflict), the rest must go through.
    seq = max(
        e.seq for e in a.journal.pending("nowhere", projects=["acme"]) if e.key == first.sync_id
    )
    with a.db.write() as conn:
        conn.execute(
            "UPDATE sync_journal SET record = json_set(record, '$.payload.title', 'tampered')"
            " WHERE seq = ?",
            (seq,),
        )
    cloud_state.forget_delivery(a, config.target, [seq])
    a.add_observation(title="Two", content="second memory", project="acme")
    with CloudSync(a, config) as sync:
        report = sync.push(["acme"])[0]
    assert [r["error_code"] for r in report.rejected] == ["mid_conflict"]
    assert report.acknowledged == 1  # the new memory went through beside the refused one
    quarantined = cloud_state.quarantined_rows(a, config.target, "acme")
    assert [q["seq"] for q in quarantined] == [seq]
    assert a.journal.count_pending(config.target, projects=["acme"]) == 0
    status = project_status(a, "acme")
    assert status["reason_code"] == "quarantined" and status["quarantined_count"] == 1
    assert "mid_conflict" in status["reason_message"]

    # Repair retries it: still refused while the text differs, accepted once it is restored.
    with CloudSync(a, config) as sync:
        cloud_state.release_quarantined(a, config.target, "acme")
        again = sync.push_project("acme")
    assert [r["error_code"] for r in again.rejected] == ["mid_conflict"]
    with a.db.write() as conn:
        conn.execute(
            "UPDATE sync_journal SET record = json_set(record, '$.payload.title', 'One')"
            " WHERE seq = ?",
            (seq,),
        )
    cloud_state.release_quarantined(a, config.target, "acme")
    with CloudSync(a, config) as sync:
        fixed = sync.push_project("acme")
    assert fixed.rejected == [] and fixed.acknowledged == 1
    assert project_status(a, "acme")["reason_code"] is None
    no_duplicates(server)


def test_personal_scope_stays_home_unless_asked(
    server: CloudServer, open_store: Callable[[str], Store]
) -> None:
    a, b = open_store("a"), open_store("b")
    enroll(a, b)
    config = cloud_config(server.url)
    a.add_observation(title="Shared", content="team knowledge", project="acme")
    a.add_observation(title="Diary", content="my own note", project="acme", scope="personal")
    with CloudSync(a, config) as sync:
        sync.push(["acme"])
    with CloudSync(b, config) as sync:
        sync.pull(["acme"])
    assert b.search("team knowledge", project="acme")
    assert b.search("my own note", project="acme") == []
    assert len(server.mids("acme")) == 2  # the session and the shared memory
    with CloudSync(a, config, include_personal=True) as sync:
        sync.push(["acme"])
    with CloudSync(b, config) as sync:
        sync.pull(["acme"])
    assert b.search("my own note", project="acme")


def test_non_enrolled_projects_are_neither_pushed_nor_applied(
    server: CloudServer, open_store: Callable[[str], Store]
) -> None:
    a, b = open_store("a"), open_store("b")
    enroll(a, b)
    config = configure(a, server)
    a.add_observation(title="Acme", content="enrolled memory", project="acme")
    a.add_observation(title="Private", content="other project memory", project="widgets")
    with CloudSync(a, config) as sync:
        with pytest.raises(CloudError) as refused:
            sync.push(["widgets"])
        assert refused.value.reason_code == "blocked_unenrolled"
        sync.push(["acme"])
    assert len(server.mids("widgets")) == 0
    assert project_status(a, "widgets")["reason_code"] == "blocked_unenrolled"
    # B enrolled in widgets does not make A's unenrolled widgets memories travel.
    cloud_state.enroll(b, "widgets")
    with CloudSync(b, config) as sync:
        sync.pull(["acme", "widgets"])
    assert b.search("enrolled memory", project="acme")
    assert b.search("other project memory", project="widgets") == []


def test_one_cursor_per_project_and_a_late_enrollment_catches_up(
    server: CloudServer, open_store: Callable[[str], Store]
) -> None:
    a, b = open_store("a"), open_store("b")
    enroll(a, project="acme")
    enroll(a, project="widgets")
    config = cloud_config(server.url)
    for i in range(30):
        a.add_observation(title=f"acme {i}", content=f"acme memory {i}", project="acme")
        a.add_observation(title=f"w {i}", content=f"widgets memory {i}", project="widgets")
    with CloudSync(a, config) as sync:
        sync.push(["acme", "widgets"])
    enroll(b, project="acme")
    with CloudSync(b, config) as sync:
        sync.pull(["acme"])
    acme_cursor = cloud_state.cursors(b, config.target, ["acme"])["acme"]
    assert acme_cursor > 0
    enroll(b, project="widgets")
    with CloudSync(b, config) as sync:
        reports = sync.pull(["acme", "widgets"])
    assert reports["widgets"].received == 31 and reports["acme"].received == 0
    cursors = cloud_state.cursors(b, config.target, ["acme", "widgets"])
    assert cursors["acme"] == cursors["widgets"] >= acme_cursor
    assert canonical(a, "widgets") == canonical(b, "widgets")
    assert canonical(a, "acme") == canonical(b, "acme")
