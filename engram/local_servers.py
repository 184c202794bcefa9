"""Which local servers serve this data directory, whatever port they listen on.

``engram serve`` leaves a small record in the data directory while it runs
(``run/serve-<pid>.json``: its pid, URL, start time and whether it runs the cloud autosync
loop) and removes it when it stops. Other commands (``engram cloud status``) read the records
of live processes, then confirm over HTTP that the server answers *for this data directory*
(its ``/health`` ``instance_id`` is this store's origin), so a stale record or another data
directory's server on the same port is never taken for this one.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from engram.files import write_atomic
from engram.platform import PRIVATE_FILE_MODE, process_alive

RUN_DIR = "run"


@dataclass(frozen=True, slots=True)
class LocalServer:
    """One running ``engram serve`` of this data directory, as it described itself."""

    pid: int
    url: str
    started_at: str
    autosync: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _path(data_dir: Path, pid: int) -> Path:
    return data_dir / RUN_DIR / f"serve-{pid}.json"


def announce(data_dir: Path, server: LocalServer) -> Path:
    """Record ``server`` as running (private file: it names a port and a pid only, but the
    data directory's files are all private)."""
    path = _path(data_dir, server.pid)
    write_atomic(path, orjson.dumps(server.to_dict()), mode=PRIVATE_FILE_MODE)
    return path


def withdraw(data_dir: Path, pid: int | None = None) -> None:
    """Remove the record of ``pid`` (default: this process) when it stops serving."""
    with contextlib.suppress(FileNotFoundError):
        _path(data_dir, os.getpid() if pid is None else pid).unlink()


def running(data_dir: Path) -> list[LocalServer]:
    """The recorded servers whose process still runs (or may: where liveness cannot be
    asked, the caller's HTTP check decides), newest first. Unreadable records are skipped."""
    found: list[LocalServer] = []
    folder = data_dir / RUN_DIR
    try:
        names = sorted(folder.glob("serve-*.json"))
    except OSError:
        return []
    for path in names:
        try:
            data = orjson.loads(path.read_bytes())
            server = LocalServer(
                pid=int(data["pid"]),
                url=str(data["url"]),
                started_at=str(data.get("started_at") or ""),
                autosync=bool(data.get("autosync")),
            )
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            continue
        if process_alive(server.pid) is False:
            continue  # killed without cleaning up: its record is stale
        found.append(server)
    return sorted(found, key=lambda s: s.started_at, reverse=True)
