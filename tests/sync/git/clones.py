"""Real git for sync tests: a bare remote and developers' clones, each with an Engram data
directory of its own, driving the real ``engram`` command."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from engram.settings import Config
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
        # a merge, never a rebase: our index is union-merged by .engram/.gitattributes
        self.git("pull", "-q", "--no-rebase", "--no-edit")

    def canonical(self) -> bytes:
        with Store.open(config=Config(data_dir=self.data)) as store:
            return store.canonical_export(projects=[PROJECT], include_personal=False)


def make_world(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A bare remote ``remote.git`` with one commit on ``main``: (root, remote, git env)."""
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


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A bare git remote with one commit; make clones with :class:`Clone`."""
    return make_world(tmp_path)
