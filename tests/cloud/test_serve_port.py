"""``engram cloud serve --port 0`` binds a free port and says which (issue 17 item 3), like
``engram serve --port 0`` — with one process and with several workers sharing the socket — and
a port already taken is one clear line."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support import REPO, engram_env, run_engram, stop_process, wait_until
from tests.support.cloud import JWT_SECRET, LEGACY_TOKEN

LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+) ")


def settings(cloud_db_url: str) -> dict[str, str]:
    return {
        "ENGRAM_DATABASE_URL": cloud_db_url,
        "ENGRAM_JWT_SECRET": JWT_SECRET,
        "ENGRAM_CLOUD_TOKEN": LEGACY_TOKEN,
        "ENGRAM_CLOUD_ALLOWED_PROJECTS": "acme",
    }


@pytest.mark.parametrize("workers", ["1", "2"])
def test_port_zero_binds_a_free_port_and_says_which(
    data_dir: Path, cloud_db_url: str, workers: str
) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engram",
            "cloud",
            "serve",
            "--port",
            "0",
            "--workers",
            workers,
            "--log-level",
            "warning",
        ],
        env=engram_env(data_dir, settings(cloud_db_url)),
        cwd=REPO,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        said = []
        assert process.stderr is not None
        for line in process.stderr:  # the announcement comes before serving starts
            said.append(line)
            if match := LISTENING.search(line):
                break
        else:
            raise AssertionError("".join(said))
        port = int(match.group(1))
        assert port not in (0, 8080)

        def healthy() -> httpx.Response | None:  # the workers may take a moment to accept
            if process.poll() is not None:
                raise AssertionError(f"the server exited ({process.returncode}): {said}")
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
            except httpx.TransportError:
                return None

        # Each worker imports the whole app before it accepts: on a loaded 2-core machine
        # that took over 20 s once (not a speed check, so the wait is generous).
        health = wait_until(healthy, timeout=90, every=0.1)
        assert health.json() == {"service": "engram-cloud", "status": "ok"}
    finally:
        stop_process(process)


def test_a_taken_port_is_one_clear_line(data_dir: Path, cloud_db_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_engram(
            "cloud", "serve", "--port", str(port), data_dir=data_dir, env=settings(cloud_db_url)
        )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"engram: error: port {port} on 127.0.0.1 is already in use: is another 'engram cloud "
        "serve' running? Stop it, or pick another port with --port N (or ENGRAM_CLOUD_PORT; 0 "
        "picks a free one)"
    )
