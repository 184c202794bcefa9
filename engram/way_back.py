"""The way back to the Go tool (issue 16): of an export, what a Go tool database lacks.

After ``engram`` upgraded a Go tool database in place, the Go tool can no longer write to it
(our schema wants a ``sync_id`` it never sets). The upgrade kept a backup
(``engram.db.go-backup-<time>``) that the Go tool still opens, with its record of which git
chunks it imported; what it lacks is what was written since. ``engram export --format go
--missing-from BACKUP`` writes exactly that, for ``engram-go import``:

* a memory or prompt is left out when the backup has it — under the key the upgrade gave its
  row, or the key ``engram projects merge`` gave it since (the Go tool names projects after the
  clone's directory) — and when a Go-format chunk this machine has read holds it: the Go tool
  imports that chunk itself (``engram-go sync --import``), and importing it twice would give
  the Go tool two copies (it keeps no ``sync_id``);
* a session is left out when the backup has its id (the Go tool keys sessions by id alone).

Edits and deletes made since the upgrade cannot be expressed in the Go tool's export (it only
inserts): the backup keeps its version of those memories.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.errors import ValidationError
from engram.record import moved_key
from engram.store.legacy import go_database_keys
from engram.sync.git.ledger import go_keys_anywhere

if TYPE_CHECKING:
    from engram.store import Store

_SECTIONS = {"observations": "observation", "prompts": "prompt"}


def missing_from(store: Store, document: dict[str, Any], go_db: Path) -> dict[str, Any]:
    """``document`` (an export of ``store``) without what the Go tool database at ``go_db``
    has or will import from git chunks; raises :class:`ValidationError` when ``go_db`` is
    not such a database."""
    import sqlite3

    if not go_db.is_file():
        raise ValidationError(f"{go_db}: no such file (the Go tool's database, e.g. a backup)")
    try:
        there = go_database_keys(go_db)
    except sqlite3.DatabaseError as exc:
        raise ValidationError(f"{go_db} is not a database of the Go tool ({exc})") from None
    held = go_keys_anywhere(store.db)
    sessions = {session_id for _, session_id in there["session"]}
    kept: dict[str, Any] = {
        **document,
        "sessions": [s for s in document["sessions"] if s["id"] not in sessions],
    }
    for section, entity in _SECTIONS.items():
        known = _Known(entity, {key for _, key in there[entity]}, held.get(entity, set()))
        kept[section] = [row for row in document[section] if not known(row)]
    return kept


class _Known:
    """Whether a memory or prompt is in the Go database (under the upgrade's key or the key a
    project merge gave it since) or in a Go-format chunk."""

    def __init__(self, entity: str, keys: set[str], held: set[str]) -> None:
        self.entity, self.keys, self.held = entity, keys, held
        self.moved: dict[str, set[str]] = {}  # project -> the keys moved there

    def __call__(self, row: dict[str, Any]) -> bool:
        key, project = row["sync_id"], row.get("project") or ""
        if key in self.keys or key in self.held:
            return True
        if project not in self.moved:
            self.moved[project] = {moved_key(self.entity, k, project) for k in self.keys}
        return key in self.moved[project]
