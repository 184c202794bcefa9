"""Atomic file writes: modes, replacement, and a crash half way leaving the old file."""

import os
from pathlib import Path

import pytest

from engram.files import write_atomic


def test_new_files_get_0644_and_secrets_0600(tmp_path: Path) -> None:
    write_atomic(tmp_path / "a" / "plain.json", b"{}")
    write_atomic(tmp_path / "secret.json", b"{}", mode=0o600)
    assert os.stat(tmp_path / "a" / "plain.json").st_mode & 0o777 == 0o644
    assert os.stat(tmp_path / "secret.json").st_mode & 0o777 == 0o600


def test_replacing_keeps_the_existing_mode(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    target.write_text("old")
    target.chmod(0o640)
    write_atomic(target, b"new")
    assert target.read_text() == "new" and os.stat(target).st_mode & 0o777 == 0o640


def test_a_failure_half_way_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("old")

    def crash() -> None:
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_atomic(target, b"new content", midway=crash)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["manifest.json"]
