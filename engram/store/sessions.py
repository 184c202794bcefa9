"""Sessions: start (create or complete), end, look up, list, delete."""

from __future__ import annotations

import sqlite3
from typing import Any

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.project import project_name
from engram.store import fts
from engram.store.base import StoreBase, drop_tombstone
from engram.store.models import Observation, Prompt, Session
from engram.store.search_context import ContextRefresh
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


#: Rows of a session id, best first: rows this machine wrote (its journal holds a local mutation
#: of them) before rows only other replicas wrote, then the most recently started.
_BY_ID = """SELECT s.*, EXISTS (SELECT 1 FROM sync_journal j
                                WHERE j.entity = 'session' AND j.project = s.project
                                  AND j.key = s.id AND j.source = 'local') AS own
            FROM sessions s WHERE s.id = ?
            ORDER BY own DESC, s.started_at DESC, s.rowid DESC"""


class SessionsMixin(StoreBase):
    """Sessions are addressed by ``(project, id)``: an agent session that wrote to two projects
    has a row in each (docs/architecture.md, "Identity, the journal and replication"). A face may name a session by id alone; then

    * reads take the best row of that id: one this machine wrote, else the most recently
      started (:meth:`get_session`);
    * ending ends every still-open row of that id this machine wrote (an agent session that
      wrote to several projects ends in all of them), and refuses, asking for the project, a
      session only other replicas wrote (its summary would go to their project);
    * deleting needs the one row, or the project when several projects have that id;
    * a save or prompt that names a session but no project joins the session's project when
      this machine wrote that session in exactly one project.

    Preferring this machine's own rows matters: anyone who may write to some shared project
    can create a session with any id there, and must not capture this machine's writes.
    """

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
        """End a session (see the class docstring for a session named by id alone)."""
        session_id = check_session_id(session_id)
        require_storable(summary, "summary")
        with self.db.write() as conn:
            rows = conn.execute(_BY_ID, (session_id,)).fetchall()
            if project is not None:
                name = project_name(project)
                projects = [r["project"] for r in rows if r["project"] == name]
            else:
                own = [r for r in rows if r["own"]]
                if rows and not own:
                    names = ", ".join(sorted({r["project"] or "(no project)" for r in rows}))
                    raise ValidationError(
                        f"session {session_id!r} was started on another machine ({names}); "
                        "name the project to end it there",
                        field="project",
                    )
                projects = sorted(r["project"] for r in own if r["ended_at"] is None)
                projects = projects or [r["project"] for r in own[:1]]
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
        return self.get_session(session_id, project=projects[0] if project is None else project)

    def get_session(self, session_id: str, *, project: str | None = None) -> Session:
        """The session ``(project, session_id)``; without ``project`` the best row of that id
        (one this machine wrote, else the most recently started)."""
        if project is not None:
            row = self.db.one(
                "SELECT * FROM sessions WHERE project = ? AND id = ?",
                (project_name(project), session_id),
            )
        else:
            row = self.db.one(_BY_ID + " LIMIT 1", (session_id,))
        if row is None:
            raise NotFoundError(f"session {session_id!r} not found")
        return Session.from_row(row)

    def _write_project(self, project: str, session_id: str | None) -> str:
        """Where a write that names a session goes when it names no project: the session's
        project, when this machine wrote that session in exactly one project; a project the
        caller did name always wins."""
        if project or not session_id:
            return project
        return self.project_of_session(session_id) or project

    def project_of_session(self, session_id: str) -> str:
        """The project a write naming only ``session_id`` joins: the session's, when this
        machine wrote that session in exactly one project; else ``""`` (the caller decides:
        the HTTP API then uses the server's project)."""
        projects = {
            r["project"]
            for r in self.db.rows(_BY_ID, (session_id.strip(),))
            if r["own"] and r["project"]
        }
        return projects.pop() if len(projects) == 1 else ""

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
                rows = conn.execute(_BY_ID, (session_id,)).fetchall()
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

    def _delete_session_rows(
        self, conn: sqlite3.Connection, old: dict[str, Any]
    ) -> tuple[int, int]:
        """Hard-delete a session's prompts and then the session, journaling each."""
        now = now_text()
        project = old["project"]
        prompts = conn.execute(
            "SELECT id, sync_id FROM user_prompts WHERE project = ? AND session_id = ?",
            (project, old["id"]),
        ).fetchall()
        refresh = ContextRefresh(conn)
        for rowid, sync_id in prompts:
            state = self._state(conn, "prompt", project, sync_id)
            hlc, origin = self.journal.tick(conn)
            refresh.prompt(rowid)
            fts.remove(conn, "user_prompts", "id", rowid)
            conn.execute("DELETE FROM user_prompts WHERE id = ?", (rowid,))
            assert state is not None  # read from the row found in this transaction
            self._journal_hard_delete(conn, "prompt", state, now, hlc, origin)
        refresh.settle()
        hlc, origin = self.journal.tick(conn)
        conn.execute("DELETE FROM sessions WHERE project = ? AND id = ?", (project, old["id"]))
        self._journal_hard_delete(conn, "session", old, now, hlc, origin)
        return len(prompts), 1
