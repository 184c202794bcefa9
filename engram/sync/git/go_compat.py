"""``engram sync --go-compat``: what to write for teammates still on the Go tool.

The Go tool reads only its own single-object chunks, listed in its manifest, and imports every
row as a new one (it has no ``sync_id``): so a memory must reach it exactly once, and only its
creation can — later edits and deletes cannot be expressed in its format. The selection is
therefore *what no Go-format chunk in the directory holds yet*: live memories, prompts and
sessions of the repository's project (Go-format chunks are applied to the repository's project
on our side, whatever project they name, so nothing of another project may go into one). Which
keys the directory's Go-format chunks hold is recorded as they are read
(:meth:`engram.sync.git.ledger.ChunkLedger.note_go_keys`).

**The manifest entry's time.** The Go tool exports only rows newer than the newest
``created_at`` of its manifest (its watermark; docs/git-sync.md, "Teams moving from the Go tool"), whoever wrote that entry. An
entry dated "now" would hide from a Go teammate's next export every memory they saved before it
and have not synced yet. So our entries carry the newest time of the rows they hold
(:func:`entry_time`): late enough that the Go tool never exports those rows again (it would
import a second copy everywhere), no later.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram.sync.git.go_writer import (
    GoChunk,
    go_observation,
    go_prompt,
    go_session,
    pack_go_chunks,
    stub_session,
)
from engram.times import parse_store_text, rfc3339

if TYPE_CHECKING:
    from engram.store import Store

#: Said wherever Go-format chunks are written (CLI output, docs).
CREATIONS_ONLY = (
    "the Go tool's format carries creations only: later edits and deletes of these memories "
    "do not reach Go users"
)


def entry_time(newest: str, now: datetime | None = None) -> str:
    """The ``created_at`` of a manifest entry for a chunk whose newest row time is ``newest``
    (store text): that time in RFC 3339, never later than ``now`` (a row dated in the future
    must not push every Go teammate's watermark there)."""
    now = now or datetime.now(UTC)
    try:
        moment = min(parse_store_text(newest), now)
    except ValueError:
        moment = now
    return rfc3339(moment)


@dataclass(slots=True)
class GoSelection:
    """Rows of one project that no Go-format chunk holds yet, in the Go tool's shapes."""

    project: str
    #: every session the rows below name, plus the new ones, by id
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    new_sessions: list[str] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.new_sessions or self.observations or self.prompts)

    def chunks(self, limit: int) -> Iterator[GoChunk]:
        return pack_go_chunks(
            self.sessions, self.new_sessions, self.observations, self.prompts, limit=limit
        )


def select_for_go(
    store: Store,
    project: str,
    held: Mapping[str, set[str]],
    *,
    include_personal: bool = False,
) -> GoSelection:
    """What of ``project`` the directory's Go-format chunks do not hold (``held``: entity →
    keys). Personal-scope memories only with ``include_personal``; deleted ones never."""
    selection = GoSelection(project)
    with store.db.read() as conn:
        own = {
            row["id"]: go_session(row)
            for row in conn.execute(
                "SELECT * FROM sessions WHERE project = ? ORDER BY started_at, id", (project,)
            )
        }
        scopes = ("project", "personal") if include_personal else ("project",)
        marks = ", ".join("?" for _ in scopes)
        selection.observations = [
            go_observation(row)
            for row in conn.execute(
                f"""SELECT * FROM observations WHERE project = ? AND deleted_at IS NULL
                    AND scope IN ({marks}) ORDER BY created_at, sync_id""",
                (project, *scopes),
            )
            if row["sync_id"] not in held.get("observation", ())
        ]
        selection.prompts = [
            go_prompt(row)
            for row in conn.execute(
                "SELECT * FROM user_prompts WHERE project = ? ORDER BY created_at, sync_id",
                (project,),
            )
            if row["sync_id"] not in held.get("prompt", ())
        ]
        selection.new_sessions = [sid for sid in own if sid not in held.get("session", ())]
        selection.sessions = dict(own)
        for item in (*selection.observations, *selection.prompts):
            session_id = item["session_id"]
            if session_id in selection.sessions:
                continue
            row = conn.execute(
                "SELECT * FROM sessions WHERE id = ? ORDER BY project = ? DESC LIMIT 1",
                (session_id, project),
            ).fetchone()
            session = go_session(row) if row is not None else stub_session(session_id, project)
            selection.sessions[session_id] = {**session, "project": project}
    return selection
