"""Issue 12, hole 4, through the ``engram`` command: text the store cannot keep ends the
command with exit 1 and one line naming the field; nothing is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from tests.support import engram_env, run_engram


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("engram: error: "), result.stderr
    return lines[0]


def test_nul_read_from_stdin_is_refused(data_dir: Path) -> None:
    result = run_engram("save", "Title", "-", "--project", "acme", data_dir=data_dir,
                        input="text with a NUL \x00 inside")  # fmt: skip
    line = one_error_line(result)
    assert "content" in line and "NUL" in line
    stats = orjson.loads(run_engram("stats", "--json", data_dir=data_dir).stdout)
    assert stats["total_observations"] == 0


def test_undecodable_bytes_on_the_command_line_are_refused(data_dir: Path) -> None:
    # Python turns bytes that are not UTF-8 into lone surrogates: not storable text.
    result = subprocess.run(
        [sys.executable, "-m", "engram", "save", b"bad \xff title", "content", "--project", "acme"],
        env=engram_env(data_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = one_error_line(result)
    assert "title" in line and "surrogate" in line
