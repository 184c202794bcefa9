"""Issue 18 (sixth round): a record pulled from the cloud is held by the cloud because its journal
row names it as the source (no delivery row each); one imported from a git directory is held
by that directory. Against a real ``engram cloud serve``: never pushed back to where it came
from, pushed and exported to every other target, in both directions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engram.store import Store
from engram.sync.cloud.sync import CloudSync
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync
from tests.support.sync_cloud import CloudServer, configure, enroll
from tests.support.sync_git import export, import_


def test_cloud_and_git_never_get_back_what_they_brought_but_get_it_elsewhere(
    shared_server: CloudServer,
    open_store: Callable[[str], Store],
    project: str,
    tmp_path: Path,
) -> None:
    a, b = open_store("a"), open_store("b")
    enroll(a, b, project=project)
    config = configure(a, shared_server)
    configure(b, shared_server)
    a.add_observation(title="From the cloud", content="walrus", project=project)
    sent = a.journal.count_pending(config.target, projects=[project])  # (its session too)
    with CloudSync(a, config) as sync:
        assert sync.push([project])[0].acknowledged == sent
    # Cloud → b: not pushed back; exported to git.
    with CloudSync(b, config) as sync:
        assert sync.pull([project])[project].received == sent
        assert b.db.scalar("SELECT COUNT(*) FROM sync_delivery") == 0
        assert b.journal.count_pending(config.target, projects=[project]) == 0
        assert sync.push([project])[0].acknowledged == 0
    git = SyncDir(tmp_path / project / ".engram")
    assert export(b, git, [project]).total("mutations") == sent
    # Git → a third store c: exported nowhere back; pushed to the cloud (which already holds
    # it: acknowledged as a duplicate, and then held by both).
    c = open_store("c")
    enroll(c, project=project)
    configure(c, shared_server)
    assert import_(c, git).failures == []
    assert export(c, git, [project]).nothing_new
    assert c.journal.count_pending(config.target, projects=[project]) == sent
    with CloudSync(c, config) as sync:
        sync.push([project])
    assert c.journal.count_pending(config.target, projects=[project]) == 0
    git_target = GitSync(c, git).target
    assert c.journal.count_pending(git_target, projects=[project]) == 0
    assert c.journal.targets() == sorted([config.target, git_target])
    # A memory of c's own reaches the cloud and a pulls it; a does not push it back.
    c.add_observation(title="From git's side", content="otter", project=project)
    with CloudSync(c, config) as sync:
        assert sync.push([project])[0].acknowledged >= 1
    with CloudSync(a, config) as sync:
        assert sync.pull([project])[project].received >= 1
        assert sync.push([project])[0].acknowledged == 0
    assert a.search("otter", project=project)
