"""What Engram asks of the operating system, in one place with a portable fallback each.

Today: private file modes. Memories are often more sensitive than the code they describe, so the
data directory is created ``0700`` and the database files (``engram.db``, its ``-wal`` and
``-shm``, backups) ``0600``: other accounts on the machine cannot read them. A data directory
that group or others can enter is tightened when Engram opens it (with a one-line notice).
Where permission bits mean nothing (Windows), these calls create what is asked and change
nothing else: there the user profile's ACLs already keep other accounts out.

(File locks and the machine fingerprint are the other platform-specific pieces; they are meant
to move here too.)
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: Permission bits are honoured (POSIX). Elsewhere every call below is a portable no-op.
HAS_MODES = os.name == "posix"


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _owned(path: Path) -> bool:
    """Whether this process's user owns ``path``: modes of anything else (a symlink's target,
    a directory shared on purpose) are never changed, even when running as root."""
    try:
        return os.stat(path).st_uid == os.geteuid()
    except OSError:
        return False


def _too_open(mode: int) -> bool:
    return bool(mode & 0o077)  # any permission for group or others


def private_directory(path: Path) -> str | None:
    """Make ``path`` a private directory: created ``0700`` (parents as the umask says), or
    tightened to ``0700`` when group or others have any access to it.

    Returns a one-line notice when an existing directory was tightened (or could not be), else
    ``None``. Raises ``OSError`` when the directory cannot be created.
    """
    if _mode(path) is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.mkdir(path, PRIVATE_DIR_MODE)
        if not HAS_MODES:
            return None
        # mkdir's mode is masked by the umask (which only removes bits): nothing more to do
        # unless the directory was made by someone else in between.
    if not HAS_MODES:
        return None
    mode = _mode(path)
    if mode is None or not _too_open(mode):
        return None
    if not _owned(path):
        return (
            f"{path} is open to other users (mode {mode:04o}) and belongs to another user; "
            "left as it is"
        )
    try:
        os.chmod(path, PRIVATE_DIR_MODE)
    except OSError as exc:
        return (
            f"{path} is open to other users (mode {mode:04o}) and could not be made "
            f"private: {exc.strerror or exc}; run 'chmod 700 {path}'"
        )
    return (
        f"made {path} private ({mode:04o} → {PRIVATE_DIR_MODE:04o}): other users of this "
        "machine could read your memories"
    )


def private_file(path: Path) -> int | None:
    """Create ``path`` empty with mode ``0600`` if it does not exist, or take group and
    others' access away from an existing one. Returns the mode it had when it was tightened."""
    if not HAS_MODES:
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        return None
    try:
        # O_EXCL: never follow a planted symlink or take over a file someone else created.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
        return None
    except FileExistsError:
        pass
    return tighten_file(path)


def open_private(path: str | Path) -> BinaryIO:
    """``path`` opened for writing (truncated), created ``0600`` when it does not exist yet.
    An existing file keeps its mode (the user chose it); pipes and devices work as usual."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    return os.fdopen(os.open(path, flags, PRIVATE_FILE_MODE), "wb")


def tighten_file(path: Path) -> int | None:
    """Take group and others' access away from ``path`` if it exists; the mode it had when
    it was changed, else ``None``."""
    if not HAS_MODES:
        return None
    mode = _mode(path)
    if mode is None or not _too_open(mode) or not _owned(path):
        return None
    with contextlib.suppress(OSError):  # not ours to change: the directory still guards it
        os.chmod(path, mode & ~0o077)
        return mode
    return None
