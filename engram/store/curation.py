"""Curating memories by hand: pins, importance overrides, validity, archiving, and the review
list of memories nobody has changed, confirmed or read for a while (docs/importance.md).

Pins, overrides, validity and confirmations are the user's intent: each is an ordinary journaled
write of the memory's payload, so it syncs with the memory.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from engram.errors import ConflictError, ValidationError
from engram.project import normalize_project
from engram.store import scoring
from engram.store.base import StoreBase
from engram.store.checks import check_count
from engram.store.models import Observation
from engram.text import normalize_scope
from engram.times import STORE_FORMAT, now_text

LIST_MAX = 1000


def _limit(value: Any, default: int = 20) -> int:
    """A list's length, checked like every count (:func:`engram.store.checks.check_count`)."""
    return check_count(value, "limit", default=default, maximum=LIST_MAX)


class CurationMixin(StoreBase):
    # --- intent ---------------------------------------------------------------------------------

    def pin_observation(self, observation_id: Any, pinned: bool = True) -> Observation:
        """Pin (or unpin) a live memory: a pinned memory always appears in the context and is
        never archived. An archived or deleted memory must be restored first."""
        return self.update_observation(observation_id, pinned=pinned)

    def set_importance(self, observation_id: Any, value: float | str) -> Observation:
        """Override a memory's importance (0-1), or drop the override with ``"auto"``."""
        return self.update_observation(observation_id, importance=value)

    def set_validity(
        self, observation_id: Any, *, valid_from: str | None = None, valid_to: str | None = None
    ) -> Observation:
        """Say when a memory was true (a date each; ``""``/``none`` clears)."""
        if valid_from is None and valid_to is None:
            raise ValidationError("give valid_from, valid_to or both", field="valid_to")
        return self.update_observation(observation_id, valid_from=valid_from, valid_to=valid_to)

    def archive_observation(self, observation_id: Any) -> Observation:
        """Archive a memory by hand: a soft delete with the reason ``archived`` (restorable).
        A pinned memory is never archived: unpin it first."""
        memory = self.get_observation(observation_id)
        if memory.pinned:
            raise ConflictError(
                f"Memory #{memory.id} is pinned, and pinned memories are never archived: "
                f"unpin it first (engram unpin {memory.id})"
            )
        return self.delete_observation(memory.id, reason="archived")

    def mark_reviewed(self, observation_id: Any) -> Observation:
        """Confirm a memory is still right: it leaves the review list and its recency counts
        from now (journaled, so a teammate's confirmation counts for everyone)."""
        oid = self.get_observation(observation_id).id
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT project, sync_id FROM observations WHERE id = ? AND deleted_at IS NULL",
                (oid,),
            ).fetchone()
            if row is None:
                raise self._missing(conn, oid, "review")
            now = now_text()
            hlc, origin = self.journal.tick(conn)
            conn.execute(
                "UPDATE observations SET reviewed_at = ?, hlc = ? WHERE id = ?", (now, hlc, oid)
            )
            scoring.rescore_ids(conn, [oid], now)
            self._journal_state(conn, "observation", row[0], row[1], hlc, origin)
        return self.get_observation(oid)

    # --- lists ----------------------------------------------------------------------------------

    def review_cutoff(self, days: Any = None) -> str:
        """The moment before which a memory untouched, unconfirmed and unread needs review."""
        span = self.config.review_after_days if days is None else days
        span = check_count(span, "days", default=self.config.review_after_days)
        return (datetime.now(UTC) - timedelta(days=span)).strftime(STORE_FORMAT)

    def needs_review(
        self, project: str | None = None, *, days: Any = None, limit: Any = 20, offset: int = 0
    ) -> list[Observation]:
        """Live memories nobody changed, confirmed or read for ``days`` (default
        ``Config.review_after_days``), stalest first."""
        cutoff = self.review_cutoff(days)
        self.access.fold()  # reads count: fold them first
        clauses, params = ["o.deleted_at IS NULL", f"{_LAST_ACTIVITY} < ?"], [cutoff]
        if project:
            clauses.append("o.project = ?")
            params.append(normalize_project(project)[0])
        rows = self.db.rows(
            f"""SELECT o.* FROM observations o WHERE {" AND ".join(clauses)}
                ORDER BY {_LAST_ACTIVITY}, o.id LIMIT ? OFFSET ?""",
            [*params, _limit(limit), max(0, int(offset))],
        )
        return [Observation.from_row(r) for r in rows]

    def archived_observations(
        self, project: str | None = None, *, limit: Any = 20, offset: int = 0
    ) -> list[Observation]:
        """Archived memories (consolidation's and by hand), most recently archived first."""
        clauses, params = ["o.deleted_at IS NOT NULL", "o.delete_reason = 'archived'"], []
        if project:
            clauses.append("o.project = ?")
            params.append(normalize_project(project)[0])
        rows = self.db.rows(
            f"""SELECT o.* FROM observations o WHERE {" AND ".join(clauses)}
                ORDER BY o.deleted_at DESC, o.id DESC LIMIT ? OFFSET ?""",
            [*params, _limit(limit), max(0, int(offset))],
        )
        return [Observation.from_row(r) for r in rows]

    def pinned_observations(
        self, project: str | None = None, *, scope: str | None = None, limit: Any = 20
    ) -> list[Observation]:
        """Live pinned memories, most recently changed first."""
        clauses, params = ["o.pinned = 1", "o.deleted_at IS NULL"], []
        if scope:
            clauses.append("o.scope = ?")
            params.append(normalize_scope(scope))
        if project:
            clauses.append("o.project = ?")
            params.append(normalize_project(project)[0])
        rows = self.db.rows(
            f"""SELECT o.* FROM observations o WHERE {" AND ".join(clauses)}
                ORDER BY o.updated_at DESC, o.id DESC LIMIT ?""",
            [*params, _limit(limit)],
        )
        return [Observation.from_row(r) for r in rows]


#: When a memory was last changed, confirmed or read.
_LAST_ACTIVITY = "MAX(o.updated_at, COALESCE(o.reviewed_at, ''), COALESCE(o.last_accessed_at, ''))"
