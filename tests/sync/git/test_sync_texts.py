"""What engram sync tells a new user (issue 17 item 13): outside a git repository it does not
say "Add to git"; --status counts the selected project's memories, not every project's in the
directory; counts are in the right number."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support import run_engram


def engram(data: Path, cwd: Path, *args: str) -> str:
    result = run_engram(*args, data_dir=data, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_outside_git_there_is_nothing_to_add_to_git(data_dir: Path, tmp_path: Path) -> None:
    plain = tmp_path / "notes"
    plain.mkdir()
    engram(data_dir, plain, "save", "Pool", "30 connections", "--project", "acme")
    out = engram(data_dir, plain, "sync", "--project", "acme")
    assert "Created chunk" in out and "Add to git" not in out and "git add" not in out
    assert "is not in a git repository" in out
    repo = tmp_path / "acme"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    engram(data_dir, repo, "save", "Cache", "10 minutes")
    inside = engram(data_dir, repo, "sync")
    assert "Add to git:" in inside and "git add .engram/" in inside


def test_status_counts_the_selected_projects_memories(data_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "acme"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for n in range(2):
        engram(data_dir, repo, "save", f"Acme {n}", f"acme memory {n}")
    for n in range(3):
        engram(data_dir, repo, "save", f"Side {n}", f"side memory {n}", "--project", "side")
    engram(data_dir, repo, "sync", "--all")
    status = engram(data_dir, repo, "sync", "--status")
    assert '1 chunk, 2 memories of project "acme" (all projects: 5 memories)' in status
    everything = engram(data_dir, repo, "sync", "--status", "--all")
    assert "1 chunk, 5 memories, 2 sessions" in everything
