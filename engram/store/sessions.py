"""Sessions: start (create or complete), end, look up, list, delete."""

from __future__ import annotations

import sqlite3

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.project import project_name
from engram.store import fts
from engram.store.base import StoreBase
from engram.store.models import Observation, Prompt, Session
from engram.times import now_text, parse_user_date

MAX_SESSION_ID = 128


def check_session_id(session_id: str | None) -> str:
    value = (session_id or "").strip()
    if not value:
        raise ValidationError("session id is required", field="id")
    if len(value) > MAX_SESSION_ID:
        raise ValidationError(f"session id is longer than {MAX_SESSION_ID} characters", field="id")
    return value


class SessionsMixin(StoreBase):
    def _ensure_session(
        self, conn: sqlite3.Connection, session_id: str, project: str, directory: str = ""
    ) -> bool:
        """Create the session, or fill in its blank project/directory (never overwrite).

        Journals the session when it changed; returns whether it did.
        """
        row = conn.execute(
            "SELECT project, directory FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            hlc, origin = self.journal.tick(conn)
            conn.execute(
                "INSERT INTO sessions(id, project, directory, started_at, hlc)"
                " VALUES (?, ?, ?, ?, ?)",
                (session_id, project, directory, now_text(), hlc),
            )
            conn.execute(
                "DELETE FROM sync_tombstones WHERE entity = 'session' AND key = ?", (session_id,)
            )
        else:
            new_project = row["project"] or project
            new_directory = row["directory"] or directory
            if (new_project, new_directory) == (row["project"], row["directory"]):
                return False
            hlc, origin = self.journal.tick(conn)
            conn.execute(
                "UPDATE sessions SET project = ?, directory = ?, hlc = ? WHERE id = ?",
                (new_project, new_directory, hlc, session_id),
            )
        self._journal_state(conn, "session", session_id, hlc, origin)
        return True

    def create_session(self, session_id: str, project: str = "", directory: str = "") -> Session:
        """Start a session (idempotent: an existing one only gets its blanks filled)."""
        session_id = check_session_id(session_id)
        with self.db.write() as conn:
            self._ensure_session(conn, session_id, project_name(project), directory or "")
        return self.get_session(session_id)

    def end_session(self, session_id: str, summary: str | None = None) -> Session:
        session_id = check_session_id(session_id)
        with self.db.write() as conn:
            if (
                conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
                is None
            ):
                raise NotFoundError(f"session {session_id!r} not found")
            hlc, origin = self.journal.tick(conn)
            conn.execute(
                "UPDATE sessions SET ended_at = ?, summary = ?, hlc = ? WHERE id = ?",
                (now_text(), (summary or "").strip() or None, hlc, session_id),
            )
            self._journal_state(conn, "session", session_id, hlc, origin)
        return self.get_session(session_id)

    def get_session(self, session_id: str) -> Session:
        row = self.db.one("SELECT * FROM sessions WHERE id = ?", (session_id,))
        if row is None:
            raise NotFoundError(f"session {session_id!r} not found")
        return Session.from_row(row)

    def recent_sessions(
        self,
        project: str | None = None,
        limit: int = 5,
        *,
        since: str | None = None,
        until: str | None = None,
        offset: int = 0,
    ) -> list[Session]:
        """Sessions with their live observation counts, most recently active first."""
        clauses, params = ["1"], []
        if project:
            clauses.append("s.project = ?")
            params.append(project_name(project))
        if (start := parse_user_date(since, field="since")) is not None:
            clauses.append("s.started_at >= ?")
            params.append(start)
        if (end := parse_user_date(until, field="until")) is not None:
            clauses.append("s.started_at <= ?")
            params.append(end)
        rows = self.db.rows(
            f"""SELECT s.*, COUNT(o.id) AS observation_count,
                       MAX(COALESCE(o.created_at, s.started_at)) AS last_activity
                FROM sessions s
                LEFT JOIN observations o ON o.session_id = s.id AND o.deleted_at IS NULL
                WHERE {" AND ".join(clauses)}
                GROUP BY s.id ORDER BY last_activity DESC, s.id LIMIT ? OFFSET ?""",
            [*params, max(1, int(limit)), max(0, int(offset))],
        )
        return [Session.from_row(r) for r in rows]

    def count_sessions(self, project: str | None = None) -> int:
        if project:
            return int(
                self.db.scalar(
                    "SELECT COUNT(*) FROM sessions WHERE project = ?", (project_name(project),)
                )
                or 0
            )
        return int(self.db.scalar("SELECT COUNT(*) FROM sessions") or 0)

    def session_observations(
        self, session_id: str, limit: int = 500, *, offset: int = 0
    ) -> list[Observation]:
        """A session's live observations in the order they were saved (pages with ``offset``)."""
        rows = self.db.rows(
            """SELECT * FROM observations WHERE session_id = ? AND deleted_at IS NULL
               ORDER BY created_at, id LIMIT ? OFFSET ?""",
            (session_id, max(1, int(limit)), max(0, int(offset))),
        )
        return [Observation.from_row(r) for r in rows]

    def session_prompts(
        self, session_id: str, limit: int = 500, *, offset: int = 0
    ) -> list[Prompt]:
        rows = self.db.rows(
            """SELECT * FROM user_prompts WHERE session_id = ?
               ORDER BY created_at, id LIMIT ? OFFSET ?""",
            (session_id, max(1, int(limit)), max(0, int(offset))),
        )
        return [Prompt.from_row(r) for r in rows]

    def session_counts(self, session_id: str) -> tuple[int, int]:
        """How many live observations and prompts a session has (for paging through them)."""
        with self.db.read() as conn:
            observations = conn.execute(
                "SELECT COUNT(*) FROM observations WHERE session_id = ? AND deleted_at IS NULL",
                (session_id,),
            ).fetchone()[0]
            prompts = conn.execute(
                "SELECT COUNT(*) FROM user_prompts WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
        return int(observations), int(prompts)

    def delete_session(self, session_id: str) -> None:
        """Delete a session and its prompts; refused while any observation references it."""
        with self.db.write() as conn:
            old = self._state(conn, "session", session_id)
            if old is None:
                raise NotFoundError(f"session {session_id!r} not found")
            count = conn.execute(
                "SELECT COUNT(*) FROM observations WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            if count:
                raise ConflictError(
                    f"session {session_id!r} still has {count} observation(s); "
                    "delete or move them first"
                )
            self._delete_session_rows(conn, old)

    def _delete_session_rows(self, conn: sqlite3.Connection, old: dict) -> tuple[int, int]:
        """Hard-delete a session's prompts and then the session, journaling each."""
        now = now_text()
        prompts = conn.execute(
            "SELECT sync_id FROM user_prompts WHERE session_id = ?", (old["id"],)
        ).fetchall()
        for (sync_id,) in prompts:
            state = self._state(conn, "prompt", sync_id)
            hlc, origin = self.journal.tick(conn)
            fts.remove(conn, "user_prompts", "sync_id", sync_id)
            conn.execute("DELETE FROM user_prompts WHERE sync_id = ?", (sync_id,))
            self._journal_hard_delete(conn, "prompt", state, now, hlc, origin)
        hlc, origin = self.journal.tick(conn)
        conn.execute("DELETE FROM sessions WHERE id = ?", (old["id"],))
        self._journal_hard_delete(conn, "session", old, now, hlc, origin)
        return len(prompts), 1
