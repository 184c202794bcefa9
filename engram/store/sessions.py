"""Sessions: start (create or complete), end, look up, list, delete."""

from __future__ import annotations

import sqlite3

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.project import project_name
from engram.store import fts
from engram.store.base import StoreBase, drop_tombstone
from engram.store.models import Observation, Prompt, Session
from engram.text import require_storable
from engram.times import now_text, parse_user_date

MAX_SESSION_ID = 128


def check_session_id(session_id: str | None) -> str:
    require_storable(session_id, "session_id")
    value = (session_id or "").strip()
    if not value:
        raise ValidationError("session id is required", field="id")
    if len(value) > MAX_SESSION_ID:
        raise ValidationError(f"session id is longer than {MAX_SESSION_ID} characters", field="id")
    return value


class SessionsMixin(StoreBase):
    """Sessions are addressed by ``(project, id)``: an agent session that wrote to two projects
    has a row in each (DESIGN §3). A face that names a session by id alone gets, for reads, the
    most recently started row of that id (:meth:`get_session`); for ending, every still-open
    row; for deleting, the one row, or an error asking for ``project`` when several exist."""

    def _ensure_session(
        self, conn: sqlite3.Connection, session_id: str, project: str, directory: str = ""
    ) -> bool:
        """Create the session ``(project, session_id)``, or fill in its blank directory (never
        overwrite).

        Journals the session when it changed; returns whether it did.
        """
        row = conn.execute(
            "SELECT directory FROM sessions WHERE project = ? AND id = ?", (project, session_id)
        ).fetchone()
        if row is None:
            if not directory:  # the same agent session, seen in another project: same place
                other = conn.execute(
                    """SELECT directory FROM sessions WHERE id = ? AND directory != ''
                       ORDER BY started_at DESC, rowid DESC LIMIT 1""",
                    (session_id,),
                ).fetchone()
                directory = other[0] if other else ""
            hlc, origin = self.journal.tick(conn)
            conn.execute(
                "INSERT INTO sessions(id, project, directory, started_at, hlc)"
                " VALUES (?, ?, ?, ?, ?)",
                (session_id, project, directory, now_text(), hlc),
            )
            drop_tombstone(conn, "session", project, session_id)
        else:
            if row["directory"] or not directory:
                return False
            hlc, origin = self.journal.tick(conn)
            conn.execute(
                "UPDATE sessions SET directory = ?, hlc = ? WHERE project = ? AND id = ?",
                (directory, hlc, project, session_id),
            )
        self._journal_state(conn, "session", project, session_id, hlc, origin)
        return True

    def create_session(self, session_id: str, project: str = "", directory: str = "") -> Session:
        """Start a session (idempotent: an existing one only gets its blank directory filled)."""
        session_id = check_session_id(session_id)
        require_storable(project, "project")
        require_storable(directory, "directory")
        name = project_name(project)
        with self.db.write() as conn:
            self._ensure_session(conn, session_id, name, directory or "")
        return self.get_session(session_id, project=name)

    def end_session(
        self, session_id: str, summary: str | None = None, *, project: str | None = None
    ) -> Session:
        """End a session. By id alone it ends every row of that id that is still open (an agent
        session that wrote to several projects ends in all of them), or, when all have ended,
        the most recent one again (a new summary)."""
        session_id = check_session_id(session_id)
        require_storable(summary, "summary")
        with self.db.write() as conn:
            if project is not None:
                projects = (
                    [project_name(project)]
                    if self._has_session(conn, session_id, project_name(project))
                    else []
                )
            else:
                projects = [
                    r[0]
                    for r in conn.execute(
                        """SELECT project FROM sessions WHERE id = ? AND ended_at IS NULL
                           ORDER BY project""",
                        (session_id,),
                    )
                ] or [r["project"] for r in self._latest_sessions(conn, session_id)[:1]]
            if not projects:
                raise NotFoundError(f"session {session_id!r} not found")
            ended = now_text()
            text = (summary or "").strip() or None
            for name in projects:
                hlc, origin = self.journal.tick(conn)
                conn.execute(
                    """UPDATE sessions SET ended_at = ?, summary = ?, hlc = ?
                       WHERE project = ? AND id = ?""",
                    (ended, text, hlc, name, session_id),
                )
                self._journal_state(conn, "session", name, session_id, hlc, origin)
        return self.get_session(session_id, project=project)

    @staticmethod
    def _has_session(conn: sqlite3.Connection, session_id: str, project: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM sessions WHERE project = ? AND id = ?", (project, session_id)
            ).fetchone()
            is not None
        )

    @staticmethod
    def _latest_sessions(conn: sqlite3.Connection, session_id: str) -> list[sqlite3.Row]:
        """The rows of a session id, most recently started first (ties: the latest made)."""
        return conn.execute(
            "SELECT * FROM sessions WHERE id = ? ORDER BY started_at DESC, rowid DESC",
            (session_id,),
        ).fetchall()

    def get_session(self, session_id: str, *, project: str | None = None) -> Session:
        """The session ``(project, session_id)``; without ``project`` the most recently started
        row of that id."""
        if project is not None:
            row = self.db.one(
                "SELECT * FROM sessions WHERE project = ? AND id = ?",
                (project_name(project), session_id),
            )
        else:
            row = self.db.one(
                """SELECT * FROM sessions WHERE id = ?
                   ORDER BY started_at DESC, rowid DESC LIMIT 1""",
                (session_id,),
            )
        if row is None:
            raise NotFoundError(f"session {session_id!r} not found")
        return Session.from_row(row)

    def _write_project(self, project: str, session_id: str | None) -> str:
        """Where a write that names a session goes when it names no project: the session's
        project (its most recent row with one), as an agent would expect; a project the caller
        did name always wins."""
        if project or not session_id:
            return project
        row = self.db.one(
            """SELECT project FROM sessions WHERE id = ? AND project != ''
               ORDER BY started_at DESC, rowid DESC LIMIT 1""",
            (session_id.strip(),),
        )
        return project if row is None else str(row[0])

    def _session_project(self, session_id: str, project: str | None) -> str:
        """The project of the session a face named (see :meth:`get_session`)."""
        return self.get_session(session_id, project=project).project

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
                LEFT JOIN observations o ON o.session_id = s.id AND o.project = s.project
                                        AND o.deleted_at IS NULL
                WHERE {" AND ".join(clauses)}
                GROUP BY s.project, s.id
                ORDER BY last_activity DESC, s.id, s.project LIMIT ? OFFSET ?""",
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
        self,
        session_id: str,
        limit: int = 500,
        *,
        offset: int = 0,
        project: str | None = None,
    ) -> list[Observation]:
        """A session's live observations in the order they were saved (pages with ``offset``);
        the session is chosen as by :meth:`get_session`."""
        name = self._session_project(session_id, project)
        rows = self.db.rows(
            """SELECT * FROM observations
               WHERE project = ? AND session_id = ? AND deleted_at IS NULL
               ORDER BY created_at, id LIMIT ? OFFSET ?""",
            (name, session_id, max(1, int(limit)), max(0, int(offset))),
        )
        return [Observation.from_row(r) for r in rows]

    def session_prompts(
        self,
        session_id: str,
        limit: int = 500,
        *,
        offset: int = 0,
        project: str | None = None,
    ) -> list[Prompt]:
        name = self._session_project(session_id, project)
        rows = self.db.rows(
            """SELECT * FROM user_prompts WHERE project = ? AND session_id = ?
               ORDER BY created_at, id LIMIT ? OFFSET ?""",
            (name, session_id, max(1, int(limit)), max(0, int(offset))),
        )
        return [Prompt.from_row(r) for r in rows]

    def session_counts(self, session_id: str, *, project: str | None = None) -> tuple[int, int]:
        """How many live observations and prompts a session has (for paging through them)."""
        name = self._session_project(session_id, project)
        with self.db.read() as conn:
            observations = conn.execute(
                """SELECT COUNT(*) FROM observations
                   WHERE project = ? AND session_id = ? AND deleted_at IS NULL""",
                (name, session_id),
            ).fetchone()[0]
            prompts = conn.execute(
                "SELECT COUNT(*) FROM user_prompts WHERE project = ? AND session_id = ?",
                (name, session_id),
            ).fetchone()[0]
        return int(observations), int(prompts)

    def delete_session(self, session_id: str, *, project: str | None = None) -> None:
        """Delete a session and its prompts; refused while any observation references it. By id
        alone only when one project has that session (deleting is not a guess)."""
        with self.db.write() as conn:
            if project is None:
                rows = self._latest_sessions(conn, session_id)
                if len(rows) > 1:
                    names = ", ".join(sorted(r["project"] or "(no project)" for r in rows))
                    raise ValidationError(
                        f"session {session_id!r} exists in several projects ({names}); "
                        "name the project to delete",
                        field="project",
                    )
                name = rows[0]["project"] if rows else ""
            else:
                name = project_name(project)
            old = self._state(conn, "session", name, session_id)
            if old is None:
                raise NotFoundError(f"session {session_id!r} not found")
            count = conn.execute(
                "SELECT COUNT(*) FROM observations WHERE project = ? AND session_id = ?",
                (name, session_id),
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
        project = old["project"]
        prompts = conn.execute(
            "SELECT id, sync_id FROM user_prompts WHERE project = ? AND session_id = ?",
            (project, old["id"]),
        ).fetchall()
        for rowid, sync_id in prompts:
            state = self._state(conn, "prompt", project, sync_id)
            hlc, origin = self.journal.tick(conn)
            fts.remove(conn, "user_prompts", "id", rowid)
            conn.execute("DELETE FROM user_prompts WHERE id = ?", (rowid,))
            self._journal_hard_delete(conn, "prompt", state, now, hlc, origin)
        hlc, origin = self.journal.tick(conn)
        conn.execute("DELETE FROM sessions WHERE project = ? AND id = ?", (project, old["id"]))
        self._journal_hard_delete(conn, "session", old, now, hlc, origin)
        return len(prompts), 1
