"""The vault's memory of its last sync: ``.engram-vault.json`` at the vault's root.

For each memory it keeps the note's path, the SHA-256 of the note's bytes as last written or
read, and a hash of the memory's content as last synced. Comparing both with what is there now
tells who changed since: the note (an edit to apply), the memory (a note to rewrite), or both
(a conflict, reported and never overwritten). It also binds the vault to one project, so a note
can never move a memory into another project.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engram.errors import ValidationError
from engram.files import write_atomic

STATE_FILE = ".engram-vault.json"
STATE_VERSION = 1


@dataclass(slots=True)
class NoteEntry:
    """One memory's note as of the last sync."""

    path: str  # relative, POSIX separators
    note: str  # sha256 of the note's bytes
    memory: str  # memory_hash() of the memory


@dataclass(slots=True)
class VaultState:
    project: str
    include_personal: bool = False
    notes: dict[str, NoteEntry] = field(default_factory=dict)  # sync_id → entry

    def to_json(self) -> bytes:
        data = {
            "engram_vault": STATE_VERSION,
            "project": self.project,
            "include_personal": self.include_personal,
            "notes": {
                key: {"path": e.path, "note": e.note, "memory": e.memory}
                for key, e in sorted(self.notes.items())
            },
        }
        return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"


def state_path(directory: Path) -> Path:
    return directory / STATE_FILE


def load_state(directory: Path) -> VaultState | None:
    """The vault's state, ``None`` when the directory is not a vault yet. A damaged file is an
    error naming it (never silently reset: that would turn every note into a new memory)."""
    path = state_path(directory)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data: Any = orjson.loads(raw)
        if not isinstance(data, dict) or data.get("engram_vault") != STATE_VERSION:
            raise ValueError(f"not a version {STATE_VERSION} vault state")
        notes = {
            str(key): NoteEntry(str(v["path"]), str(v["note"]), str(v["memory"]))
            for key, v in data.get("notes", {}).items()
        }
        return VaultState(str(data["project"]), bool(data.get("include_personal")), notes)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValidationError(
            f"{path} is damaged ({exc}); restore it from a backup, or move it away and run "
            "'engram vault export' into an empty directory"
        ) from None


def save_state(directory: Path, state: VaultState) -> None:
    write_atomic(state_path(directory), state.to_json())
