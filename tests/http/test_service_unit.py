"""The systemd user unit shipped in docs/ is valid and starts ``engram serve``."""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from engram.cli.main import build_parser
from tests.support import REPO

UNIT = REPO / "docs" / "engram.service"


def read_unit() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    return parser


def test_unit_runs_engram_serve_and_stops_gracefully() -> None:
    unit = read_unit()
    assert unit.sections() == ["Unit", "Service", "Install"]
    service = unit["Service"]
    command = shlex.split(service["ExecStart"])
    assert command[0].endswith("/engram")
    args = build_parser().parse_args(command[1:])
    assert args.command == "serve"
    assert service["KillSignal"] == "SIGTERM"
    # systemd must wait longer than the server's own graceful-shutdown window.
    from engram.cli.cmd_serve import GRACEFUL_SHUTDOWN_SECONDS

    assert int(service["TimeoutStopSec"]) > GRACEFUL_SHUTDOWN_SECONDS
    assert service["Restart"] == "on-failure"
    assert unit["Install"]["WantedBy"] == "default.target"


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """systemd's own checker (present on these machines) finds nothing to complain about,
    with ExecStart pointed at this checkout's `engram` command."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is part of the image this project is tested on"
    engram = Path(sys.executable).with_name("engram")
    text = UNIT.read_text(encoding="utf-8").replace("%h/.local/bin/engram", str(engram))
    unit = tmp_path / "engram.service"
    unit.write_text(text, encoding="utf-8")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    result = subprocess.run(
        [analyze, "verify", "--user", str(unit)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        timeout=60,
    )
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
