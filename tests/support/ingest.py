"""A real repository made in the test with the real git binary: plain commits, a merged
feature branch, and a dependabot commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_COMMITTER_NAME": "Carol",
    "GIT_COMMITTER_EMAIL": "carol@example.com",
    "GIT_AUTHOR_NAME": "Carol",
    "GIT_AUTHOR_EMAIL": "carol@example.com",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}


class Repo:
    def __init__(self, path: Path, home: Path) -> None:
        self.path = path
        self.env = {**ENV, "HOME": str(home)}
        path.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=self.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"git {args}: {done.stderr}"
        return done.stdout

    def commit(
        self, message: str, files: dict[str, str], author: str = "Alice <alice@example.com>"
    ) -> str:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            self.git("add", name)
        self.git("commit", "-q", "--author", author, "-m", message)
        return self.git("rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path)


def make_repo(tmp_path: Path) -> Repo:
    """The test repository ``shop`` under ``tmp_path``."""
    home = tmp_path / "home"
    home.mkdir()
    repo = Repo(tmp_path / "shop", home)
    repo.commit("Initial layout", {"README.md": "shop\n"})
    repo.commit(
        "fix: session cookie expired too early\n\nThe refresh ran after the check.",
        {"auth/session.py": "x = 1\n"},
    )
    repo.git("checkout", "-q", "-b", "feature/cart")
    repo.commit("Add cart model", {"cart/model.py": "class Cart: ...\n"}, "Bob <bob@example.com>")
    repo.commit("Add cart API", {"cart/api.py": "def add(): ...\n"}, "Bob <bob@example.com>")
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "feature/cart", "-m", "Merge pull request #7 from bob/cart")
    repo.commit(
        "Bump requests from 2.31 to 2.32",
        {"requirements.txt": "requests==2.32\n"},
        "dependabot[bot] <49699333+dependabot[bot]@users.noreply.github.com>",
    )
    return repo
