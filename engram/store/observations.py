"""Observations (memories): save with privacy stripping, truncation, topic upsert and dedupe;
get, update, soft and hard delete, recent lists, timeline and passive capture.

Size: over 500 lines on purpose: the write rules of one entity (privacy, truncation, topic
upsert, dedupe, moves) belong together; searching and context live in their own modules.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.importance import check_importance
from engram.project import normalize_project, project_name
from engram.record import new_key
from engram.secrets import redact_secrets, redaction_warning
from engram.store import fts, links, revisions, scoring, vector_queue
from engram.store.base import StoreBase, default_session_id, drop_tombstone
from engram.store.checks import check_id
from engram.store.conflicts import queue_check
from engram.store.graph_rows import forget as forget_graph
from engram.store.intent import check_intent, check_window
from engram.store.models import (
    NO_INTENT,
    Observation,
    PassiveResult,
    SaveResult,
    Timeline,
    TimelineEntry,
)
from engram.store.schema import DEDUPE_PREFIX_SQL, dedupe_prefix
from engram.store.search_context import ContextRefresh, derive
from engram.store.sessions import check_session_id
from engram.text import (
    Truncation,
    extract_learnings,
    find_similar,
    normalize_scope,
    normalize_topic_key,
    normalized_hash,
    plural,
    require_storable,
    strip_private,
    topic_sync_id,
    truncate,
)
from engram.times import STORE_FORMAT, now_text, parse_user_date

MAX_TITLE_BYTES = 1000
#: Why a memory was soft-deleted, when it says (``None``: deleted by someone).
DELETE_REASONS = ("archived",)


def new_observation_sync_id() -> str:
    return new_key("obs-")


def _redacted(text: str, field: str, warnings: list[str] | None) -> str:
    """``text`` with detected secrets replaced; the warning saying so goes to ``warnings``."""
    redaction = redact_secrets(text)
    if redaction.redacted and warnings is not None:
        warnings.append(redaction_warning(redaction.kinds, field) or "")
    return redaction.text


def deleted_message(oid: int, deleted_at: str, reason: str | None = None) -> str:
    """What every face says about a soft-deleted (or archived) memory asked for by id."""
    how = "archived" if reason == "archived" else "deleted"
    return (
        f"Observation #{oid} was {how} at {deleted_at}: restore it with `engram restore {oid}` "
        f"(MCP mem_restore), or show it with `engram get {oid} --deleted`"
    )


class ObservationsMixin(StoreBase):
    # --- saving -----------------------------------------------------------------------------

    def _clean_text(
        self,
        title: str | None,
        content: str | None,
        *,
        allow_secrets: bool = False,
        warnings: list[str] | None = None,
    ) -> tuple[str, Truncation]:
        title = strip_private(title or "")
        content = strip_private(content or "")
        if not allow_secrets:
            title = _redacted(title, "title", warnings)
            content = _redacted(content, "content", warnings)
        if not title:
            raise ValidationError("title is required and cannot be empty", field="title")
        if not content:
            raise ValidationError("content is required and cannot be empty", field="content")
        return truncate(title, MAX_TITLE_BYTES).text, truncate(
            content, self.config.max_observation_length
        )

    def similar_project_warning(self, project: str) -> str | None:
        """Warn when saving into a project with no memories while a similar name has some.

        A project this store has seen holding memories is not looked up again: the warning is
        a hint for a first save, and one statement less per save counts (issue 18)."""
        if not project or project in self.known_projects:
            return None
        if self.db.one(
            "SELECT 1 FROM observations WHERE project = ? AND deleted_at IS NULL LIMIT 1",
            (project,),
        ):
            self.known_projects.add(project)
            return None
        names = [
            r[0]
            for r in self.db.rows(
                "SELECT DISTINCT project FROM observations WHERE deleted_at IS NULL"
            )
            if r[0]
        ]
        similar = find_similar(project, names)
        if not similar:
            return None
        best = similar[0]
        count = self.db.scalar(
            "SELECT COUNT(*) FROM observations WHERE project = ? AND deleted_at IS NULL", (best,)
        )
        return (
            f'⚠️ Project "{project}" has no memories. Similar project found: "{best}" '
            f"({plural(count, 'memory')}). Consider using that name instead."
        )

    def add_observation(
        self,
        *,
        title: str,
        content: str,
        type: str | None = "manual",
        session_id: str | None = None,
        project: str | None = "",
        scope: str | None = "project",
        topic_key: str | None = None,
        tool_name: str | None = None,
        allow_secrets: bool = False,
        importance: float | None = None,
    ) -> SaveResult:
        """Save a memory. Same topic key ⇒ update that memory; same content within the dedupe
        window ⇒ count a duplicate; otherwise insert (or revive the topic's derived key). One
        transaction, journaled. Detected secrets become ``[REDACTED:kind]`` (with a warning)
        unless ``allow_secrets``. ``importance`` (0-1) overrides the computed score."""
        override = None if importance is None else check_importance(importance)
        for value, name in ((title, "title"), (content, "content"), (type, "type"),
                            (topic_key, "topic_key"), (tool_name, "tool_name"),
                            (project, "project")):  # fmt: skip
            require_storable(value, name)
        redactions: list[str] = []
        title, truncation = self._clean_text(
            title, content, allow_secrets=allow_secrets, warnings=redactions
        )
        content = truncation.text
        kind = (type or "").strip() or "manual"
        project, project_warning = normalize_project(project)
        project = self._write_project(project, session_id)
        scope = normalize_scope(scope)
        topic = normalize_topic_key(topic_key)
        session_id = check_session_id(session_id) if session_id else default_session_id(project)
        tool = (tool_name or "").strip() or None
        warnings = [*redactions, *(w for w in (truncation.warning, project_warning) if w)]
        if similar := self.similar_project_warning(project):
            warnings.append(similar)
        digest = normalized_hash(content)

        with self.db.write() as conn:
            now = now_text()
            self._ensure_session(conn, session_id, project)
            refresh = ContextRefresh(conn)
            action, rowid, sync_id = "created", None, ""
            replaced: tuple[dict[str, Any], str] | None = None
            if topic and (found := self._find_topic_target(conn, project, scope, topic)):
                action, (rowid, sync_id) = "topic_updated", found
                replaced = revisions.current_state(conn, rowid)
                hlc, origin = self.journal.tick(conn)
                refresh.observation(rowid)
                fts.remove(conn, "observations", "id", rowid)
                conn.execute(
                    """UPDATE observations SET type = ?, title = ?, content = ?,
                           tool_name = ?, topic_key = ?, normalized_hash = ?,
                           session_id = ?, revision_count = revision_count + 1,
                           last_seen_at = ?, updated_at = ?, hlc = ?,
                           importance_override = COALESCE(?, importance_override)
                       WHERE id = ?""",
                    (kind, title, content, tool, topic, digest, session_id, now, now, hlc,
                     override, rowid),
                )  # fmt: skip
                fts.restore(conn, "observations", "id", rowid)
            if rowid is None and (
                found := self._find_duplicate(conn, digest, project, scope, kind, title, now)
            ):
                action, (rowid, sync_id) = "deduplicated", found
                hlc, origin = self.journal.tick(conn)
                conn.execute(
                    """UPDATE observations SET duplicate_count = duplicate_count + 1,
                           last_seen_at = ?, updated_at = ?, hlc = ?,
                           importance_override = COALESCE(?, importance_override)
                       WHERE id = ?""",
                    (now, now, hlc, override, rowid),
                )
            inserted, new_row = None, False
            # A topic's derived key brought back (revived or saved again after a hard delete)
            # may be named by relations: the memories at their other ends gain a link.
            named = rowid is None and bool(topic)
            if rowid is None:
                sync_id, deleted_row = self._new_sync_id(conn, project, scope, topic)
                hlc, origin = self.journal.tick(conn)
                values = {
                    "sync_id": sync_id, "session_id": session_id, "type": kind, "title": title,
                    "content": content, "tool_name": tool, "project": project, "scope": scope,
                    "topic_key": topic, "normalized_hash": digest, "now": now, "hlc": hlc,
                    "search_context": derive(conn, session_id=session_id, project=project,
                                             scope=scope, created_at=now, sync_id=sync_id),
                    "importance_override": override,
                }  # fmt: skip
                if deleted_row is not None:
                    # Topic revival (docs/architecture.md, "Identity, the journal and replication"): the derived key's memory was deleted here; this
                    # newer save brings that key back, so every replica ends with one memory.
                    rowid = deleted_row
                    replaced = revisions.current_state(conn, rowid)
                    refresh.observation(rowid)
                    fts.remove(conn, "observations", "id", rowid)
                    conn.execute(
                        """UPDATE observations SET session_id = :session_id, type = :type,
                               title = :title, content = :content, tool_name = :tool_name,
                               scope = :scope, topic_key = :topic_key,
                               normalized_hash = :normalized_hash,
                               revision_count = revision_count + 1, duplicate_count = 1,
                               last_seen_at = :now, created_at = :now, updated_at = :now,
                               deleted_at = NULL, search_context = :search_context, hlc = :hlc,
                               pinned = 0, importance_override = :importance_override,
                               valid_from = NULL, valid_to = NULL, delete_reason = NULL,
                               superseded_by = NULL, reviewed_at = NULL
                           WHERE id = :id""",
                        {**values, "id": rowid},
                    )
                    fts.restore(conn, "observations", "id", rowid)
                else:
                    # A fresh random key is scored here rather than by an UPDATE after the
                    # insert (one statement less per save), with the formula every rescore uses;
                    # a topic's derived key may already be named by relations: rescored below.
                    score = None if topic else scoring.new_memory_score(values)
                    cursor = conn.execute(
                        """INSERT INTO observations(sync_id, session_id, type, title, content,
                               tool_name, project, scope, topic_key, normalized_hash,
                               revision_count, duplicate_count, last_seen_at, created_at,
                               updated_at, search_context, hlc, importance_override,
                               importance, saved_here)
                           VALUES (:sync_id, :session_id, :type, :title, :content, :tool_name,
                               :project, :scope, :topic_key, :normalized_hash, 1, 1, :now, :now,
                               :now, :search_context, :hlc, :importance_override, :importance,
                               1)""",
                        {**values, "importance": score},
                    )
                    rowid = int(cursor.lastrowid or 0)
                    new_row = True
                    fts.add(conn, "observations", rowid, values)
                    refresh.inserted(rowid, {**values, "created_at": now})
                    if topic:
                        # A hard-deleted key saved again (a topic's derived key): this newer
                        # write beats the tombstone, here and on every replica. (A new random
                        # key has none.)
                        drop_tombstone(conn, "observation", project, sync_id)
                    if score is not None:
                        inserted = Observation(
                            **{
                                **NO_INTENT,
                                "importance": round(
                                    override if override is not None else score, 4
                                ),
                                "importance_override": override,
                            },
                            id=rowid, sync_id=sync_id, session_id=session_id, type=kind,
                            title=title, content=content, tool_name=tool, project=project,
                            scope=scope, topic_key=topic, revision_count=1, duplicate_count=1,
                            last_seen_at=now, created_at=now, updated_at=now, deleted_at=None,
                        )  # fmt: skip
            if replaced is not None:
                now_state = self._state(conn, "observation", project, sync_id)
                assert now_state is not None
                revisions.keep(conn, replaced[0], replaced[1], now_state, hlc)
            refresh.settle()  # the rows whose session context this save changes
            if inserted is None:
                scoring.rescore_ids(conn, [rowid], now)
            if named:
                scoring.rescore_linked(conn, [rowid], now)
            self._journal_state(
                conn, "observation", project, sync_id, hlc, origin, scope=scope, deleted=False
            )
            if action != "deduplicated" and not new_row:
                # The conflict check runs later, off the save path (engram/store/conflicts.py);
                # a new row waits for it without a queue row (saved_here).
                queue_check(conn, rowid)
            if inserted is None:
                row = conn.execute("SELECT * FROM observations WHERE id = ?", (rowid,)).fetchone()
                inserted = Observation.from_row(row)
        self.known_projects.add(project)

        return SaveResult(
            observation=inserted,
            action=action,
            warnings=warnings,
            truncated=truncation.truncated,
            original_bytes=truncation.original_bytes,
            limit_bytes=truncation.limit_bytes,
            topic_hint=None if topic else (kind, title, content),
        )

    @staticmethod
    def _find_topic_target(
        conn: sqlite3.Connection, project: str, scope: str, topic: str
    ) -> tuple[int, str] | None:
        """The live memory a topic save updates: the derived key first, then (older rows) the
        most recently updated live memory with that topic in the project and scope."""
        derived = topic_sync_id(project, scope, topic)
        row = conn.execute(
            """SELECT id, sync_id FROM observations WHERE project = ? AND sync_id = ?
                 AND deleted_at IS NULL AND topic_key = ? AND scope = ?""",
            (project, derived, topic, scope),
        ).fetchone()
        if row is None:
            row = conn.execute(
                """SELECT id, sync_id FROM observations
                   WHERE topic_key = ? AND project = ? AND scope = ? AND deleted_at IS NULL
                   ORDER BY updated_at DESC, created_at DESC, id DESC LIMIT 1""",
                (topic, project, scope),
            ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def _find_duplicate(
        self,
        conn: sqlite3.Connection,
        digest: str,
        project: str,
        scope: str,
        kind: str,
        title: str,
        now: str,
    ) -> tuple[int, str] | None:
        window = max(1, self.config.dedupe_window_minutes)
        # (fromisoformat reads the store's format, far faster than strptime)
        start = (datetime.fromisoformat(now) - timedelta(minutes=window)).strftime(STORE_FORMAT)
        # "+created_at": rows with this content hash are few; ordering by the project's time
        # index instead would read every memory of the project saved within the window (hence
        # "+project" too). The hash's prefix is what the dedupe index holds; "+normalized_hash":
        # an equality on the plain column makes SQLite substitute its value into the prefix
        # expression, which then no longer matches the index's.
        row = conn.execute(
            f"""SELECT id, sync_id FROM observations
               WHERE {DEDUPE_PREFIX_SQL} = ? AND +normalized_hash = ? AND +project = ?
                 AND scope = ? AND type = ? AND title = ?
                 AND +created_at >= ? AND deleted_at IS NULL
               ORDER BY +created_at DESC, id DESC LIMIT 1""",
            (dedupe_prefix(digest), digest, project, scope, kind, title, start),
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    @staticmethod
    def _new_sync_id(
        conn: sqlite3.Connection, project: str, scope: str, topic: str | None
    ) -> tuple[str, int | None]:
        """The key of a new memory and, when that key's soft-deleted row is to be revived, its
        local id.

        A topic memory gets the topic's derived key (so machines converge) whether that key is
        free, hard-deleted (tombstone) or soft-deleted here: a newer save revives it (docs/architecture.md, "Identity, the journal and replication"
        "Topic revival"). Only a live memory that holds it under another topic or scope (edits
        never re-key) makes the save mint a random key."""
        if topic:
            derived = topic_sync_id(project, scope, topic)
            row = conn.execute(
                "SELECT id, deleted_at FROM observations WHERE project = ? AND sync_id = ?",
                (project, derived),
            ).fetchone()
            if row is None:
                return derived, None
            if row["deleted_at"] is not None:
                return derived, int(row["id"])
        return new_observation_sync_id(), None

    # --- reading ----------------------------------------------------------------------------

    def get_observation(
        self, observation_id: Any, *, include_deleted: bool = False, record_access: bool = False
    ) -> Observation:
        """One memory by its local id; a soft-deleted or archived one only with
        ``include_deleted`` (else the error says so, and how to bring it back).
        ``record_access``: someone reads it (the faces' "show this memory"), which counts as an
        access (docs/importance.md)."""
        oid = check_id(observation_id)
        row = self.db.one("SELECT * FROM observations WHERE id = ?", (oid,))
        if row is None:
            raise NotFoundError(f"Observation #{oid} not found")
        if row["deleted_at"] is not None and not include_deleted:
            raise NotFoundError(deleted_message(oid, row["deleted_at"], row["delete_reason"]))
        found = Observation.from_row(row)
        if record_access:
            # Counted in the access log; the count shown is the folded one, the same on every
            # face (reads are folded in batches: docs/importance.md).
            self.access.note([found])
        return found

    def get_observation_by_sync_id(
        self, sync_id: str, *, project: str | None = None
    ) -> Observation:
        """The memory ``(project, sync_id)``; without ``project`` the most recently updated
        memory with that key (keys are unique per project only)."""
        if project is not None:
            row = self.db.one(
                "SELECT * FROM observations WHERE project = ? AND sync_id = ?",
                (project_name(project), sync_id),
            )
        else:
            row = self.db.one(
                """SELECT * FROM observations WHERE sync_id = ?
                   ORDER BY updated_at DESC, id DESC LIMIT 1""",
                (sync_id,),
            )
        if row is None:
            raise NotFoundError(f"observation {sync_id!r} not found")
        return Observation.from_row(row)

    def _observation_filters(
        self,
        project: str | None,
        scope: str | None,
        type: str | None,
        since: str | None,
        until: str | None,
        alias: str = "o",
        *,
        include_deleted: bool = False,
    ) -> tuple[list[str], list[Any]]:
        clauses = ["1" if include_deleted else f"{alias}.deleted_at IS NULL"]
        params: list[Any] = []
        if project:
            clauses.append(f"{alias}.project = ?")
            params.append(normalize_project(project)[0])
        if scope:
            clauses.append(f"{alias}.scope = ?")
            params.append(normalize_scope(scope))
        if type:
            clauses.append(f"{alias}.type = ?")
            params.append(type.strip())
        if (start := parse_user_date(since, field="since")) is not None:
            clauses.append(f"{alias}.created_at >= ?")
            params.append(start)
        if (end := parse_user_date(until, field="until")) is not None:
            clauses.append(f"{alias}.created_at <= ?")
            params.append(end)
        return clauses, params

    def recent_observations(
        self,
        project: str | None = None,
        scope: str | None = None,
        limit: int = 20,
        *,
        type: str | None = None,
        since: str | None = None,
        until: str | None = None,
        offset: int = 0,
        include_deleted: bool = False,
    ) -> list[Observation]:
        """Live observations (and soft-deleted ones with ``include_deleted``), newest first
        (pages with ``offset``)."""
        clauses, params = self._observation_filters(
            project, scope, type, since, until, include_deleted=include_deleted
        )
        rows = self.db.rows(
            f"""SELECT o.* FROM observations o WHERE {" AND ".join(clauses)}
                ORDER BY o.created_at DESC, o.id DESC LIMIT ? OFFSET ?""",
            [*params, max(1, int(limit)), max(0, int(offset))],
        )
        return [Observation.from_row(r) for r in rows]

    def count_observations(
        self,
        project: str | None = None,
        scope: str | None = None,
        *,
        type: str | None = None,
        since: str | None = None,
        until: str | None = None,
        include_deleted: bool = False,
    ) -> int:
        clauses, params = self._observation_filters(
            project, scope, type, since, until, include_deleted=include_deleted
        )
        return int(
            self.db.scalar(
                f"SELECT COUNT(*) FROM observations o WHERE {' AND '.join(clauses)}", params
            )
            or 0
        )

    def timeline(self, observation_id: Any, before: int = 5, after: int = 5) -> Timeline:
        """The observations around one, in its session, in order."""
        focus = self.get_observation(observation_id)
        before = int(before) if before and int(before) > 0 else 5
        after = int(after) if after and int(after) > 0 else 5
        with self.db.read() as conn:
            where = "project = ? AND session_id = ? AND deleted_at IS NULL"
            earlier = conn.execute(
                f"""SELECT * FROM observations
                    WHERE {where} AND id < ? ORDER BY id DESC LIMIT ?""",
                (focus.project, focus.session_id, focus.id, before),
            ).fetchall()
            later = conn.execute(
                f"""SELECT * FROM observations
                    WHERE {where} AND id > ? ORDER BY id LIMIT ?""",
                (focus.project, focus.session_id, focus.id, after),
            ).fetchall()
            total = conn.execute(
                f"SELECT COUNT(*) FROM observations WHERE {where}",
                (focus.project, focus.session_id),
            ).fetchone()[0]
        try:
            session = self.get_session(focus.session_id, project=focus.project)
        except NotFoundError:
            session = None

        def entry(r: sqlite3.Row) -> TimelineEntry:
            return TimelineEntry.of(Observation.from_row(r))

        return Timeline(
            focus=focus,
            before=[entry(r) for r in reversed(earlier)],
            after=[entry(r) for r in later],
            session_info=session,
            total_in_range=total,
        )

    # --- changing ---------------------------------------------------------------------------

    def update_observation(
        self,
        observation_id: Any,
        *,
        title: str | None = None,
        content: str | None = None,
        type: str | None = None,
        project: str | None = None,
        scope: str | None = None,
        topic_key: str | None = None,
        tool_name: str | None = None,
        allow_secrets: bool = False,
        warnings: list[str] | None = None,
        importance: float | str | None = None,
        pinned: bool | None = None,
        valid_from: str | None = None,
        valid_to: str | None = None,
    ) -> Observation:
        """Change the given fields of a live observation (``topic_key=""`` clears it).

        ``importance`` (0-1) overrides the computed score, ``"auto"`` drops the override;
        ``pinned`` pins or unpins; ``valid_from``/``valid_to`` (a date, ``""`` clears) say when
        the memory was true. Detected secrets in a new title or content become
        ``[REDACTED:kind]`` unless ``allow_secrets``; a list passed as ``warnings`` receives the
        warning saying so."""
        oid = check_id(observation_id)
        text_fields = (title, content, type, project, scope, topic_key, tool_name)
        intent_fields = (importance, pinned, valid_from, valid_to)
        if all(v is None for v in (*text_fields, *intent_fields)):
            raise ValidationError("provide at least one field to update")
        for value, name in ((title, "title"), (content, "content"), (type, "type"),
                            (project, "project"), (topic_key, "topic_key"),
                            (tool_name, "tool_name")):  # fmt: skip
            require_storable(value, name)
        intent = check_intent(importance, pinned, valid_from, valid_to)
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT project, sync_id, hlc FROM observations WHERE id = ? AND deleted_at IS NULL",
                (oid,),
            ).fetchone()
            if row is None:
                raise self._missing(conn, oid, "change")
            old_hlc = str(row[2] or "")
            old = self._state(conn, "observation", row[0], row[1])
            assert old is not None
            new = dict(old)
            if title is not None:
                new["title"] = strip_private(title)
                if not allow_secrets:
                    new["title"] = _redacted(new["title"], "title", warnings)
                if not new["title"]:
                    raise ValidationError("title cannot be empty", field="title")
                new["title"] = truncate(new["title"], MAX_TITLE_BYTES).text
            if content is not None:
                text = strip_private(content)
                if not allow_secrets:
                    text = _redacted(text, "content", warnings)
                if not text:
                    raise ValidationError("content cannot be empty", field="content")
                new["content"] = truncate(text, self.config.max_observation_length).text
            if type is not None:
                new["type"] = type.strip() or old["type"]
            if project is not None:
                new["project"] = normalize_project(project)[0]
            if scope is not None:
                new["scope"] = normalize_scope(scope)
            if topic_key is not None:
                new["topic_key"] = normalize_topic_key(topic_key)
            if tool_name is not None:
                new["tool_name"] = tool_name.strip() or None
            new.update(intent)
            check_window(new["valid_from"], new["valid_to"])
            now = now_text()
            refresh = ContextRefresh(conn)
            refresh.observation(oid)
            fts.remove(conn, "observations", "id", oid)
            key = old["sync_id"]
            # Another project or scope may end or hide the memory's relations: the memories at
            # their other ends are re-scored too (their link counts, engram/store/links.py).
            moved = (new["project"], new["scope"]) != (old["project"], old["scope"])
            linked = links.linked_ids(conn, [oid]) if moved else set()
            if new["project"] != old["project"]:
                # Another project is another address: a delete here, a create there (docs/architecture.md, "Identity, the journal and replication").
                key = self._move(conn, "observation", oid, old, new["project"], now)
            elif new["scope"] != old["scope"]:
                self._journal_exit(conn, old, now)
            hlc, origin = self.journal.tick(conn)
            # Only a change of what the memory says is a revision; a pin or an importance is not.
            revised = any(v is not None for v in text_fields)
            conn.execute(
                """UPDATE observations SET title = ?, content = ?, type = ?,
                       scope = ?, topic_key = ?, tool_name = ?, normalized_hash = ?,
                       revision_count = revision_count + ?, updated_at = ?, hlc = ?,
                       pinned = ?, importance_override = ?, valid_from = ?, valid_to = ?
                   WHERE id = ?""",
                (
                    new["title"],
                    new["content"],
                    new["type"],
                    new["scope"],
                    new["topic_key"],
                    new["tool_name"],
                    normalized_hash(new["content"]),
                    1 if revised else 0,
                    now,
                    hlc,
                    int(new["pinned"]),
                    new["importance_override"],
                    new["valid_from"],
                    new["valid_to"],
                    oid,
                ),
            )
            fts.restore(conn, "observations", "id", oid)
            replaced = {**old, "project": new["project"], "sync_id": key}  # its address now
            revisions.keep(conn, replaced, old_hlc, new, hlc)
            refresh.settle()
            if moved:
                linked |= links.linked_ids(conn, [oid])
            scoring.rescore_ids(conn, [oid, *linked], now)
            self._journal_state(conn, "observation", new["project"], key, hlc, origin)
            if (new["title"], new["content"]) != (old["title"], old["content"]):
                queue_check(conn, oid)
        return self.get_observation(oid)

    @staticmethod
    def _missing(conn: sqlite3.Connection, oid: int, verb: str) -> Exception:
        """The error for a memory that cannot be changed: gone, or deleted (say how to get it
        back rather than pretend it never existed)."""
        row = conn.execute(
            "SELECT deleted_at, delete_reason FROM observations WHERE id = ?", (oid,)
        ).fetchone()
        if row is None:
            return NotFoundError(f"Observation #{oid} not found")
        how = "archived" if row[1] == "archived" else "deleted"
        return ConflictError(
            f"Memory #{oid} is {how}: restore it first (engram restore {oid}), then {verb} it"
        )

    def delete_observation(
        self, observation_id: Any, *, hard: bool = False, reason: str | None = None
    ) -> Observation:
        """Soft delete (hidden everywhere, replicated as a tombstone; :meth:`restore_observation`
        undoes it) or hard delete (the row is gone; only its key and clock remain). Returns the
        observation as it was.

        ``reason`` is recorded with a soft delete (``archived``: consolidation or by hand)."""
        return self.delete_observations([observation_id], hard=hard, reason=reason)[0]

    def delete_observations(
        self, observation_ids: Any, *, hard: bool = False, reason: str | None = None
    ) -> list[Observation]:
        """Delete several memories in one transaction: every id is checked first, and one that
        is not a live memory (or, for ``hard``, any memory) deletes none of them."""
        ids = [check_id(i) for i in observation_ids]
        if not ids:
            raise ValidationError("give at least one memory id", field="id")
        if reason is not None and reason not in DELETE_REASONS:
            raise ValidationError(
                f"reason must be one of {', '.join(DELETE_REASONS)}, got {reason!r}",
                field="reason",
            )
        done: list[Observation] = []
        with self.db.write() as conn:
            for oid in dict.fromkeys(ids):  # each once, in the order given
                done.append(self._delete_one(conn, oid, hard, reason))
        return done

    def _delete_one(
        self, conn: sqlite3.Connection, oid: int, hard: bool, reason: str | None
    ) -> Observation:
        row = conn.execute("SELECT * FROM observations WHERE id = ?", (oid,)).fetchone()
        if row is None or (row["deleted_at"] is not None and not hard):
            raise NotFoundError(f"Observation #{oid} not found")
        before = Observation.from_row(row)
        now = now_text()
        hlc, origin = self.journal.tick(conn)
        refresh = ContextRefresh(conn)  # the rows whose session context held this memory
        refresh.observation(oid)
        linked = links.linked_ids(conn, [oid])  # their link counts change too
        if hard:
            old = self._state(conn, "observation", row["project"], row["sync_id"])
            fts.remove(conn, "observations", "id", oid)
            conn.execute("DELETE FROM observations WHERE id = ?", (oid,))
            revisions.forget(conn, row["project"], row["sync_id"])
            assert old is not None  # read from the row found in this transaction
            self._journal_hard_delete(conn, "observation", old, now, hlc, origin)
        else:
            vector_queue.forget_deleted(conn, "id", oid)
            conn.execute(
                """UPDATE observations SET deleted_at = ?, updated_at = ?, hlc = ?,
                       delete_reason = ? WHERE id = ?""",
                (now, now, hlc, reason, oid),
            )
            forget_graph(conn, [oid])  # the entity graph holds live memories only
            self._journal_state(conn, "observation", row["project"], row["sync_id"], hlc, origin)
        scoring.rescore_ids(conn, linked, now)
        refresh.settle()
        return before

    def restore_observation(self, observation_id: Any) -> Observation:
        """Bring back a soft-deleted or archived memory: live again, here and — journaled as a
        newer upsert that beats the delete — on every replica. A memory a consolidation merged
        away stops being superseded: its successor link and the end of its validity that the
        merge set are cleared, and the merge's ``supersedes`` relation is judged ``ignored``. A
        hard delete cannot be undone."""
        return self.restore_observations([observation_id])[0]

    def restore_observations(self, observation_ids: Any) -> list[Observation]:
        """Restore several soft-deleted or archived memories in one transaction (all or none)."""
        ids = [check_id(i) for i in observation_ids]
        if not ids:
            raise ValidationError("give at least one memory id", field="id")
        with self.db.write() as conn:
            for oid in dict.fromkeys(ids):  # each once, in the order given
                self._restore_one(conn, oid)
        return [self.get_observation(oid) for oid in dict.fromkeys(ids)]

    def _restore_one(self, conn: sqlite3.Connection, oid: int) -> None:
        row = conn.execute(
            "SELECT project, sync_id, deleted_at, superseded_by FROM observations WHERE id = ?",
            (oid,),
        ).fetchone()
        if row is None:
            raise NotFoundError(f"Observation #{oid} not found (a hard delete cannot be undone)")
        if row["deleted_at"] is None:
            raise ConflictError(f"Memory #{oid} is not deleted: nothing to restore")
        now = now_text()
        hlc, origin = self.journal.tick(conn)
        refresh = ContextRefresh(conn)
        refresh.observation(oid)
        merged = row["superseded_by"] is not None
        vector_queue.queue(conn, [oid])  # searchable by meaning again (deletes dropped its vector)
        conn.execute(
            f"""UPDATE observations SET deleted_at = NULL, delete_reason = NULL,
                   superseded_by = NULL, {"valid_to = NULL," if merged else ""}
                   updated_at = ?, hlc = ? WHERE id = ?""",
            (now, hlc, oid),
        )
        refresh.settle()  # its own session context and its neighbours' include it again
        scoring.rescore_ids(conn, [oid, *links.linked_ids(conn, [oid])], now)
        self._journal_state(conn, "observation", row["project"], row["sync_id"], hlc, origin)
        if merged:  # the merge's supersession ends (the relation is kept, judged ignored)
            self._end_supersession(  # type: ignore[attr-defined]
                conn, row["project"], row["superseded_by"], row["sync_id"]
            )

    # --- passive capture --------------------------------------------------------------------

    def capture_passive(
        self,
        content: str,
        *,
        session_id: str | None = None,
        project: str | None = "",
        source: str | None = "mcp-passive",
    ) -> PassiveResult:
        """Save each item of a "Key Learnings" section as a ``passive`` memory (skipping any
        that already exist in the project)."""
        learnings = extract_learnings(strip_private(content or ""))
        result = PassiveResult(extracted=len(learnings))
        project = normalize_project(project)[0]
        for learning in learnings:
            digest = normalized_hash(learning)
            exists = self.db.one(
                f"""SELECT 1 FROM observations WHERE {DEDUPE_PREFIX_SQL} = ?
                      AND +normalized_hash = ? AND +project = ? AND deleted_at IS NULL LIMIT 1""",
                (dedupe_prefix(digest), digest, project),
            )
            if exists:
                result.duplicates += 1
                continue
            encoded = learning.encode()
            title = learning if len(encoded) <= 60 else encoded[:60].decode(errors="ignore") + "..."
            self.add_observation(
                title=title,
                content=learning,
                type="passive",
                session_id=session_id,
                project=project,
                scope="project",
                tool_name=source or "mcp-passive",
            )
            result.saved += 1
        return result
