"""Two clones of a real repository share memories through ``engram sync`` and the real git
binary: saves, edits and deletes on both sides, pushes and pulls that force merges, and no
manual conflict resolution anywhere. A third clone joins late and catches up from the chunks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from engram.config import Config
from engram.store import Store
from tests.support import run_engram

PROJECT = "remote"  # detected from the origin url .../remote.git, on every clone


class Clone:
    """One developer: a working copy and an Engram data directory of their own."""

    def __init__(self, root: Path, name: str, remote: Path, env: dict[str, str]) -> None:
        self.name = name
        self.path = root / name
        self.data = root / f"{name}-engram"
        self.env = env
        self.git("clone", "-q", str(remote), str(self.path), cwd=root)

    def git(self, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd or self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{self.name}: git {' '.join(args)}\n{done.stderr}"
        return done.stdout

    def engram(self, *args: str) -> str:
        done = run_engram(*args, data_dir=self.data, cwd=self.path, env=self.env)
        assert done.returncode == 0, f"{self.name}: engram {' '.join(args)}\n{done.stderr}"
        return done.stdout

    def save(self, title: str, content: str, *extra: str) -> int:
        out = orjson.loads(self.engram("save", title, content, "--json", *extra))
        return int(out["id"])

    def find(self, words: str) -> dict:
        [hit] = orjson.loads(self.engram("search", words, "--json", "--match", "all"))
        return hit

    def sync_and_commit(self, message: str) -> None:
        self.engram("sync")
        self.git("add", ".engram")
        if self.git("status", "--porcelain"):
            self.git("commit", "-q", "-m", message)

    def pull(self) -> None:
        # a merge, never a rebase: the manifest is union-merged by .engram/.gitattributes
        self.git("pull", "-q", "--no-rebase", "--no-edit")

    def canonical(self) -> bytes:
        with Store.open(config=Config(data_dir=self.data)) as store:
            return store.canonical_export(projects=[PROJECT], include_personal=False)


@pytest.fixture
def world(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),  # no user or system git configuration leaks in
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True, env=env)
    first = Clone(tmp_path, "seed", remote, env)
    first.git("checkout", "-q", "-b", "main")
    (first.path / "README.md").write_text("acme\n")
    first.git("add", "README.md")
    first.git("commit", "-q", "-m", "initial")
    first.git("push", "-q", "origin", "main")
    return tmp_path, remote, env


def test_two_clones_converge_through_git_with_merges(world) -> None:
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
    b.pull()  # a real merge: both added .engram/manifest.json
    assert "<<<<<<<" not in (b.path / ".engram" / "manifest.json").read_text()
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
    a.pull()  # merge again, manifest modified on both sides
    a.engram("sync", "--import")
    a.sync_and_commit("alice: manifest after merge")
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
    assert status["manifest"] == "ok"
    # nothing Carol received goes back into the directory
    assert "Nothing new to sync" in c.engram("sync")
