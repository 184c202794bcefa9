"""A team switching one person at a time (issue 16), with the real Go tool: Go → us and us → Go
field by field, and a mixed repository where Go users and ours sync, merge in both orders and
conflict on the Go manifest, then fresh clones of each kind. Done when: a Go user's
``engram-go sync --import`` never fails because of anything we wrote; ours always exit 0 and
(with ``--go-compat``) leave every memory created by anyone with the Go users, once; ours end
with identical canonical exports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from engram.settings import Config
from engram.store import Store
from tests.interop.team import PROJECT, GoUser, Ours, Teammate, make_remote, needs_go

pytestmark = needs_go

Join = Callable[[type[Teammate], str, str], Teammate]


@pytest.fixture
def join(tmp_path: Path) -> Join:
    remote, env = make_remote(tmp_path)

    def make(kind: type[Teammate], name: str, folder: str) -> Teammate:
        return kind(tmp_path, name, remote, env, folder)

    return make


def go_export(user: GoUser) -> dict:
    path = user.root / "go-export.json"
    user.go("export", str(path))
    return orjson.loads(path.read_bytes())


def our_export(user: Ours) -> dict:
    return orjson.loads(user.engram("export", "--project", PROJECT).stdout)


OBSERVATION_FIELDS = (
    "session_id", "type", "title", "content", "tool_name", "scope", "topic_key",
    "revision_count", "duplicate_count", "last_seen_at", "created_at", "updated_at", "deleted_at",
)  # fmt: skip


def test_go_to_us_every_field(join: Join) -> None:
    alice = join(GoUser, "alice", "work-copy")
    bob = join(Ours, "bob", "acme-api")
    with alice.serve() as api:  # as the Go tool's agent hooks write
        api.post("/sessions", {"id": "s-a", "project": "work-copy", "directory": "/w"})
        for title, extra in (
            ("Auth <JWT>", {"type": "decision", "topic_key": "auth/jwt"}),
            ("Flaky test", {"type": "bugfix", "tool_name": "pytest"}),
            ("Dropped", {"type": "discovery"}),
        ):
            body = {"session_id": "s-a", "title": title, "content": f"{title} & more", **extra}
            last = api.post("/observations", {**body, "project": "work-copy"})["id"]
        api.delete(f"/observations/{last}")
        api.post("/prompts", {"session_id": "s-a", "content": "why?", "project": "work-copy"})
        api.post("/sessions/s-a/end", {"summary": "## Goal\nauth"})
    alice.sync()
    bob.sync()
    theirs, ours = go_export(alice), our_export(bob)
    by_title = {o["title"]: o for o in ours["observations"]}
    assert len(by_title) == len(theirs["observations"]) == 3
    for row in theirs["observations"]:
        mine = by_title[row["title"]]
        assert {f: mine.get(f) for f in OBSERVATION_FIELDS} == {
            f: row.get(f) for f in OBSERVATION_FIELDS
        }
        assert mine["project"] == PROJECT  # the repository's project, not the clone's name
    [session] = [s for s in ours["sessions"] if s["id"] == "s-a"]
    [go_session] = theirs["sessions"]
    for name in ("directory", "started_at", "ended_at", "summary"):
        assert session[name] == go_session[name]
    assert [(p["content"], p["created_at"], p["session_id"]) for p in ours["prompts"]] == [
        (p["content"], p["created_at"], p["session_id"]) for p in theirs["prompts"]
    ]


def test_us_to_go_every_field_and_only_once(join: Join) -> None:
    bob = join(Ours, "bob", "acme-api")
    alice = join(GoUser, "alice", "work-copy")
    with Store.open(config=Config(data_dir=bob.data)) as store:
        store.create_session("s-b", PROJECT, str(bob.path))
        store.add_observation(
            title="Cache <LRU>", content="**What**: 512 entries & TTL", project=PROJECT,
            session_id="s-b", type="decision", topic_key="perf/cache", tool_name="bench",
        )  # fmt: skip
        store.add_prompt("how big a cache?", session_id="s-b", project=PROJECT)
        store.end_session("s-b", "## Goal\ncaching")
    bob.engram("save", "Second", "plain", "--type", "pattern")
    bob.sync("--go-compat")
    alice.pull()
    imported = alice.go("sync", "--import")
    assert "Imported 1 new chunk" in imported.stdout  # only the Go-format one: log/ is ours
    theirs, ours = go_export(alice), our_export(bob)
    assert sorted(o["title"] for o in theirs["observations"]) == ["Cache <LRU>", "Second"]
    by_title = {o["title"]: o for o in ours["observations"]}
    for row in theirs["observations"]:
        mine = by_title[row["title"]]
        assert {f: row.get(f) for f in OBSERVATION_FIELDS} == {
            f: mine.get(f) for f in OBSERVATION_FIELDS
        }
        assert row["project"] == PROJECT
    [session] = [s for s in theirs["sessions"] if s["id"] == "s-b"]
    assert (session["directory"], session["summary"]) == (str(bob.path), "## Goal\ncaching")
    assert [p["content"] for p in theirs["prompts"]] == ["how big a cache?"]
    assert "Cache" in alice.go("search", "cache").stdout  # the Go tool's own index has it

    # an edit is not a creation: nothing new for Go users, and nothing ever arrives twice
    bob.engram("save", "Cache <LRU>", "**What**: 1024 entries", "--topic", "perf/cache")
    bob.sync("--go-compat")
    bob.sync("--go-compat")
    alice.pull()
    alice.go("sync", "--import")
    assert alice.titles() == ["Cache <LRU>", "Second"]


def test_mixed_repository_merges_conflicts_and_fresh_clones(join: Join) -> None:
    alice = join(GoUser, "alice", "work-copy")
    carol = join(GoUser, "carol", "api")
    bob = join(Ours, "bob", "acme-api")
    erin = join(Ours, "erin", "checkout")  # ours too, without --go-compat
    bob.engram("sync", "--go-compat", "on")  # remembered for this clone on bob's machine
    everyone: list[str] = []

    def saved(title: str) -> str:
        everyone.append(title)
        return title

    # 1. alice (Go) pushes first; bob committed his own sync meanwhile, then merges hers: both
    #    created the Go manifest (add/add conflict), which his import repairs.
    alice.save(saved("A1 alice"), "from Go")
    alice.sync()
    bob.save(saved("B1 bob"), "from ours")
    bob.engram("sync")
    bob.commit("bob: sync before pulling")
    assert bob.sync() == [".engram/manifest.json"]

    # 2. carol (Go) receives both, and adds her own.
    carol.pull()
    carol.go("sync", "--import")
    assert sorted(carol.titles()) == ["A1 alice", "B1 bob"]
    carol.save(saved("C1 carol"), "from Go")
    carol.sync()

    # 3. two Go users at once: alice's sync conflicts with carol's on the manifest, and alice
    #    commits the file as git left it. Every Go user's sync now fails (the Go tool's own
    #    doing), until one of ours syncs.
    alice.save(saved("A2 alice"), "from Go again")
    alice.go("sync")
    alice.commit("alice: sync")
    alice.pull()
    assert alice.conflicted() == [".engram/manifest.json"]
    alice.commit_merge()
    alice.push()
    carol.pull()
    broken = carol.go("sync", "--import", check=False)
    assert broken.returncode != 0 and "parse manifest" in broken.stderr

    # 4. erin (ours, no --go-compat) pulls the Go users' merge first, then saves: her sync
    #    repairs the manifest (both sides' entries), and writes only log/.
    erin.save(saved("E1 erin"), "ours, no go-compat")
    erin.sync()
    manifest = (erin.path / ".engram" / "manifest.json").read_bytes()
    assert b"<<<<<<<" not in manifest and manifest.count(b'"created_by": "alice"') == 2

    # 5. carol recovers; bob writes for the Go users what they lack (erin's memory).
    carol.pull()
    carol.go("sync", "--import")
    bob.sync()
    for user in (alice, carol):
        user.pull()
        done = user.go("sync", "--import")
        assert done.returncode == 0
        assert sorted(user.titles()) == sorted(everyone), user.name  # every memory, once

    # 6. a Go user merges ours: alice commits a sync, erin pushes first, alice pulls (a
    #    merge: erin writes only log/, nothing of the Go tool's to conflict with)
    alice.save(saved("A3 alice"), "before the merge")
    alice.go("sync")
    alice.commit("alice: sync")
    erin.save(saved("E2 erin"), "pushed first")
    erin.sync()
    alice.pull()
    assert alice.conflicted() == []
    alice.go("sync", "--import")
    alice.push()
    bob.sync()
    for user in (alice, carol):
        user.pull()
        user.go("sync", "--import")
        assert sorted(user.titles()) == sorted(everyone), user.name

    # 7. ours converge exactly
    erin.sync()
    bob.sync()
    erin.sync()
    assert sorted(bob.titles()) == sorted(everyone) and bob.canonical() == erin.canonical()

    # 8. fresh clones of each kind
    dave = join(GoUser, "dave", "fresh-go")
    assert dave.go("sync", "--import").returncode == 0
    assert sorted(dave.titles()) == sorted(everyone)
    frank = join(Ours, "frank", "fresh-ours")
    frank.engram("sync", "--import")
    assert frank.canonical() == bob.canonical()
