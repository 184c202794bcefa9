"""Every platform-specific call behind engram/platform.py, on this system (Linux) and with the
answers macOS and Windows give simulated (issue 17 item 9): permission bits that mean nothing,
``msvcrt`` locks instead of ``fcntl``, no locks at all, the machine id from ``kern.uuid`` or
the registry, and process liveness without ``kill(pid, 0)``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engram import platform
from engram.bindings import Bindings
from engram.store import journal


class FakeMsvcrt:
    """``msvcrt.locking`` as Windows answers it: one holder per file, others get OSError."""

    LK_NBLCK = 2
    LK_UNLCK = 0

    def __init__(self) -> None:
        self.holders: dict[int, int] = {}  # inode → fd

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        assert nbytes == 1 and mode == self.LK_NBLCK
        inode = os.fstat(fd).st_ino
        holder = self.holders.get(inode)
        if holder is not None and holder != fd:
            try:
                os.fstat(holder)  # closing the file releases the lock, as on Windows
            except OSError:
                holder = None
        if holder is not None and holder != fd:
            raise OSError(36, "Resource deadlock avoided")
        self.holders[inode] = fd


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> FakeMsvcrt:
    fake = FakeMsvcrt()
    monkeypatch.setattr(platform, "fcntl", None)
    monkeypatch.setattr(platform, "msvcrt", fake)
    monkeypatch.setattr(platform, "HAS_MODES", False)
    return fake


def _two_handles(path: Path) -> tuple[int, int]:
    path.touch()
    return os.open(path, os.O_RDWR), os.open(path, os.O_RDWR)


# --- locks ---------------------------------------------------------------------------------


def test_posix_locks_exclude_another_holder(tmp_path: Path) -> None:
    assert platform.fcntl is not None  # this suite runs on Linux
    first, second = _two_handles(tmp_path / "lock")
    try:
        assert platform.lock_file(first)
        assert platform.lock_file(second, wait=False) is False
        os.close(first)
        assert platform.lock_file(second, wait=False)
    finally:
        os.close(second)


def test_windows_locks_exclude_another_holder_and_wait(tmp_path: Path, windows: FakeMsvcrt) -> None:
    first, second = _two_handles(tmp_path / "lock")
    assert platform.lock_file(first)
    assert platform.lock_file(second, wait=False) is False
    threading.Timer(0.2, os.close, [first]).start()  # the holder goes away
    assert platform.lock_file(second)  # waited for it
    os.close(second)


def test_without_any_lock_the_caller_goes_on(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(platform, "fcntl", None)
    monkeypatch.setattr(platform, "msvcrt", None)
    first, second = _two_handles(tmp_path / "lock")
    assert platform.lock_file(first) and platform.lock_file(second, wait=False)
    os.close(first)
    os.close(second)


def test_bindings_and_the_sync_lock_work_with_windows_locks(tmp_path: Path, windows) -> None:
    from engram.sync.git.gitdir import SyncDir, locked

    bindings = Bindings(tmp_path / "data")
    assert bindings.bind(tmp_path / "repo" / ".engram", "acme")
    assert bindings.get(tmp_path / "repo" / ".engram").bound == ["acme"]
    sync_dir = SyncDir(tmp_path / "repo" / ".engram")
    with locked(sync_dir):
        from engram.errors import ConflictError

        with (
            pytest.raises(ConflictError, match="another engram sync is running"),
            locked(sync_dir, timeout=0.2),
        ):
            pass


# --- file modes ----------------------------------------------------------------------------


def test_without_permission_bits_files_are_made_and_modes_left_alone(
    tmp_path: Path, windows
) -> None:
    home = tmp_path / "home"
    assert platform.private_directory(home) is None and home.is_dir()
    db = home / "engram.db"
    assert platform.private_file(db) is None and db.exists()
    os.chmod(db, 0o644)
    assert platform.tighten_file(db) is None
    assert db.stat().st_mode & 0o777 == 0o644  # nothing changed where modes mean nothing
    from engram.files import write_atomic

    write_atomic(home / "cloud.json", b"{}", mode=0o600)  # no fchmod on such a system
    assert (home / "cloud.json").read_bytes() == b"{}"


# --- the machine's identity ----------------------------------------------------------------


def test_linux_machine_id_reads_the_first_file_that_has_one(tmp_path: Path, monkeypatch) -> None:
    empty, dbus = tmp_path / "machine-id", tmp_path / "dbus-machine-id"
    empty.write_text("\n")
    dbus.write_text("4c4c4544003a\n")
    monkeypatch.setattr(platform, "LINUX_MACHINE_ID_FILES", (tmp_path / "missing", empty, dbus))
    assert platform.machine_id("linux") == "4c4c4544003a"
    monkeypatch.setattr(platform, "LINUX_MACHINE_ID_FILES", (tmp_path / "missing",))
    assert platform.machine_id("linux") == ""


def test_macos_machine_id_is_the_kernel_uuid(monkeypatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(
        platform, "_sysctl_string", lambda name: asked.append(name) or "3F2A-UUID-0001"
    )
    assert platform.machine_id("darwin") == "3F2A-UUID-0001" and asked == ["kern.uuid"]


def test_windows_machine_id_is_the_registry_guid(monkeypatch) -> None:
    def registry(key: str, name: str) -> str:
        assert (key, name) == (r"SOFTWARE\Microsoft\Cryptography", "MachineGuid")
        return "b1a7c5e2-0000-4000-8000-1234567890ab"

    monkeypatch.setattr(platform, "_registry_value", registry)
    assert platform.machine_id("win32") == "b1a7c5e2-0000-4000-8000-1234567890ab"


def test_a_missing_source_is_an_empty_id_never_an_error(monkeypatch) -> None:
    # the real macOS and Windows readers, run here, find no sysctlbyname / winreg
    assert platform.machine_id("darwin") == ""
    assert platform.machine_id("win32") == ""

    def broken(*_: object) -> str:
        raise OSError("registry key missing")

    monkeypatch.setattr(platform, "_registry_value", broken)
    assert platform.machine_id("win32") == ""


def test_the_database_fingerprint_follows_the_machine_id(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "engram.db"
    db.touch()
    monkeypatch.setattr(journal, "machine_id", lambda: "machine-a")
    first = journal.machine_fingerprint(db)
    monkeypatch.setattr(journal, "machine_id", lambda: "machine-b")
    assert journal.machine_fingerprint(db) != first


# --- processes -----------------------------------------------------------------------------


def test_process_alive_on_posix() -> None:
    assert platform.process_alive(os.getpid()) is True
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process from now on
    assert platform.process_alive(gone.pid) is False
    assert platform.process_alive(0) is False and platform.process_alive(-1) is False


def test_process_alive_on_windows_never_signals(monkeypatch) -> None:
    monkeypatch.setattr(os, "kill", lambda *_: pytest.fail("kill(pid, 0) interrupts on Windows"))
    monkeypatch.setattr(platform, "_windows_process_alive", lambda pid: pid == 4242)
    assert platform.process_alive(4242, "win32") is True
    assert platform.process_alive(4243, "win32") is False
    monkeypatch.undo()
    monkeypatch.setattr(os, "kill", lambda *_: pytest.fail("kill(pid, 0) interrupts on Windows"))
    assert platform.process_alive(4242, "win32") is None  # no kernel32 here: unknown
