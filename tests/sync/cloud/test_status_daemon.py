"""``engram cloud status`` as a new user reads it (issue 17 item 5): it finds the
``ENGRAM_CLOUD_AUTOSYNC=1 engram serve`` serving this data directory whatever its port (and
never takes another data directory's server for it), detects the project inside a repository
like every other command, and shows a paused project's own phase, never "healthy" beside
``reason_code: paused``."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import orjson

from tests.support import free_port, run_engram
from tests.support.sync_cloud import TOKEN, CloudServer, LocalServe, autosync_env, wait_until


def test_status_finds_the_daemon_detects_the_project_and_shows_a_pause(
    server: CloudServer, start_serve: Callable[..., LocalServe], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    repo = tmp_path / "acme"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    # The status command looks for a daemon on another port than the one it runs on.
    env = {"ENGRAM_PORT": str(free_port())}

    def engram(*args: str) -> subprocess.CompletedProcess[str]:
        return run_engram(*args, data_dir=home, env=env, cwd=repo)

    assert engram("cloud", "config", "--server", server.url, "--token", TOKEN).returncode == 0
    assert engram("cloud", "enroll", "acme").returncode == 0
    before = engram("cloud", "status").stdout
    assert "Project enrollment: enrolled (acme)" in before  # detected from the repository
    assert "Local daemon: not running" in before

    daemon = start_serve(home, autosync_env(server.url))
    daemon.save("Pool size", "30 connections")

    def status() -> dict:
        return orjson.loads(engram("cloud", "status", "--json").stdout)

    found = wait_until(lambda: (s := status())["autosync_process"] and s)
    assert found["project"] == "acme"
    assert found["local_daemon"]["state"] == "running"
    assert found["local_daemon"]["url"] == daemon.url
    assert found["local_daemon"]["pid"] == daemon.process.pid
    human = engram("cloud", "status").stdout
    assert (
        f"Local daemon: engram serve at {daemon.url} (pid {daemon.process.pid}, autosync on)"
        in human
    )
    assert f"Autosync: running in engram serve at {daemon.url} (pid {daemon.process.pid})" in human
    # The daemon's loop counts its passes: its status (and so this command) shows them.
    cycles = wait_until(
        lambda: (
            (c := (status().get("daemon_sync_status") or {}).get("loop_cycles"))
            and c["push"] >= 1
            and c["pull"] >= 1
            and c
        )
    )
    assert set(cycles) == {"push", "pull"}
    assert re.search(
        rf"\(pid {daemon.process.pid}\), \d+ push and \d+ pull cycles so far; project phase",
        engram("cloud", "status").stdout,
    )

    # Paused on the server: the daemon's next push is refused, and the project says so.
    assert server.admin("pause", "acme", "--reason", "migration").returncode == 0
    daemon.save("While paused", "refused by the server")
    paused = wait_until(lambda: (s := status())["reason_code"] == "paused" and s, timeout=30)
    assert paused["sync"]["phase"] == "paused"
    human = engram("cloud", "status").stdout
    assert "project phase: paused" in human and "reason_code: paused" in human
    assert "phase healthy" not in human and "(phase healthy)" not in human

    daemon.stop()
    assert "Local daemon: not running" in engram("cloud", "status").stdout  # record withdrawn


def test_another_data_directorys_server_is_not_this_daemon(
    server: CloudServer, start_serve: Callable[..., LocalServe], tmp_path: Path
) -> None:
    other = start_serve(tmp_path / "other-home")
    home = tmp_path / "home"
    env = {"ENGRAM_PORT": str(other.port)}  # the configured port answers, for another store
    assert (
        run_engram("cloud", "config", "--server", server.url, data_dir=home, env=env).returncode
        == 0
    )
    human = run_engram("cloud", "status", "--project", "acme", data_dir=home, env=env).stdout
    assert (
        f"Local daemon: not running (an engram serve at {other.url} serves another data "
        "directory)" in human
    )
