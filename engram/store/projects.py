"""Projects: statistics, the project list, merging name variants and pruning empty projects."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from engram.errors import ValidationError
from engram.project import normalize_project, project_name
from engram.record import RELATION_FIELDS, moved_key
from engram.store import fts
from engram.store.base import StoreBase, drop_tombstone
from engram.store.checks import unknown_project
from engram.store.identity import insert_stub_session
from engram.store.models import MergeResult, ProjectInfo, PruneResult, Stats
from engram.store.search_context import ContextRefresh
from engram.text import require_storable
from engram.times import now_text


class ProjectsMixin(StoreBase):
    def stats(self, project: str | None = None) -> Stats:
        """Totals (live observations only) and projects by most recent activity."""
        where, params = ("", []) if not project else (" WHERE project = ?", [project_name(project)])
        live = " AND deleted_at IS NULL" if where else " WHERE deleted_at IS NULL"
        with self.db.read() as conn:
            sessions = conn.execute(f"SELECT COUNT(*) FROM sessions{where}", params).fetchone()[0]
            observations = conn.execute(
                f"SELECT COUNT(*) FROM observations{where}{live}", params
            ).fetchone()[0]
            prompts = conn.execute(f"SELECT COUNT(*) FROM user_prompts{where}", params).fetchone()[
                0
            ]
            projects = [
                r[0]
                for r in conn.execute(
                    """SELECT project FROM observations WHERE project != ''
                       GROUP BY project ORDER BY MAX(created_at) DESC, project"""
                )
            ]
        return Stats(sessions, observations, prompts, projects)

    def project_names(self) -> list[str]:
        """Every project name that has sessions, observations or prompts, sorted."""
        rows = self.db.rows(
            """SELECT project FROM sessions WHERE project != ''
               UNION SELECT project FROM observations WHERE project != ''
               UNION SELECT project FROM user_prompts WHERE project != ''
               ORDER BY 1"""
        )
        return [r[0] for r in rows]

    def project_exists(self, name: str) -> bool:
        normalized = project_name(name)
        if not normalized:
            return False
        return bool(
            self.db.one(
                """SELECT 1 FROM sessions WHERE project = ?1
                   UNION ALL SELECT 1 FROM observations WHERE project = ?1
                   UNION ALL SELECT 1 FROM user_prompts WHERE project = ?1 LIMIT 1""",
                (normalized,),
            )
        )

    def require_project(self, name: str, *, also_known: Iterable[str] = (), hint: str = "") -> str:
        """``name`` normalized, when something is stored under it (or it is one of
        ``also_known``: names a face knows before anything is saved, such as the directory's
        project); else :class:`~engram.store.checks.UnknownProjectError` with a did-you-mean.
        Every face names a project the same way: explicit names must exist."""
        normalized = normalize_project(name)[0]
        extra = {normalize_project(n)[0] for n in also_known if n}
        if normalized and (normalized in extra or self.project_exists(normalized)):
            return normalized
        raise unknown_project(normalized or name, [*self.project_names(), *extra], hint=hint)

    def list_projects(self) -> list[ProjectInfo]:
        rows = self.db.rows(
            """WITH names AS (
                 SELECT project FROM sessions UNION SELECT project FROM observations
                 UNION SELECT project FROM user_prompts)
               SELECT n.project AS name,
                 (SELECT COUNT(*) FROM observations o
                   WHERE o.project = n.project AND o.deleted_at IS NULL) AS observation_count,
                 (SELECT COUNT(*) FROM sessions s WHERE s.project = n.project) AS session_count,
                 (SELECT COUNT(*) FROM user_prompts p WHERE p.project = n.project) AS prompt_count,
                 (SELECT group_concat(directory, char(10)) FROM (
                    SELECT DISTINCT directory FROM sessions s
                    WHERE s.project = n.project AND directory != '' ORDER BY directory))
                   AS directories
               FROM names n WHERE n.project != ''
               ORDER BY observation_count DESC, name"""
        )
        return [
            ProjectInfo(
                r["name"],
                r["observation_count"],
                r["session_count"],
                r["prompt_count"],
                (r["directories"] or "").split("\n") if r["directories"] else [],
            )
            for r in rows
        ]

    def merge_projects(self, sources: list[str], target: str) -> MergeResult:
        """Move every session, observation and prompt of ``sources`` into ``target``.

        Another project is another address (docs/architecture.md, "Identity, the journal and replication"): each memory and prompt is journaled as
        a hard delete of its key in the old project and a create under its derived key in the
        target, so every replica makes the same move and teammates who share only the old
        project do not keep stale copies. Sessions keep their id: a session the target already
        has keeps the target's row; the others are created there. Local ids stay.
        """
        for name in (*sources, target):
            require_storable(name, "project")
        canonical = normalize_project(target)[0]
        if not canonical:
            raise ValidationError("target project is required", field="to")
        names = sorted({normalize_project(s)[0] for s in sources} - {"", canonical})
        if not names:
            raise ValidationError(
                "give at least one source project other than the target", field="from"
            )
        for name in names:  # a typo merges nothing: say so instead of "0 moved"
            self.require_project(name)
        result = MergeResult(canonical=canonical, sources_merged=[])
        now = now_text()
        marks = ", ".join("?" for _ in names)
        with self.db.write() as conn:
            # Sessions first, so the moved memories' upserts find theirs on every replica.
            for session_id, project in conn.execute(
                f"SELECT id, project FROM sessions WHERE project IN ({marks}) ORDER BY id, project",
                names,
            ).fetchall():
                old = self._state(conn, "session", project, session_id)
                assert old is not None
                stub = conn.execute(
                    "SELECT hlc = '' FROM sessions WHERE project = ? AND id = ?",
                    (project, session_id),
                ).fetchone()[0]
                if stub:  # a placeholder, never journaled: it just moves along
                    conn.execute(
                        "DELETE FROM sessions WHERE project = ? AND id = ?", (project, session_id)
                    )
                    insert_stub_session(conn, canonical, session_id, old["started_at"])
                    continue
                hlc, origin = self.journal.tick(conn)
                conn.execute(
                    "DELETE FROM sessions WHERE project = ? AND id = ?", (project, session_id)
                )
                self._journal_hard_delete(conn, "session", old, now, hlc, origin)
                if self._state(conn, "session", canonical, session_id) is None:
                    hlc, origin = self.journal.tick(conn)
                    conn.execute(
                        """INSERT INTO sessions(id, project, directory, started_at, ended_at,
                                                summary, hlc)
                           VALUES (:id, :project, :directory, :started_at, :ended_at, :summary,
                                   :hlc)""",
                        {**old, "project": canonical, "hlc": hlc},
                    )
                    drop_tombstone(conn, "session", canonical, session_id)
                    self._journal_state(conn, "session", canonical, session_id, hlc, origin)
                result.sessions_updated += 1
            refresh = ContextRefresh(conn)  # moved memories join other sessions' context
            for entity, table in (("observation", "observations"), ("prompt", "user_prompts")):
                for rowid, project, sync_id in conn.execute(
                    f"SELECT id, project, sync_id FROM {table} WHERE project IN ({marks})"
                    " ORDER BY id",
                    names,
                ).fetchall():
                    old = self._state(conn, entity, project, sync_id)
                    assert old is not None
                    if entity == "observation":
                        refresh.observation(rowid)
                    else:
                        refresh.prompt(rowid)
                    fts.remove(conn, table, "id", rowid)
                    key = self._move(conn, entity, rowid, old, canonical, now)
                    hlc, origin = self.journal.tick(conn)
                    conn.execute(f"UPDATE {table} SET hlc = ? WHERE id = ?", (hlc, rowid))
                    fts.restore(conn, table, "id", rowid)
                    self._journal_state(conn, entity, canonical, key, hlc, origin)
                    if entity == "observation":
                        result.observations_updated += 1
                    else:
                        result.prompts_updated += 1
            refresh.settle()
            self._move_relations(conn, names, canonical)
        result.sources_merged = names
        return result

    def _move_relations(self, conn: sqlite3.Connection, names: list[str], canonical: str) -> None:
        """Relations between memories that moved together follow them (under derived keys, as
        the memories: every replica making the same merge makes the same relations); the old
        ones stay behind, orphaned with their memories."""
        marks = ", ".join("?" for _ in names)
        for project, key in conn.execute(
            f"SELECT project, sync_id FROM memory_relations WHERE project IN ({marks})"
            " ORDER BY project, sync_id",
            names,
        ).fetchall():
            old = self._state(conn, "relation", project, key)
            assert old is not None
            ends = [moved_key("observation", old[n], canonical) for n in ("source_id", "target_id")]
            present = [
                conn.execute(
                    "SELECT 1 FROM observations WHERE project = ? AND sync_id = ?", (canonical, e)
                ).fetchone()
                for e in ends
            ]
            if not all(present):
                continue
            values = {k: old[k] for k in RELATION_FIELDS if k not in ("sync_id", "project")}
            values.update(source_id=ends[0], target_id=ends[1])
            self._write_relation(  # type: ignore[attr-defined]
                conn,
                key=moved_key("relation", key, canonical),
                project=canonical,
                scope=old.get("scope", "project"),
                values=values,
            )

    def journal_unjournaled(self, project: str, *, dry_run: bool = False) -> dict[str, int]:
        """Journal the current state of every session, observation and prompt of ``project``
        that has no journal row at all (written by another tool straight into the database),
        so sync transports see it; per-entity counts (only counted with ``dry_run``).

        Stub sessions (``hlc`` empty: a placeholder until the real session arrives from a
        replica) are left alone: journaling one would outrank the real session.
        """
        counts: dict[str, int] = {}
        with self.db.read() if dry_run else self.db.write() as conn:
            for entity, table, key in (
                ("session", "sessions", "id"),
                ("observation", "observations", "sync_id"),
                ("prompt", "user_prompts", "sync_id"),
                ("relation", "memory_relations", "sync_id"),
            ):
                keys = [
                    r[0]
                    for r in conn.execute(
                        f"""SELECT t.{key} FROM {table} t
                            WHERE t.project = ? AND t.hlc != ''
                              AND NOT EXISTS (SELECT 1 FROM sync_journal j
                                              WHERE j.entity = ? AND j.project = t.project
                                                AND j.key = t.{key})
                            ORDER BY t.{key}""",
                        (project, entity),
                    ).fetchall()
                ]
                counts[entity] = len(keys)
                if dry_run:
                    continue
                for value in keys:
                    hlc, origin = self.journal.tick(conn)
                    conn.execute(
                        f"UPDATE {table} SET hlc = ? WHERE project = ? AND {key} = ?",
                        (hlc, project, value),
                    )
                    self._journal_state(conn, entity, project, value, hlc, origin)
        return counts

    def prune_projects(self, *, dry_run: bool = False) -> PruneResult:
        """Remove projects that have no live observations (their prompts and sessions)."""
        rows = self.db.rows(
            """SELECT DISTINCT project FROM (
                 SELECT project FROM sessions UNION SELECT project FROM user_prompts) names
               WHERE project != '' AND NOT EXISTS (
                 SELECT 1 FROM observations o
                 WHERE o.project = names.project AND o.deleted_at IS NULL)
               ORDER BY project"""
        )
        result = PruneResult(projects=[r[0] for r in rows], dry_run=dry_run)
        if not result.projects:
            return result
        marks = ", ".join("?" for _ in result.projects)
        if dry_run:
            result.sessions_deleted = int(
                self.db.scalar(
                    f"SELECT COUNT(*) FROM sessions WHERE project IN ({marks})", result.projects
                )
            )
            result.prompts_deleted = int(
                self.db.scalar(
                    f"SELECT COUNT(*) FROM user_prompts WHERE project IN ({marks})", result.projects
                )
            )
            return result
        now = now_text()
        with self.db.write() as conn:
            refresh = ContextRefresh(conn)
            for rowid, project, sync_id in conn.execute(
                f"SELECT id, project, sync_id FROM user_prompts WHERE project IN ({marks})",
                result.projects,
            ).fetchall():
                old = self._state(conn, "prompt", project, sync_id)
                hlc, origin = self.journal.tick(conn)
                refresh.prompt(rowid)
                fts.remove(conn, "user_prompts", "id", rowid)
                conn.execute("DELETE FROM user_prompts WHERE id = ?", (rowid,))
                assert old is not None  # read from the row found in this transaction
                self._journal_hard_delete(conn, "prompt", old, now, hlc, origin)
                result.prompts_deleted += 1
            refresh.settle()
            for session_id, project in conn.execute(
                f"SELECT id, project FROM sessions WHERE project IN ({marks})", result.projects
            ).fetchall():
                old = self._state(conn, "session", project, session_id)
                assert old is not None  # read from the row found in this transaction
                prompts, sessions = self._delete_session_rows(conn, old)
                result.prompts_deleted += prompts
                result.sessions_deleted += sessions
        return result
