"""Two clones of a real repository share memories through ``engram sync`` and the real git
binary: saves, edits and deletes on both sides, pushes and pulls that force merges, and no
manual conflict resolution anywhere. A third clone joins late and catches up from the chunks."""

from __future__ import annotations

import orjson

from tests.sync.git.clones import Clone, world  # noqa: F401 - re-exported for other packages


def test_two_clones_converge_through_git_with_merges(world) -> None:  # noqa: F811
    root, remote, env = world
    a, b = Clone(root, "alice", remote, env), Clone(root, "bob", remote, env)

    # Both work before either has seen the other.
    a.save(
        "Database choice",
        "**What**: Postgres for the cloud",
        "--type",
        "decision",
        "--topic",
        "architecture/database",
    )
    a_bug = a.save("Login bug", "**What**: token expired early", "--type", "bugfix")
    a.save("My shell aliases", "personal notes", "--scope", "personal")
    b.save("Retry pattern", "**What**: exponential backoff with jitter", "--type", "pattern")
    b_doomed = b.save("Temporary note", "**What**: delete me later")

    a.sync_and_commit("alice: memories")
    a.git("push", "-q")
    b.sync_and_commit("bob: memories")
    b.pull()  # a real merge: both added .engram/log/index.jsonl
    assert "<<<<<<<" not in (b.path / ".engram" / "log" / "index.jsonl").read_text()
    assert not (b.path / ".engram" / "manifest.json").exists()  # the Go tool's: never ours
    b.engram("sync", "--import")
    # Bob edits Alice's topic memory and deletes his own note.
    b.save(
        "Database choice",
        "**What**: Postgres for the cloud, SQLite locally",
        "--type",
        "decision",
        "--topic",
        "architecture/database",
    )
    b.engram("delete", str(b_doomed))
    b.sync_and_commit("bob: edit and delete")
    b.git("push", "-q")

    # Meanwhile Alice hard-deletes her bug note and edits the same topic: a concurrent edit.
    a.engram("delete", str(a_bug), "--hard")
    a.save(
        "Database choice",
        "**What**: Postgres, and SQLite for local-first",
        "--type",
        "decision",
        "--topic",
        "architecture/database",
    )
    a.sync_and_commit("alice: edit and hard delete")
    a.pull()  # merge again, the index modified on both sides
    a.engram("sync", "--import")
    a.sync_and_commit("alice: index after merge")
    a.git("push", "-q")

    b.pull()
    b.engram("sync", "--import")
    a.engram("sync", "--import")

    assert a.canonical() == b.canonical()
    memories = orjson.loads(a.canonical())["observations"]
    titles = {m["title"]: m for m in memories}
    assert set(titles) == {"Database choice", "Retry pattern", "Temporary note"}
    assert titles["Temporary note"]["deleted_at"] is not None  # soft delete travelled
    # the later of the two concurrent edits won on both sides (here Alice's)
    assert titles["Database choice"]["content"] == "**What**: Postgres, and SQLite for local-first"
    assert b.find("database choice")["content"] == titles["Database choice"]["content"]
    # the hard-deleted memory is gone everywhere, the personal one never left Alice
    assert "Login bug" not in b.engram("search", "token expired")
    assert "My shell aliases" not in b.engram("search", "shell aliases")
    assert "My shell aliases" in a.engram("search", "shell aliases")

    # A newcomer catches up from the chunks alone.
    c = Clone(root, "carol", remote, env)
    report = orjson.loads(c.engram("sync", "--import", "--json"))
    assert report["chunks_failed"] == 0 and report["chunks_imported"] >= 3
    assert c.canonical() == a.canonical()
    status = orjson.loads(c.engram("sync", "--status", "--json"))
    assert status["pending_import"] == [] and status["pending_export"] == 0
    assert status["index"] == "ok" and status["manifest"] == "missing"
    # nothing Carol received goes back into the directory
    assert "Nothing new to sync" in c.engram("sync")
