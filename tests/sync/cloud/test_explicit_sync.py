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
from engram.sync.cloud import state as cloud_state
from engram.sync.cloud.client import CloudError
from engram.sync.cloud.status import project_status
from engram.sync.cloud.sync import CloudSync
from tests.support.sync_cloud import CloudServer, canonical, cloud_config, configure, enroll


def exchange(server: CloudServer, *stores: Store, project: str) -> None:
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
    shared_server: CloudServer, open_store: Callable[[str], Store], project: str
) -> None:
    server = shared_server
    a, b = open_store("a"), open_store("b")
    enroll(a, b, project=project)
    a.create_session("s-a", project, "/src/acme")
    kept = a.add_observation(
        title="Pool size",
        content="Raised to 20",
        type="decision",
        project=project,
        session_id="s-a",
    ).observation
    soft = a.add_observation(title="Old idea", content="Drop caching", project=project).observation
    hard = a.add_observation(title="Secret", content="will vanish", project=project).observation
    a.add_observation(
        title="Auth", content="JWT with rotation", project=project, topic_key="architecture/auth"
    )
    prompt = a.add_prompt("why is login slow?", session_id="s-a", project=project)
    exchange(server, a, b, project=project)
    assert canonical(a, project) == canonical(b, project)

    # Edits on both sides, deletes, a topic upserted on both machines, prompts, session end.
    a.update_observation(kept.id, content="Raised to 30 after load tests")
    a.delete_observation(soft.id)
    a.delete_observation(hard.id, hard=True)
    a.delete_prompt(prompt.id)
    a.end_session("s-a", "tuned the pool")
    b.add_observation(
        title="Auth",
        content="JWT, rotation every 24h",
        project=project,
        topic_key="architecture/auth",
    )
    b.add_prompt("and the cache?", project=project)
    b_memory = b.add_observation(title="From B", content="B's own note", project=project)
    b.update_observation(b_memory.observation.id, title="From B (edited)")
    exchange(server, a, b, project=project)

    assert canonical(a, project) == canonical(b, project)
    topic = [o for o in a.recent_observations(project=project, limit=50) if o.title == "Auth"]
    assert len(topic) == 1 and topic[0].content == "JWT, rotation every 24h"
    with pytest.raises(NotFoundError):  # the hard delete reached B
        b.get_observation_by_sync_id(hard.sync_id)
    assert b.get_observation_by_sync_id(soft.sync_id).deleted_at is not None
    mids = no_duplicates(server)
    local = {e.mid for e in a.journal.pending("nowhere", projects=[project])}
    assert local <= set(mids)  # every mutation of A is on the server, once


def test_only_exact_mids_are_acknowledged_and_rejections_are_quarantined(
    shared_server: CloudServer, open_store: Callable[[str], Store], project: str
) -> None:
    server = shared_server
    a = open_store("a")
    enroll(a, project=project)
    config = configure(a, server)
    first = a.add_observation(title="One", content="first memory", project=project).observation
    with CloudSync(a, config) as sync:
        sync.push([project])
    # Corrupt the journal text of an already pushed mutation (same mid, other content), make
    # it pending again: the server must refuse it (mid_conflict), the rest must go through.
    seq = max(
        e.seq for e in a.journal.pending("nowhere", projects=[project]) if e.key == first.sync_id
    )
    text = a.journal.entry(seq).record  # (a local record is stored elided: its full text)
    with a.db.write() as conn:
        conn.execute(
            "UPDATE sync_journal SET record = json_set(?, '$.payload.title', 'tampered')"
            " WHERE seq = ?",
            (text, seq),
        )
    cloud_state.forget_delivery(a, config.target, [seq])
    a.add_observation(title="Two", content="second memory", project=project)
    with CloudSync(a, config) as sync:
        report = sync.push([project])[0]
    assert [r["error_code"] for r in report.rejected] == ["mid_conflict"]
    assert report.acknowledged == 1  # the new memory went through beside the refused one
    quarantined = cloud_state.quarantined_rows(a, config.target, project)
    assert [q["seq"] for q in quarantined] == [seq]
    assert a.journal.count_pending(config.target, projects=[project]) == 0
    status = project_status(a, project)
    assert status["reason_code"] == "quarantined" and status["quarantined_count"] == 1
    assert "mid_conflict" in status["reason_message"]

    # Repair retries it: still refused while the text differs, accepted once it is restored.
    with CloudSync(a, config) as sync:
        cloud_state.release_quarantined(a, config.target, project)
        again = sync.push_project(project)
    assert [r["error_code"] for r in again.rejected] == ["mid_conflict"]
    with a.db.write() as conn:
        conn.execute(
            "UPDATE sync_journal SET record = json_set(record, '$.payload.title', 'One')"
            " WHERE seq = ?",
            (seq,),
        )
    cloud_state.release_quarantined(a, config.target, project)
    with CloudSync(a, config) as sync:
        fixed = sync.push_project(project)
    assert fixed.rejected == [] and fixed.acknowledged == 1
    assert project_status(a, project)["reason_code"] is None
    no_duplicates(server)


