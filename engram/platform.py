"""What Engram asks of the operating system, in one place with a portable fallback each.

Claude Desktop users are often on macOS or Windows, so every call that differs between systems
lives here, and the rest of Engram calls these functions:

* **Private file modes.** Memories are often more sensitive than the code they describe, so the
  data directory is created ``0700`` and the database files (``engram.db``, its ``-wal`` and
  ``-shm``, backups) ``0600``: other accounts on the machine cannot read them. A data directory
  that group or others can enter is tightened when Engram opens it (with a one-line notice).
  Where permission bits mean nothing (Windows), these calls create what is asked and change
  nothing else: there the user profile's ACLs already keep other accounts out.
* **File locks** (:func:`lock_file`): ``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows;
  where neither exists the caller runs unguarded (what one process at a time does is still
  atomic on disk, only concurrent writers could interleave).
* **The machine's identity** (:func:`machine_id`), part of the database's fingerprint (a copied
  database gets a new origin): ``/etc/machine-id`` on Linux, the kernel's boot-stable
  ``kern.uuid`` on macOS, ``MachineGuid`` from the registry on Windows; ``""`` elsewhere (the
  fingerprint still has the host name, path and inode).
* **Is a process alive** (:func:`process_alive`): ``kill(pid, 0)`` on POSIX (on Windows that
  call would *interrupt* the process), ``OpenProcess`` on Windows, ``None`` (unknown) elsewhere.

Linux runs the test suite for real; the macOS and Windows branches are tested by simulating
those systems' answers (``tests/test_platform.py``): the modules and readers below are looked up
at call time, so a test can stand in for them.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import stat
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

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


def set_mode(fd: int, mode: int) -> None:
    """``fchmod`` where permission bits exist (``os.fchmod`` is missing on Windows before
    Python 3.13); nothing elsewhere."""
    if HAS_MODES and hasattr(os, "fchmod"):
        os.fchmod(fd, mode)


# --- file locks ---------------------------------------------------------------------------


def _module(name: str) -> ModuleType | None:
    try:
        return __import__(name)
    except ImportError:
        return None


#: The lock modules of this system (a test simulating another system replaces them).
fcntl: ModuleType | None = _module("fcntl")
msvcrt: ModuleType | None = _module("msvcrt")


def lock_file(fd: int, *, wait: bool = True) -> bool:
    """Take an exclusive lock on the open file ``fd`` (released when it is closed, or when
    the process dies). ``wait=False`` returns ``False`` at once when another process holds it.
    Returns ``True`` when locked, or when this system has no locks (the caller goes on
    unguarded, see the module's docstring)."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True
    if msvcrt is not None:
        # Windows locks byte ranges: the first byte stands for the whole file. LK_LOCK itself
        # retries for ten seconds only, so waiting is a loop of non-blocking tries.
        while True:
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                return True
            except OSError:
                if not wait:
                    return False
                time.sleep(0.05)
    return True


# --- the machine's identity ---------------------------------------------------------------

LINUX_MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


def _read_first(paths: tuple[Path, ...]) -> str:
    for path in paths:
        try:
            value = path.read_text().strip()
        except OSError:
            continue
        if value:
            return value
    return ""


def _sysctl_string(name: str) -> str:
    """A string sysctl (macOS, the BSDs) through libc, without starting a process."""
    import ctypes
    import ctypes.util

    library = ctypes.util.find_library("c")
    if not library:
        return ""
    libc = ctypes.CDLL(library, use_errno=True)
    size = ctypes.c_size_t(0)
    if libc.sysctlbyname(name.encode(), None, ctypes.byref(size), None, 0) != 0 or not size.value:
        return ""
    buffer = ctypes.create_string_buffer(size.value)
    if libc.sysctlbyname(name.encode(), buffer, ctypes.byref(size), None, 0) != 0:
        return ""
    return buffer.value.decode(errors="replace").strip()


def _registry_value(key: str, name: str) -> str:
    """A string value under HKEY_LOCAL_MACHINE (Windows), read for 64-bit views too."""
    # Looked up at run time: winreg exists on Windows only (and type checkers of other systems
    # know none of its names).
    winreg: Any = importlib.import_module("winreg")
    access = winreg.KEY_READ | getattr(winreg, "KEY_WOW64_64KEY", 0)
    with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, key, 0, access) as handle:
        value, _ = winreg.QueryValueEx(handle, name)
    return str(value).strip()


def machine_id(system: str | None = None) -> str:
    """A stable identifier of this machine (its installation), or ``""`` when the system has
    none Engram can read. ``system`` is ``sys.platform`` unless given (tests)."""
    system = system or sys.platform
    try:
        if system.startswith("linux"):
            return _read_first(LINUX_MACHINE_ID_FILES)
        if system == "darwin" or "bsd" in system:
            return _sysctl_string("kern.uuid" if system == "darwin" else "kern.hostuuid")
        if system in ("win32", "cygwin"):
            return _registry_value(r"SOFTWARE\Microsoft\Cryptography", "MachineGuid")
    except (OSError, ImportError, AttributeError, ValueError):
        return ""
    return _read_first(LINUX_MACHINE_ID_FILES)  # other Unixes sometimes have one


# --- processes ----------------------------------------------------------------------------


def _windows_process_alive(pid: int) -> bool | None:
    import ctypes

    windows: Any = ctypes  # WinDLL and get_last_error exist on Windows only
    kernel32 = windows.WinDLL("kernel32", use_last_error=True)
    query_limited_information, still_active = 0x1000, 259
    handle = kernel32.OpenProcess(query_limited_information, False, pid)
    if not handle:
        return bool(windows.get_last_error() == 5)  # ERROR_ACCESS_DENIED: it exists, not ours
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return None
        return code.value == still_active
    finally:
        kernel32.CloseHandle(handle)


def process_alive(pid: int, system: str | None = None) -> bool | None:
    """Whether process ``pid`` runs: ``True``, ``False``, or ``None`` when this system gives
    no cheap way to ask (the caller then checks another way, e.g. over HTTP)."""
    if pid <= 0:
        return False
    system = system or sys.platform
    if system in ("win32", "cygwin"):
        try:
            return _windows_process_alive(pid)
        except (OSError, AttributeError, ImportError):
            return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    except OSError:
        return None
    return True
