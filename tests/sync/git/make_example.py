"""Regenerate ``.engram-example/`` at the top of this repository with real ``engram`` commands.

    .venv/bin/python tests/sync/git/make_example.py

In a throw-away git repository called ``acme`` with its own data directory, it saves memories in
two sessions, edits one (a topic re-save), deletes another, runs ``engram sync`` and copies the
resulting ``.engram/`` here. The docs show it and ``test_example.py`` imports it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / ".engram-example"
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from tests.support import run_engram  # noqa: E402

#: (title, content, extra flags) in the order they are saved.
MEMORIES = [
    (
        "Team server uses PostgreSQL",
        "**What**: the cloud server stores mutations in PostgreSQL.\n"
        "**Why**: several server processes must share one database.",
        ["--type", "decision", "--topic", "architecture/database", "--session", "s-design"],
    ),
    (
        "Scratch idea: store chunks in S3",
        "**What**: an idea we dropped: git already carries the chunks.",
        ["--type", "discovery", "--session", "s-design"],
    ),
    (
        "Login tokens expired an hour early",
        "**What**: the token TTL was computed in local time.\n"
        "**Fix**: normalize timestamps to UTC at the edge.\n"
        "**Where**: src/auth/session.py",
        ["--type", "bugfix", "--session", "s-bugs"],
    ),
    (
        "Retry webhooks with jitter",
        "**What**: exponential backoff with full jitter for the payment webhook.\n"
        "**Learned**: retries without jitter made the outage worse.",
        ["--type", "pattern", "--session", "s-bugs"],
    ),
]
EDIT = (
    "Team server uses PostgreSQL",
    "**What**: the cloud server stores mutations in PostgreSQL; every laptop keeps SQLite.\n"
    "**Why**: several server processes share one database; local-first stays offline.",
    ["--type", "decision", "--topic", "architecture/database", "--session", "s-design"],
)
ENV = {"USER": "example"}


def engram(*args: str, data: Path, cwd: Path) -> str:
    done = run_engram(*args, data_dir=data, cwd=cwd, env=ENV)
    if done.returncode != 0:
        raise SystemExit(f"engram {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="engram-example-") as tmp:
        repo, data = Path(tmp) / "acme", Path(tmp) / "data"
        repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        ids = {}
        for title, content, flags in MEMORIES:
            out = engram("save", title, content, *flags, "--json", data=data, cwd=repo)
            ids[title] = orjson.loads(out)["id"]
        engram("save", EDIT[0], EDIT[1], *EDIT[2], data=data, cwd=repo)
        engram("delete", str(ids["Scratch idea: store chunks in S3"]), data=data, cwd=repo)
        print(engram("sync", data=data, cwd=repo), end="")
        if EXAMPLE.exists():
            shutil.rmtree(EXAMPLE)
        shutil.copytree(repo / ".engram", EXAMPLE, ignore=shutil.ignore_patterns("*.lock"))
    print(f"wrote {EXAMPLE}")


if __name__ == "__main__":
    main()