def test_personal_scope_stays_home_unless_asked(
    shared_server: CloudServer, open_store: Callable[[str], Store], project: str
) -> None:
    server = shared_server
    a, b = open_store("a"), open_store("b")
    enroll(a, b, project=project)
    config = cloud_config(server.url)
    a.add_observation(title="Shared", content="team knowledge", project=project)
    a.add_observation(title="Diary", content="my own note", project=project, scope="personal")
    with CloudSync(a, config) as sync:
        sync.push([project])
    with CloudSync(b, config) as sync:
        sync.pull([project])
    assert b.search("team knowledge", project=project)
    assert b.search("my own note", project=project) == []
    assert len(server.mids(project)) == 2  # the session and the shared memory
    with CloudSync(a, config, include_personal=True) as sync:
        sync.push([project])
    with CloudSync(b, config) as sync:
        sync.pull([project])
    assert b.search("my own note", project=project)


def test_non_enrolled_projects_are_neither_pushed_nor_applied(
    shared_server: CloudServer, open_store: Callable[[str], Store], project: str
) -> None:
    server = shared_server
    a, b = open_store("a"), open_store("b")
    enroll(a, b, project=project)
    config = configure(a, server)
    other = project + "-other"
    a.add_observation(title="Acme", content="enrolled memory", project=project)
    a.add_observation(title="Private", content="other project memory", project=other)
    with CloudSync(a, config) as sync:
        with pytest.raises(CloudError) as refused:
            sync.push([other])
        assert refused.value.reason_code == "blocked_unenrolled"
        sync.push([project])
    assert len(server.mids(other)) == 0
    assert project_status(a, other)["reason_code"] == "blocked_unenrolled"
    # B enrolled in widgets does not make A's unenrolled widgets memories travel.
    cloud_state.enroll(b, other)
    with CloudSync(b, config) as sync:
        sync.pull([project, other])
    assert b.search("enrolled memory", project=project)
    assert b.search("other project memory", project=other) == []


def test_one_cursor_per_project_and_a_late_enrollment_catches_up(
    shared_server: CloudServer, open_store: Callable[[str], Store], project: str
) -> None:
    server = shared_server
    a, b = open_store("a"), open_store("b")
    enroll(a, project=project)
    other = project + "-other"
    enroll(a, project=other)
    config = cloud_config(server.url)
    for i in range(30):
        a.add_observation(title=f"acme {i}", content=f"acme memory {i}", project=project)
        a.add_observation(title=f"w {i}", content=f"widgets memory {i}", project=other)
    with CloudSync(a, config) as sync:
        sync.push([project, other])
    enroll(b, project=project)
    with CloudSync(b, config) as sync:
        sync.pull([project])
    acme_cursor = cloud_state.cursors(b, config.target, [project])[project]
    assert acme_cursor > 0
    enroll(b, project=other)
    with CloudSync(b, config) as sync:
        reports = sync.pull([project, other])
    assert reports[other].received == 31 and reports[project].received == 0
    cursors = cloud_state.cursors(b, config.target, [project, other])
    assert cursors[project] == cursors[other] >= acme_cursor
    assert canonical(a, other) == canonical(b, other)
    assert canonical(a, project) == canonical(b, project)
