"""Topologies and crashes: cloud and git together converge three stores; a client killed between
the server's answer and its local acknowledgement, or in the middle of an autosync backlog,
loses and duplicates nothing."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from engram.errors import NotFoundError
from engram.store import Store
from engram.sync.cloud import state as cloud_state
from engram.sync.cloud.sync import CloudSync
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync
from tests.support import run_engram
from tests.support.paused_engram import kill_at
from tests.support.sync_cloud import (
    TOKEN,
    CloudServer,
    LocalServe,
    autosync_env,
    canonical,
    cloud_config,
    enroll,
    wait_until,
)


def no_duplicates(server: CloudServer) -> list[str]:
    mids = server.mids()
    assert not [m for m, n in Counter(mids).items() if n > 1], "a mid stored twice"
    return mids


def test_cloud_and_git_together_converge_three_stores(
    server: CloudServer, open_store: Callable[[str], Store], tmp_path: Path
) -> None:
    """A syncs with the cloud and a git directory, B only with the cloud, C only with git."""
    a, b, c = open_store("a"), open_store("b"), open_store("c")
    enroll(a, b)
    config = cloud_config(server.url)
    shared = SyncDir(tmp_path / "acme" / ".engram")  # the directory's own project: acme

    def cloud(store: Store) -> None:
        with CloudSync(store, config) as sync:
            sync.push(["acme"])
            sync.pull(["acme"])

    def git(store: Store) -> None:
        GitSync(store, shared, author="test").import_chunks()
        GitSync(store, shared, author="test").export(projects=["acme"])

    a.add_observation(title="From A", content="alpha knowledge", project="acme")
    b.add_observation(
        title="Auth", content="B's view", project="acme", topic_key="architecture/auth"
    )
    c_memory = c.add_observation(title="From C", content="gamma knowledge", project="acme")
    c.add_observation(
        title="Auth", content="C's view", project="acme", topic_key="architecture/auth"
    )
    c.add_prompt("what did C ask?", project="acme")
    for _ in range(3):
        cloud(b)
        cloud(a)
        git(a)
        git(c)
        git(a)
        cloud(a)
        cloud(b)
    # Relations (issue 20) made on A (cloud and git) and C (git only), judged on B (cloud only).
    a_mine = a.search("alpha knowledge", project="acme")[0]
    a_auth = a.search("architecture/auth", project="acme")[0]
    a.relate(a_mine.id, a_auth.id, "related", reason="A links them")
    c_gamma = c.search("gamma knowledge", project="acme")[0]
    c_alpha = c.search("alpha knowledge", project="acme")[0]
    c_rel = c.relate(c_alpha.id, c_gamma.id, "conflicts_with", status="pending")
    c.delete_observation(c_memory.observation.id, hard=True)
    b.update_observation(
        b.search("alpha knowledge", project="acme")[0].id, content="alpha knowledge, edited by B"
    )
    for _ in range(3):
        cloud(b)
        cloud(a)
        git(a)
        git(c)
        git(a)
        cloud(a)
        cloud(b)
    assert canonical(a) == canonical(b) == canonical(c)
    for store in (a, b, c):  # C's conflict reached B through A; its memory is gone: orphaned
        assert store.get_relation(c_rel.sync_id).state == "orphaned"
        assert [r.reason for r in store.list_relations("acme") if r.relation == "related"] == [
            "A links them"
        ]
    with pytest.raises(NotFoundError):  # C's hard delete reached B through A
        b.get_observation_by_sync_id(c_memory.observation.sync_id)
    assert "edited by B" in c.search("alpha", project="acme")[0].content
    no_duplicates(server)


def test_client_killed_between_the_answer_and_the_acknowledgement(
    server: CloudServer, tmp_path: Path
) -> None:
    home = tmp_path / "a"
    env = {"ENGRAM_CLOUD_SERVER": server.url, "ENGRAM_CLOUD_TOKEN": TOKEN}
    assert run_engram("cloud", "enroll", "acme", data_dir=home).returncode == 0
    for i in range(20):
        saved = run_engram("save", f"Note {i}", f"memory {i}", "--project", "acme", data_dir=home)
        assert saved.returncode == 0
    kill_at("after-response", home, "sync", "--cloud", "--project", "acme", env=env)
    assert len(server.mids("acme")) == 21  # the server committed the whole batch…
    with Store.open(home / "engram.db") as store:  # …but nothing was acknowledged here
        assert store.journal.count_pending(f"cloud:{server.url}", projects=["acme"]) == 21
    again = run_engram("sync", "--cloud", "--project", "acme", data_dir=home, env=env)
    assert again.returncode == 0 and "Pushed 21 mutation(s)" in again.stdout  # accepted again
    assert (
        "Nothing new"
        in run_engram("sync", "--cloud", "--project", "acme", data_dir=home, env=env).stdout
    )
    assert len(no_duplicates(server)) == 21


def test_autosync_process_killed_mid_backlog_resumes(
    server: CloudServer,
    start_serve: Callable[..., LocalServe],
    open_store: Callable[[str], Store],
    tmp_path: Path,
) -> None:
    home = tmp_path / "a"
    with Store.open(home / "engram.db") as store:
        cloud_state.enroll(store, "acme")
        for i in range(3000):
            store.add_observation(title=f"b {i}", content=f"backlog {i}", project="acme")
    serve = start_serve(home, autosync_env(server.url))
    wait_until(lambda: len(server.mids("acme")) > 0, every=0.01)
    serve.stop(signal.SIGKILL)
    held = len(server.mids("acme"))
    assert held > 0
    serve = start_serve(home, autosync_env(server.url))
    wait_until(lambda: len(server.mids("acme")) == 3001, timeout=60)
    status = wait_until(lambda: (s := serve.sync_status())["pending_count"] == 0 and s)
    assert status["reason_code"] is None
    serve.stop()
    b = open_store("b")
    enroll(b)
    with CloudSync(b, cloud_config(server.url)) as sync:
        sync.pull(["acme"])
    with Store.open(home / "engram.db") as a:
        assert canonical(a) == canonical(b)
    no_duplicates(server)
