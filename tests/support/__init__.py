"""Helpers shared by every test package: running the real ``engram`` command, free ports,
waiting for a condition, stopping a server process."""

from __future__ import annotations

import os
import pty
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def engram_env(data_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a real ``engram`` process using ``data_dir`` and no user settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_DATA_DIR"] = str(data_dir)
    # The suite's own pin (tests/conftest.py): searches stay lexical unless a test asks.
    if "ENGRAM_SEARCH_MODE" in os.environ:
        env["ENGRAM_SEARCH_MODE"] = os.environ["ENGRAM_SEARCH_MODE"]
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def run_engram(
    *args: str,
    data_dir: Path,
    cwd: Path | None = None,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m engram ARGS`` as a separate process and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        cwd=cwd,
        input=input,
        env=engram_env(data_dir, env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], object], timeout: float = 20.0, every: float = 0.05):
    """Poll ``predicate`` until it returns something truthy (which is returned)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met after {timeout}s")
        time.sleep(every)


def wait_for_port(port: int, host: str = "127.0.0.1", timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")


def stop_process(process: subprocess.Popen, grace: float = 20.0) -> None:
    """Ask a server to stop as a service manager would (SIGTERM), and kill it if it has not
    stopped within ``grace`` seconds, so a hung shutdown never outlives its test."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_on_terminal(
    args: list[str],
    data_dir: Path,
    cwd: Path | None = None,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
) -> tuple[int, str]:
    """Run ``engram ARGS`` with stderr on a pseudo-terminal (progress bars show only on one);
    returns the exit code and everything the terminal received."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "engram", *args],
        cwd=cwd,
        env={**engram_env(data_dir, env), "COLUMNS": "100", "TERM": "xterm"},
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    received = b""
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        received += data
    os.close(leader)
    return process.wait(timeout=timeout), received.decode(errors="replace")
