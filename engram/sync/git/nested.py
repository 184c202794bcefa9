"""Go tool ``.engram/`` directories elsewhere in the repository.

The Go tool writes its sync directory wherever it was run, so a teammate who ran it in
``services/api/`` committed ``services/api/.engram/manifest.json`` and ``chunks/``. Their
memories belong to the repository all the same: import reads those chunks too (and, like
every Go-format chunk here, applies them to the repository's project).

They are found through git (``git ls-files``): only files the repository tracks, never a walk
of the working tree (which may hold ``node_modules`` and the like), and only directories whose
every path component is a real directory, never a symbolic link.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from engram.sync.git.gitdir import CHUNKS, MANIFEST, SYNC_DIR_NAME, SyncDir

GIT_TIMEOUT_SECONDS = 30
_PATTERNS = (
    f":(glob)**/{SYNC_DIR_NAME}/{CHUNKS}/*.jsonl.gz",
    f":(glob)**/{SYNC_DIR_NAME}/{MANIFEST}",
)


@dataclass(frozen=True, slots=True)
class NestedGoDir:
    """A Go tool sync directory inside the repository: ``rel`` is its path from the top."""

    rel: str
    sync_dir: SyncDir


def _real_directory(top: Path, rel: PurePosixPath) -> bool:
    """Whether every component of ``top/rel`` is a directory and none is a symbolic link."""
    current = top
    for part in rel.parts:
        current = current / part
        try:
            if os.path.islink(current) or not current.is_dir():
                return False
        except OSError:
            return False
    return True


def nested_go_dirs(sync_dir: SyncDir) -> list[NestedGoDir]:
    """The Go sync directories tracked in the repository whose top holds ``sync_dir``, other
    than ``sync_dir`` itself; none when ``sync_dir`` is not at the top of a git worktree or
    git cannot be asked."""
    top = sync_dir.path.parent
    if sync_dir.path.name != SYNC_DIR_NAME or not (top / ".git").exists():
        return []
    try:
        done = subprocess.run(
            ["git", "-C", str(top), "ls-files", "-z", "--", *_PATTERNS],
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    found: set[PurePosixPath] = set()
    for raw in done.stdout.split(b"\0"):
        if not raw:
            continue
        path = PurePosixPath(os.fsdecode(raw))
        folder = path.parent.parent if path.parent.name == CHUNKS else path.parent
        if folder.name == SYNC_DIR_NAME and folder != PurePosixPath(SYNC_DIR_NAME):
            found.add(folder)
    return [
        NestedGoDir(str(rel), SyncDir(top.joinpath(*rel.parts)))
        for rel in sorted(found)
        if ".." not in rel.parts and _real_directory(top, rel)
    ]
