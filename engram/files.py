"""Writing files so that a crash leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from engram.platform import private_directory, set_mode

#: Temp files are hidden (``.name.XXXX.tmp``) so listings and .gitignore can skip them.
TEMP_SUFFIX = ".tmp"
NEW_FILE_MODE = 0o644


def fsync_directory(path: Path) -> None:
    """Make a rename inside ``path`` durable."""
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be fsynced
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(
    path: Path, data: bytes, *, mode: int | None = None,
    midway: Callable[[], None] | None = None,
) -> None:  # fmt: skip
    """Write ``data`` to ``path`` through a hidden temp file beside it: fsynced, renamed over
    it, and the directory fsynced.

    ``mode`` sets the new file's permissions (0600 for secrets); by default a replaced file keeps
    its mode (config files may hold secrets) and a new one gets 0644. ``midway`` runs after half
    the bytes are written: a seam for crash tests.
    """
    if mode is not None and not mode & 0o077 and not path.parent.exists():
        private_directory(path.parent)  # a new home for a secret is private too (cloud.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        if mode is None:
            try:
                mode = os.stat(path).st_mode & 0o7777
            except FileNotFoundError:
                mode = NEW_FILE_MODE
        set_mode(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            if midway is not None:
                handle.write(data[: len(data) // 2])
                handle.flush()
                midway()
                data = data[len(data) // 2 :]
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    fsync_directory(path.parent)
