"""The whole loop through real processes and the real git binary: Alice exports her store to a
vault, edits a note and writes a new one with plain file writes, runs ``engram vault sync`` and
``engram sync``; Bob pulls, imports, and has both changes as memories."""

from __future__ import annotations

import orjson

from tests.sync.git.test_git_real import Clone, world  # noqa: F401 - the fixture is used


def test_vault_edits_reach_a_second_machine_through_git_sync(world) -> None:  # noqa: F811
    root, remote, env = world
    alice, bob = Clone(root, "alice", remote, env), Clone(root, "bob", remote, env)
    alice.save("Database choice", "**What**: Postgres **Why**: JSONB", "--type", "decision")
    alice.sync_and_commit("alice: memories")
    alice.git("push", "-q")
    bob.pull()
    bob.engram("sync", "--import")
    assert "Postgres" in bob.find("Database choice")["content"]

    vault = root / "alice-vault"
    out = orjson.loads(alice.engram("vault", "export", str(vault), "--json"))
    assert out["project"] == "remote" and out["counts"]["written"] == 1
    note = vault / "Database choice.md"
    note.write_text(note.read_text().replace("Postgres", "Postgres, SQLite locally"))
    (vault / "Retry pattern.md").write_text(
        "---\ntype: pattern\n---\n# Retry pattern\n\n## What\nexponential backoff with jitter\n"
    )
    out = orjson.loads(alice.engram("vault", "sync", str(vault), "--json"))
    assert out["counts"]["updated"] == 1 and out["counts"]["created"] == 1
    alice.sync_and_commit("alice: vault edits")
    alice.git("push", "-q")

    bob.pull()
    bob.engram("sync", "--import")
    memories = {
        m["title"]: m for m in orjson.loads(bob.engram("search", "pattern database", "--json"))
    }
    assert "Postgres, SQLite locally" in memories["Database choice"]["content"]
    retry = memories["Retry pattern"]
    assert (retry["title"], retry["type"], retry["project"]) == (
        "Retry pattern",
        "pattern",
        "remote",
    )
    assert alice.canonical() == bob.canonical()
