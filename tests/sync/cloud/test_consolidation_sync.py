"""Consolidation syncs like any edit (issue 21): one machine consolidates the planted store, a
second machine sees the same result through git, a third through the cloud, and the server's
read model holds pins, archives and successors; an as-of search on the others still finds the
superseded facts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from engram.store import Store
from engram.sync.cloud.sync import CloudSync
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync
from tests.support.bench_scripts import load
from tests.support.sync_cloud import CloudServer, canonical, cloud_config, enroll


def test_a_consolidation_reaches_other_machines_through_git_and_the_cloud(
    server: CloudServer, open_store: Callable[[str], Store], tmp_path: Path
) -> None:
    plan = load("planted").build(duplicated=8, trivia=4)
    for item in plan.document["observations"]:
        item["project"] = "acme"  # one project: the git directory's own
    a, b, c = open_store("a"), open_store("b"), open_store("c")
    a.import_data(plan.document)
    enroll(a, c)
    config = cloud_config(server.url)
    shared = SyncDir(tmp_path / "acme" / ".engram")

    def cloud(store: Store) -> None:
        with CloudSync(store, config) as sync:
            sync.push(["acme"])
            sync.pull(["acme"])

    def git(store: Store) -> None:
        GitSync(store, shared, author="test").import_chunks()
        GitSync(store, shared, author="test").export(projects=["acme"])

    git(a)
    cloud(a)
    git(b)
    cloud(c)
    assert canonical(a) == canonical(b) == canonical(c)

    yesterday = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    report = a.consolidate("acme")
    assert report.merged == len(plan.duplicate_keys) and report.archived == len(plan.trivia)
    git(a)
    cloud(a)
    git(b)
    cloud(c)
    assert canonical(a) == canonical(b) == canonical(c)
    for replica in (b, c):
        merged = replica.get_observation_by_sync_id(report.merges[0].merged.sync_id, project="acme")
        assert merged.deleted_at is None
        source = replica.get_observation_by_sync_id(
            report.merges[0].sources[0].sync_id, project="acme"
        )
        assert (source.delete_reason, source.superseded_by) == ("archived", merged.sync_id)
        assert replica.get_observation_by_sync_id(plan.pinned, project="acme").pinned
        # Nothing to do on a replica that received the result.
        again = replica.consolidate("acme", dry_run=True)
        assert again.merged == 0 and again.archived == 0
        # What was true before the merge is still found as of then.
        then = replica.search(
            source.title, project="acme", as_of=yesterday, record_access=False, limit=20
        )
        assert source.sync_id in {o.sync_id for o in then}
        now = replica.search(source.title, project="acme", record_access=False, limit=20)
        assert source.sync_id not in {o.sync_id for o in now}

    dsn = server.db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        rows = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT sync_id, pinned, delete_reason, superseded_by FROM cloud_observations"
                " WHERE project = 'acme'"
            ).fetchall()
        }
    assert rows[plan.pinned][0] is True
    for step in report.merges:
        for source in step.sources:
            assert rows[source.sync_id][1:] == ("archived", step.merged.sync_id)
    for key in plan.trivia:
        assert rows[key][1] == "archived"
