"""The data directory is 0700 and the database files 0600: other accounts cannot read memories.

Tests run as root, which ignores permission bits, so every check reads the mode bits themselves.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engram import platform
from engram.settings import Config
from engram.store import Store
from tests.store.test_legacy_and_processes import make_go_database
from tests.support import engram_env, run_engram

pytestmark = pytest.mark.skipif(not platform.HAS_MODES, reason="POSIX permission bits")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def engram_with_umask(umask: int, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """``engram ARGS`` under ``umask`` (0 would make everything world-writable by default)."""
    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        env=engram_env(data_dir),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.umask(umask),
    )


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_a_new_data_directory_and_database_are_private(tmp_path: Path, umask: int) -> None:
    data_dir = tmp_path / "home" / ".engram"  # neither exists yet
    done = engram_with_umask(umask, data_dir, "save", "Secret", "the staging password is…")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # nothing to tighten: no notice
    assert mode(data_dir) == 0o700
    assert mode(data_dir / "engram.db") == 0o600


def test_the_wal_and_shm_files_are_private_too(data_dir: Path) -> None:
    os.chmod(data_dir, 0o700)
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.add_observation(title="t", content="c")
        side = [data_dir / "engram.db-wal", data_dir / "engram.db-shm"]
        assert all(p.exists() for p in side)
        assert [mode(p) for p in side] == [0o600, 0o600]


def test_an_open_directory_is_tightened_once_with_one_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    Store.open(config=Config(data_dir=data_dir)).close()
    os.chmod(data_dir, 0o755)  # as an older Engram (or a user's mkdir) left it
    os.chmod(data_dir / "engram.db", 0o644)
    (data_dir / "engram.db-wal").write_bytes(b"")
    os.chmod(data_dir / "engram.db-wal", 0o664)

    first = run_engram("stats", data_dir=data_dir)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"engram: notice: made {data_dir} private")
    assert "0755 → 0700" in lines[0] and "engram.db (0644 → 0600)" in lines[0]
    assert "engram.db-wal (0664 → 0600)" in lines[0]
    assert mode(data_dir) == 0o700 and mode(data_dir / "engram.db") == 0o600
    assert "Engram Memory Stats" in first.stdout  # the command itself ran as usual

    again = run_engram("stats", data_dir=data_dir)
    assert again.returncode == 0 and again.stderr == ""


def test_a_readable_database_in_a_private_directory_is_tightened(data_dir: Path) -> None:
    os.chmod(data_dir, 0o700)
    Store.open(config=Config(data_dir=data_dir)).close()
    os.chmod(data_dir / "engram.db", 0o640)
    done = run_engram("--json", "stats", data_dir=data_dir)
    assert done.returncode == 0
    assert done.stderr == (
        f"engram: notice: made engram.db (0640 → 0600) in {data_dir} private: other users "
        "could read them\n"
    )
    assert done.stdout.startswith("{")  # --json output stays clean JSON
    assert mode(data_dir / "engram.db") == 0o600


def test_files_owned_by_someone_else_are_left_alone(tmp_path: Path) -> None:
    """A symlinked database pointing at another user's file is never chmod-ed through."""
    other = tmp_path / "elsewhere.db"
    other.write_bytes(b"")
    os.chmod(other, 0o644)
    os.chown(other, 12345, 12345)  # root may give it away; then it is not ours to change
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    (data_dir / "engram.db").symlink_to(other)
    assert platform.private_file(data_dir / "engram.db") is None
    assert mode(other) == 0o644


def test_a_go_database_backup_is_private(tmp_path: Path) -> None:
    db = tmp_path / "data" / "engram.db"
    make_go_database(db)
    os.chmod(db, 0o644)
    with Store.open(db, config=Config(data_dir=db.parent)):
        (backup,) = db.parent.glob("engram.db.go-backup-*")
        assert mode(backup) == 0o600
        assert mode(db) == 0o600 and mode(db.parent) == 0o700


def test_cloud_config_in_a_new_data_directory_is_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh"
    done = run_engram(
        "cloud", "config", "--server", "http://127.0.0.1:9", "--token", "-",
        data_dir=data_dir, input="a-token-of-at-least-some-length\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert mode(data_dir) == 0o700 and mode(data_dir / "cloud.json") == 0o600


def test_an_export_file_is_private_unless_it_already_exists(data_dir: Path, tmp_path: Path) -> None:
    saved = run_engram("save", "t", "c", "--project", "acme", data_dir=data_dir)
    assert saved.returncode == 0, saved.stderr
    fresh = tmp_path / "backup.json"
    assert run_engram("export", str(fresh), data_dir=data_dir).returncode == 0
    assert mode(fresh) == 0o600 and b'"title": "t"' in fresh.read_bytes()
    shared = tmp_path / "shared.json"
    shared.write_bytes(b"old")
    os.chmod(shared, 0o644)  # the user made it readable on purpose: kept
    assert run_engram("export", str(shared), data_dir=data_dir).returncode == 0
    assert mode(shared) == 0o644 and shared.read_bytes().startswith(b"{")
