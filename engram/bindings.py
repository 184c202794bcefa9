"""This machine's decisions about git sync directories: which projects each ``.engram/`` may
write here (``engram sync --bind``), which committed ``.engram/config.json`` project names the
user accepted (``engram sync --accept-config``), and whether ``engram sync`` also writes for
teammates on the Go tool there (``engram sync --go-compat on``).

A committed file can never decide these: anyone who can push to a repository can commit one,
so a suggestion only counts once the user of *this* machine has accepted it (docs/architecture.md, "Trust boundaries"). The decisions live in ``bindings.json`` in the data directory, beside
the database, rather than in the database itself: project detection (every face, on every CLI
call) consults them, stays a pure module that never opens SQLite, and reads a few hundred
bytes only when a repository has a ``config.json`` at all. Keys are the real path of each
``.engram`` directory, so a symlink or a relative ``--dir`` names the same directory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from engram.errors import ValidationError
from engram.files import write_atomic
from engram.platform import lock_file

FILE_NAME = "bindings.json"
VERSION = 1


def directory_key(path: str | os.PathLike[str]) -> str:
    """How a sync directory is named in the file: its real, absolute path."""
    return os.path.realpath(os.fspath(path))


@dataclass(slots=True)
class DirectoryTrust:
    """What the user decided for one ``.engram`` directory."""

    bound: list[str] = field(default_factory=list)
    #: The ``project_name`` of its ``config.json`` that the user accepted, if any. A later
    #: commit that changes the name is a new suggestion, not covered by this acceptance.
    accepted_config: str | None = None
    #: Every ``engram sync`` there also writes Go-format chunks (``--go-compat on``).
    go_compat: bool = False

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "bound": sorted(set(self.bound)),
            "accepted_config": self.accepted_config,
        }
        if self.go_compat:
            data["go_compat"] = True
        return data

    def empty(self) -> bool:
        return not (self.bound or self.accepted_config or self.go_compat)


def _parse(raw: bytes) -> dict[str, DirectoryTrust]:
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    entries = document.get("directories") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        return {}
    found: dict[str, DirectoryTrust] = {}
    for key, value in entries.items():
        if not isinstance(key, str) or not isinstance(value, dict):
            continue
        bound = value.get("bound")
        accepted = value.get("accepted_config")
        found[key] = DirectoryTrust(
            bound=[p for p in bound if isinstance(p, str) and p] if isinstance(bound, list) else [],
            accepted_config=accepted if isinstance(accepted, str) and accepted else None,
            go_compat=value.get("go_compat") is True,
        )
    return found


class Bindings:
    """The ``bindings.json`` of one data directory."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.path = Path(data_dir) / FILE_NAME

    @classmethod
    def default(cls) -> Bindings:
        """The bindings of ``$ENGRAM_DATA_DIR`` (or ``~/.engram``)."""
        from engram.settings import default_data_dir

        return cls(default_data_dir())

    def _read(self) -> dict[str, DirectoryTrust]:
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except OSError as exc:
            raise ValidationError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        return _parse(raw)

    def get(self, sync_dir: str | os.PathLike[str]) -> DirectoryTrust:
        return self._read().get(directory_key(sync_dir), DirectoryTrust())

    def accepted_config(self, sync_dir: str | os.PathLike[str]) -> str | None:
        return self.get(sync_dir).accepted_config

    @contextlib.contextmanager
    def _editing(self) -> Iterator[dict[str, DirectoryTrust]]:
        """Read, let the caller change, write back atomically; one writer at a time."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(FILE_NAME + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            lock_file(fd)  # one writer at a time (unguarded where the system has no locks)
            entries = self._read()
            yield entries
            document = {
                "version": VERSION,
                "directories": {
                    key: value.to_dict()
                    for key, value in sorted(entries.items())
                    if not value.empty()
                },
            }
            data = orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
            write_atomic(self.path, data, mode=0o600)  # private, like the database beside it
        finally:
            os.close(fd)

    def bind(self, sync_dir: str | os.PathLike[str], project: str) -> bool:
        """Let ``sync_dir`` write ``project`` here; False when it already could."""
        with self._editing() as entries:
            entry = entries.setdefault(directory_key(sync_dir), DirectoryTrust())
            if project in entry.bound:
                return False
            entry.bound.append(project)
            return True

    def unbind(self, sync_dir: str | os.PathLike[str], project: str) -> bool:
        """Withdraw a binding (and the acceptance of a config suggestion naming ``project``);
        False when there was nothing to withdraw."""
        with self._editing() as entries:
            entry = entries.setdefault(directory_key(sync_dir), DirectoryTrust())
            changed = project in entry.bound
            entry.bound = [p for p in entry.bound if p != project]
            if entry.accepted_config == project:
                entry.accepted_config = None
                changed = True
            return changed

    def accept_config(self, sync_dir: str | os.PathLike[str], project: str) -> None:
        with self._editing() as entries:
            entries.setdefault(directory_key(sync_dir), DirectoryTrust()).accepted_config = project

    def set_go_compat(self, sync_dir: str | os.PathLike[str], on: bool) -> bool:
        """Remember whether ``engram sync`` writes Go-format chunks in ``sync_dir`` on this
        machine; False when that was already the setting."""
        with self._editing() as entries:
            entry = entries.setdefault(directory_key(sync_dir), DirectoryTrust())
            if entry.go_compat == on:
                return False
            entry.go_compat = on
            return True
