"""Run the ``engram`` CLI paused at a crash point, for the crash tests (which SIGKILL it there).

``python -m tests.support.paused_engram POINT ARGS…`` patches one seam of the real program, then
runs ``engram ARGS…``. Reaching the point prints ``engram: test pause at POINT`` on stderr and
sleeps, so the test knows when to kill. The product carries no test hook; the points are:

* ``mid-chunk``: a git export half-way through writing a chunk file (``write_atomic``'s
  ``midway``);
* ``after-chunk``: a git export right after a chunk file is in place, before it is marked
  delivered;
* ``mid-group``: a git import right after the first chunk of a group of chunks is applied,
  inside the group's transaction (before it commits);
* ``after-response``: an explicit cloud push right after the server answered, before the
  accepted rows are acknowledged locally.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

POINTS = ("mid-chunk", "after-chunk", "mid-group", "after-response")


def command(point: str, *args: str) -> list[str]:
    """The argv that runs ``engram ARGS`` paused at ``point``."""
    if point not in POINTS:
        raise ValueError(f"unknown pause point {point!r}; known: {', '.join(POINTS)}")
    return [sys.executable, "-m", "tests.support.paused_engram", point, *args]


def kill_at(point: str, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
    """Run ``engram ARGS`` on ``data_dir`` paused at ``point``, and SIGKILL it there."""
    import os
    import signal
    import subprocess

    from tests.support import REPO, engram_env

    process = subprocess.Popen(
        command(point, *args),
        cwd=REPO,
        env=engram_env(data_dir, env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert f"test pause at {point}" in line, line
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def pause(point: str) -> None:
    sys.stderr.write(f"engram: test pause at {point}\n")
    sys.stderr.flush()
    time.sleep(60)


def _patch(point: str) -> None:
    if point in ("mid-chunk", "after-chunk"):
        from engram.sync.git import sync as git_sync

        real_write = git_sync.write_atomic

        def write_atomic(path: Any, data: bytes, **kw: Any) -> None:
            # Our chunks only (in log/), never a Go-format one (chunks/) --go-compat writes.
            ours = path.name.endswith(".jsonl.gz") and path.parent.name == "log"
            if point == "mid-chunk" and ours:
                kw["midway"] = lambda: pause(point)
            real_write(path, data, **kw)
            if point == "after-chunk" and ours:
                pause(point)

        git_sync.write_atomic = write_atomic  # type: ignore[assignment]
    elif point == "mid-group":
        from engram.sync.git.importer import ChunkImporter

        real_applied: Callable[..., Any] = ChunkImporter._applied

        def applied(self: ChunkImporter, *a: Any, **kw: Any) -> Any:
            answer = real_applied(self, *a, **kw)
            pause(point)
            return answer

        ChunkImporter._applied = applied  # type: ignore[method-assign]
    else:
        from engram.sync.cloud.client import CloudClient

        real_push: Callable[..., Any] = CloudClient.push

        def push(self: CloudClient, *a: Any, **kw: Any) -> Any:
            answer = real_push(self, *a, **kw)
            pause(point)
            return answer

        CloudClient.push = push  # type: ignore[method-assign]


def main(argv: Sequence[str]) -> int:
    point, *args = argv
    _patch(point)
    from engram.cli.main import main as engram_main

    return engram_main(args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
