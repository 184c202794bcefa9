"""Concurrent edits of one memory through real git clones (issue 17 item 11): the last writer
wins, but not without a trace — ``sync --import`` says when an edit made here was replaced by a
teammate's newer one, and ``engram history`` shows both versions."""

from __future__ import annotations

import time

import orjson

from engram.settings import Config
from engram.store import Store
from tests.sync.git.clones import Clone, world  # noqa: F401


def test_a_replaced_local_edit_is_reported_and_kept(world) -> None:  # noqa: F811
    root, remote, env = world
    alice, bob = Clone(root, "alice", remote, env), Clone(root, "bob", remote, env)
    mine = alice.save("Pool size", "10 connections")
    alice.sync_and_commit("pool")
    alice.git("push", "-q", "origin", "HEAD")
    bob.pull()
    bob.engram("sync", "--import")
    theirs = bob.find("pool")["id"]

    # Alice edits the memory, then Bob edits it too, later, before seeing hers:
    with Store.open(config=Config(data_dir=alice.data)) as store:
        store.update_observation(mine, content="20 connections (Alice)")
    time.sleep(0.01)  # wall time must pass: Bob's edit is the later one on the clock
    with Store.open(config=Config(data_dir=bob.data)) as store:
        store.update_observation(theirs, content="30 connections (Bob)")
    bob.sync_and_commit("bob's edit")
    bob.git("push", "-q", "origin", "HEAD")
    alice.pull()
    imported = alice.engram("sync", "--import")
    assert f'Your edit of #{mine} "Pool size" was replaced by a newer edit from machine' in imported
    assert f"engram history {mine} shows both" in imported
    history = alice.engram("history", str(mine))
    assert "30 connections (Bob)" in history and "20 connections (Alice)" in history
    assert history.index("30 connections (Bob)") < history.index("20 connections (Alice)")
    as_json = orjson.loads(alice.engram("history", str(mine), "--json"))
    assert as_json["revisions"][0]["content"] == "20 connections (Alice)"
    assert as_json["revisions"][0]["written_here"] is True and as_json["written_here"] is False
