"""A mixed team on one real git repository: teammates running the real Go tool
(``engram-go``, upstream 1f46479) and teammates running Engram, each with a clone and a data
directory of their own.

The Go binary is ``$ENGRAM_GO_BIN``, else ``shared/interop/engram-go`` beside (or above) this
checkout. Tests that need it are skipped with the reason when it is absent; CI has it. The
remote is ``…/acme-api.git`` (our project name), and the Go teammates' clones are called
``work-copy`` and the like, which the Go tool takes as its project name.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from engram.settings import Config
from engram.store import Store
from tests.support import REPO, free_port, run_engram, wait_for_port

PROJECT = "acme-api"  # detected from the remote by Engram, on every clone
_CANDIDATES = (
    REPO.parent / "shared" / "interop" / "engram-go",
    REPO.parent.parent / "shared" / "interop" / "engram-go",
    Path("/work/shared/interop/engram-go"),
)


def go_binary() -> Path | None:
    """The Go tool's binary, or None when this machine has none."""
    configured = os.environ.get("ENGRAM_GO_BIN", "").strip()
    candidates = (Path(configured),) if configured else _CANDIDATES
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


GO = go_binary()
needs_go = pytest.mark.skipif(
    GO is None,
    reason="the Go tool's binary is absent: set ENGRAM_GO_BIN or put it at "
    "../shared/interop/engram-go (CI has it); the fixture-based tests still run",
)


def git_env(root: Path) -> dict[str, str]:
    home = root / "home"
    home.mkdir(exist_ok=True)
    return {
        "HOME": str(home),  # no user or system git configuration leaks in
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }


class Teammate:
    """One developer: a clone (named ``folder``) and a data directory of their own."""

    def __init__(self, root: Path, name: str, remote: Path, env: dict[str, str], folder: str):
        self.name = name
        self.root = root / name
        self.root.mkdir()
        self.path = self.root / folder
        self.data = self.root / "data"
        self.env = {**env, "USER": name}
        self.git("clone", "-q", str(remote), str(self.path), cwd=self.root)

    def git(self, *args: str, cwd: Path | None = None, check: bool = True) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd or self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check:
            assert done.returncode == 0, f"{self.name}: git {' '.join(args)}\n{done.stderr}"
        return done.stdout + done.stderr

    def commit(self, message: str) -> bool:
        self.git("add", "-A", ".engram")
        if not self.git("status", "--porcelain", ".engram").strip():
            return False
        self.git("commit", "-q", "-m", message)
        return True

    def pull(self) -> subprocess.CompletedProcess[str]:
        """``git pull`` (a merge); returns the result, conflicts included."""
        return subprocess.run(
            ["git", "pull", "-q", "--no-rebase", "--no-edit"],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def push(self) -> None:
        self.git("push", "-q")

    def conflicted(self) -> list[str]:
        """Paths git left unmerged."""
        return self.git("diff", "--name-only", "--diff-filter=U").split()

    def commit_merge(self) -> None:
        """Conclude a merge with whatever is in the files now (markers included, as a hasty
        user does with ``git add -A && git commit``)."""
        self.git("add", "-A")
        self.git("commit", "-q", "--no-edit")

    def canonical(self) -> bytes:
        with Store.open(config=Config(data_dir=self.data)) as store:
            return store.canonical_export(projects=[PROJECT], include_personal=False)


class Ours(Teammate):
    """A teammate running Engram."""

    def engram(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = run_engram(*args, data_dir=self.data, cwd=self.path, env=self.env)
        if check:
            assert done.returncode == 0, f"{self.name}: engram {' '.join(args)}\n{done.stderr}"
        return done

    def save(self, title: str, content: str, *extra: str) -> None:
        self.engram("save", title, content, *extra)

    def sync(self, *extra: str) -> list[str]:
        """What the docs tell one of ours to do: pull (a conflict on the Go manifest is
        repaired by the import: then commit the merge), import, export, commit, push; returns
        the paths the pull left conflicted."""
        pulled = self.pull()
        conflicts = self.conflicted()
        assert set(conflicts) <= {".engram/manifest.json"}, (self.name, conflicts, pulled.stderr)
        self.engram("sync", "--import")
        if conflicts:
            assert b"<<<<<<<" not in (self.path / ".engram" / "manifest.json").read_bytes()
            self.commit_merge()
        self.engram("sync", *extra)
        self.commit(f"{self.name}: sync engram memories")
        self.push()
        return conflicts

    def titles(self) -> list[str]:
        """Live memories of the repository's project (a list: duplicates show)."""
        document = orjson.loads(self.canonical())
        return sorted(o["title"] for o in document["observations"] if not o["deleted_at"])


class GoUser(Teammate):
    """A teammate still running the Go tool."""

    def go(self, *args: str, check: bool = True, cwd: Path | None = None):
        assert GO is not None
        done = subprocess.run(
            [str(GO), *args],
            cwd=cwd or self.path,
            env={**self.env, "ENGRAM_DATA_DIR": str(self.data)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check:
            assert done.returncode == 0, f"{self.name}: engram-go {' '.join(args)}\n{done.stderr}"
        return done

    def save(self, title: str, content: str) -> None:
        # The Go tool exports only rows strictly newer than its manifest's newest entry, to the
        # second: a memory saved in the very second of an entry would never be exported (the
        # Go tool's own behaviour, between Go users too), so wait for the next second.
        newest = self.manifest_newest()
        while newest and time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) <= newest:
            time.sleep(0.1)
        # The Go tool's CLI names the project only when told; its agents use the folder name.
        self.go("save", title, content, "--project", self.path.name)

    def engram(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Engram on this teammate's data directory: the day they switch."""
        done = run_engram(*args, data_dir=self.data, cwd=self.path, env=self.env)
        if check:
            assert done.returncode == 0, f"{self.name}: engram {' '.join(args)}\n{done.stderr}"
        return done

    def manifest_newest(self) -> str:
        """The newest ``created_at`` of this clone's manifest (``""``: none or unreadable)."""
        try:
            document = orjson.loads((self.path / ".engram" / "manifest.json").read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return ""
        return max((c.get("created_at") or "" for c in document.get("chunks") or ()), default="")

    def sync(self) -> subprocess.CompletedProcess[str]:
        """``engram-go sync``, commit, push (pulling first if the push is refused)."""
        done = self.go("sync")
        self.commit(f"{self.name}: sync engram memories")
        self.push()
        return done

    @contextmanager
    def serve(self) -> Iterator[GoApi]:
        """The Go tool's HTTP API on a free port (what its agent hooks talk to)."""
        assert GO is not None
        port = free_port()
        process = subprocess.Popen(
            [str(GO), "serve", str(port)],
            cwd=self.path,
            env={**self.env, "ENGRAM_DATA_DIR": str(self.data)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port(port)
            yield GoApi(f"http://127.0.0.1:{port}")
        finally:
            process.terminate()
            process.wait(timeout=30)

    def rows(self, sql: str) -> list[tuple]:
        """Rows of the Go tool's own database."""
        import sqlite3

        conn = sqlite3.connect(self.data / "engram.db")
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    def titles(self) -> list[str]:
        """Every live memory in the Go tool's database (a list: duplicates show)."""
        return [
            r[0]
            for r in self.rows(
                "SELECT title FROM observations WHERE deleted_at IS NULL ORDER BY title"
            )
        ]


class GoApi:
    """A few calls of the Go tool's HTTP API."""

    def __init__(self, base: str) -> None:
        import httpx

        self.http = httpx.Client(base_url=base, timeout=30)

    def post(self, path: str, body: dict) -> dict:
        answer = self.http.post(path, json=body)
        assert answer.status_code in (200, 201), (path, answer.status_code, answer.text)
        return answer.json()

    def delete(self, path: str) -> dict:
        answer = self.http.delete(path)
        assert answer.status_code == 200, (path, answer.status_code, answer.text)
        return answer.json()


def make_remote(root: Path) -> tuple[Path, dict[str, str]]:
    """A bare remote ``acme-api.git`` with one commit on ``main``."""
    env = git_env(root)
    remote = root / "acme-api.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True, env=env)
    seed = root / "seed"
    subprocess.run(["git", "clone", "-q", str(remote), str(seed)], check=True, env=env)
    subprocess.run(["git", "checkout", "-q", "-b", "main"], cwd=seed, check=True, env=env)
    (seed / "README.md").write_text("acme api\n")
    for args in (
        ("add", "README.md"),
        ("commit", "-q", "-m", "initial"),
        ("push", "-q", "origin", "main"),
    ):
        subprocess.run(["git", *args], cwd=seed, check=True, env=env)
    return remote, env
