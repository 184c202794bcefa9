"""Relations between memories (issue 20): creating and judging them, reading them with their
endpoints, and what they mean for search results.

A relation links two memories of **one project** (``source_id`` and ``target_id`` are
observation sync ids of the relation's own project, so no relation can ever reach another
project's memories: docs/graph.md). It replicates as its own entity (``relation``, key ``rel-…``,
upserts only). Engram makes one relation per pair of memories, keyed by the pair
(:func:`engram.record.relation_key`), so re-relating a pair — judging a conflict as
``supersedes``, say — updates that relation on every replica instead of adding a second one.

What a relation means here is derived, never stored (so every replica agrees without writing):
it is ``orphaned`` once either memory is deleted (and active again if one comes back; a
``supersedes`` relation whose target was archived, as consolidation leaves the memories it
merged, stays as it was), and a
project-scoped relation that touches a personal memory is not shown at all. Only ``pending``
and ``judged`` relations are *active*: they annotate search results (one line each:
``supersedes #12 (…)``, ``contested by #40 (…) — pending review``), order a superseded memory
right below its successor, and a pending ``conflicts_with`` marks both memories
``needs_review``.

Size: over 500 lines on purpose: writing, judging and reading relations share the pair key
and the visibility rules; one module keeps them from drifting apart.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from engram.errors import NotFoundError, ValidationError
from engram.project import project_name
from engram.record import (
    JUDGMENT_STATUSES,
    RELATION_FIELDS,
    RELATION_TYPES,
    orphans,
    relation_key,
)
from engram.store import scoring
from engram.store.base import StoreBase
from engram.store.models import MemoryRelations, Observation, Relation, RelationEnd
from engram.text import require_storable
from engram.times import now_text

#: Statuses people and agents may set (``orphaned`` is derived from deleted memories).
SETTABLE_STATUSES = ("pending", "judged", "ignored")
#: Relations a search result is annotated with (the others show in the memory's own view).
ANNOTATED = ("supersedes", "conflicts_with")
MAX_REASON_CHARS = 4000
#: How far a supersession chain is followed when checking for a cycle.
MAX_CHAIN = 10_000
_LOOKUP_BATCH = 400
_ENDS = """
    s.id AS s_id, s.title AS s_title, s.type AS s_type, s.scope AS s_scope,
    s.deleted_at AS s_deleted,
    t.id AS t_id, t.title AS t_title, t.type AS t_type, t.scope AS t_scope,
    t.deleted_at AS t_deleted, t.delete_reason AS t_reason"""
_FROM = """memory_relations r
    LEFT JOIN observations s ON s.project = r.project AND s.sync_id = r.source_id
    LEFT JOIN observations t ON t.project = r.project AND t.sync_id = r.target_id"""


def effective_state(row: sqlite3.Row | dict[str, Any]) -> str:
    """What a relation row means on this replica (see the module docstring)."""
    if row["superseded_at"]:
        return "superseded"
    if row["s_id"] is None or row["t_id"] is None:
        return "orphaned"
    if row["s_deleted"] is not None and orphans(row["relation"], "source", None):
        return "orphaned"
    if row["t_deleted"] is not None and orphans(row["relation"], "target", row["t_reason"]):
        return "orphaned"
    status = row["judgment_status"]
    return status if status in JUDGMENT_STATUSES else "ignored"


def visible(row: sqlite3.Row | dict[str, Any]) -> bool:
    """A project-scoped relation never exposes a personal memory (someone else's relation
    cannot annotate or reorder what only this user keeps)."""
    if row["scope"] == "personal":
        return True
    return bool(row["s_scope"] != "personal" and row["t_scope"] != "personal")


def relation_from_row(row: sqlite3.Row) -> Relation:
    def end(prefix: str, sync_id: str) -> RelationEnd:
        return RelationEnd(
            sync_id=sync_id,
            id=row[f"{prefix}_id"],
            title=row[f"{prefix}_title"],
            type=row[f"{prefix}_type"],
            deleted=row[f"{prefix}_id"] is None or row[f"{prefix}_deleted"] is not None,
        )

    return Relation(
        id=row["id"],
        sync_id=row["sync_id"],
        project=row["project"],
        scope=row["scope"],
        source_id=row["source_id"],
        target_id=row["target_id"],
        relation=row["relation"],
        reason=row["reason"],
        evidence=row["evidence"],
        confidence=row["confidence"],
        judgment_status=row["judgment_status"],
        marked_by_actor=row["marked_by_actor"],
        marked_by_kind=row["marked_by_kind"],
        marked_by_model=row["marked_by_model"],
        session_id=row["session_id"],
        superseded_at=row["superseded_at"],
        superseded_by_relation_id=row["superseded_by_relation_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        state=effective_state(row),
        source=end("s", row["source_id"]),
        target=end("t", row["target_id"]),
    )


def relations_touching(
    conn: sqlite3.Connection, project: str, keys: Sequence[str]
) -> list[Relation]:
    """Every visible relation of ``project`` that names one of the memories ``keys``."""
    found: dict[int, Relation] = {}
    wanted = sorted(set(keys))
    for start in range(0, len(wanted), _LOOKUP_BATCH):
        part = wanted[start : start + _LOOKUP_BATCH]
        marks = ", ".join("?" for _ in part)
        rows = conn.execute(
            f"""SELECT r.*, {_ENDS} FROM {_FROM}
                WHERE r.id IN (
                    SELECT id FROM memory_relations WHERE project = ? AND source_id IN ({marks})
                    UNION
                    SELECT id FROM memory_relations WHERE project = ? AND target_id IN ({marks}))
                ORDER BY r.created_at, r.id""",
            [project, *part, project, *part],
        ).fetchall()
        for row in rows:
            if visible(row):
                found[row["id"]] = relation_from_row(row)
    return sorted(found.values(), key=lambda r: (r.created_at, r.id))


def pair_key(conn: sqlite3.Connection, project: str, a: str, b: str) -> str:
    """The key of the relation between memories ``a`` and ``b``: the one they have (either
    way round; the newest if another version made several), else the pair's derived key."""
    return existing_pair_key(conn, project, a, b) or relation_key(project, a, b)


def existing_pair_key(conn: sqlite3.Connection, project: str, a: str, b: str) -> str | None:
    """The key of a relation the memories ``a`` and ``b`` already have, either way round (the
    newest if another version made several); ``None`` when they have none."""
    # One seek per direction: written as one OR, SQLite read every relation of the project
    # (1.3 ms a pair with 3,600 relations, most of a conflict check's time).
    existing = conn.execute(
        """SELECT sync_id, updated_at FROM memory_relations
             WHERE project = ?1 AND source_id = ?2 AND target_id = ?3
           UNION ALL
           SELECT sync_id, updated_at FROM memory_relations
             WHERE project = ?1 AND source_id = ?3 AND target_id = ?2
           ORDER BY updated_at DESC, sync_id LIMIT 1""",
        (project, a, b),
    ).fetchone()
    return str(existing[0]) if existing else None


def order_superseded(results: list[Observation], successor: dict[int, int]) -> list[Observation]:
    """``results`` with every superseded memory moved right below its successor when both are
    there (``successor``: memory id → the id of the memory that supersedes it). Order is
    otherwise kept; a cycle (two replicas that each made one side win) leaves its members
    where ranking put them."""
    present = {o.id for o in results}
    followers: dict[int, list[Observation]] = {}
    deferred: set[int] = set()
    for obs in results:
        head = successor.get(obs.id)
        if head is not None and head in present and head != obs.id:
            followers.setdefault(head, []).append(obs)
            deferred.add(obs.id)
    placed: set[int] = set()
    ordered: list[Observation] = []

    def place(obs: Observation) -> None:
        stack = [obs]
        while stack:
            item = stack.pop()
            if item.id in placed:
                continue
            placed.add(item.id)
            ordered.append(item)
            stack.extend(reversed(followers.get(item.id, [])))

    for obs in results:
        if obs.id not in deferred:
            place(obs)
    for obs in results:  # members of a cycle: nobody placed them
        if obs.id not in placed:
            place(obs)
    return ordered


class RelationsMixin(StoreBase):
    # --- finding memories -------------------------------------------------------------------

    def _memory_row(
        self, conn: sqlite3.Connection, ref: Any, project: str | None, field: str
    ) -> sqlite3.Row:
        """The live memory ``ref`` names: its ``#id`` (``12``, ``"#12"``), or its sync id
        (within ``project`` when given; a sync id found in several projects needs one)."""
        if isinstance(ref, bool) or ref is None or (isinstance(ref, str) and not ref.strip()):
            raise ValidationError(f"{field} is required: a memory's #id or sync id", field=field)
        text = str(ref).strip().removeprefix("#")
        if isinstance(ref, int) or text.isdigit():
            from engram.store.checks import check_id

            oid = check_id(text, field)
            row: sqlite3.Row | None = conn.execute(
                "SELECT * FROM observations WHERE id = ? AND deleted_at IS NULL", (oid,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"Observation #{oid} not found")
            return row
        require_storable(text, field)
        rows: list[sqlite3.Row]
        if project:
            rows = conn.execute(
                "SELECT * FROM observations WHERE project = ? AND sync_id = ?"
                " AND deleted_at IS NULL",
                (project_name(project), text),
            ).fetchall()
        else:
            rows = conn.execute(
                "SELECT * FROM observations WHERE sync_id = ? AND deleted_at IS NULL", (text,)
            ).fetchall()
        if not rows:
            raise NotFoundError(f"observation {text[:100]!r} not found")
        if len(rows) > 1:
            names = ", ".join(sorted(r["project"] for r in rows))
            raise ValidationError(
                f"{field} {text!r} names a memory in several projects ({names}): "
                "give its #id or a project",
                field=field,
            )
        return rows[0]

    def _relation_row(self, conn: sqlite3.Connection, key: Any, project: str | None) -> sqlite3.Row:
        if not isinstance(key, str) or not key.strip():
            raise ValidationError("give the relation's key (rel-…)", field="relation_id")
        key = key.strip()
        require_storable(key, "relation_id")
        clauses, params = ["r.sync_id = ?"], [key]
        if project:
            clauses.append("r.project = ?")
            params.append(project_name(project))
        rows: list[sqlite3.Row] = conn.execute(
            f"SELECT r.*, {_ENDS} FROM {_FROM} WHERE {' AND '.join(clauses)}", params
        ).fetchall()
        rows = [r for r in rows if visible(r)]
        if not rows:
            raise NotFoundError(f"relation {key[:100]!r} not found")
        if len(rows) > 1:
            raise ValidationError(
                f"relation {key!r} exists in several projects: give a project", field="project"
            )
        return rows[0]

    # --- writing ----------------------------------------------------------------------------

    def relate(
        self,
        source: Any,
        target: Any,
        relation: str,
        *,
        reason: str | None = None,
        evidence: str | None = None,
        confidence: float | None = None,
        status: str = "judged",
        actor: str | None = None,
        kind: str | None = None,
        model: str | None = None,
        session_id: str | None = None,
        project: str | None = None,
    ) -> Relation:
        """Say how memory ``source`` relates to memory ``target`` (both live, one project):
        ``supersedes``, ``conflicts_with``, ``related``, ``compatible``, ``scoped`` or
        ``not_conflict``. A pair has one relation: relating it again replaces what the
        relation said (and may turn it around). Refuses a supersession that would close a
        cycle."""
        kind_name = _check_relation_name(relation)
        status = _check_status(status)
        texts = _check_texts(
            reason=reason,
            evidence=evidence,
            actor=actor,
            kind=kind,
            model=model,
            session_id=session_id,
        )
        score = _check_confidence(confidence)
        with self.db.write() as conn:
            a = self._memory_row(conn, source, project, "source_id")
            b = self._memory_row(conn, target, project, "target_id")
            if a["id"] == b["id"]:
                raise ValidationError("a memory cannot be related to itself", field="target_id")
            if a["project"] != b["project"]:
                raise ValidationError(
                    f"a relation never links two projects: #{a['id']} is in "
                    f"{a['project'] or '(no project)'!r}, #{b['id']} in "
                    f"{b['project'] or '(no project)'!r}",
                    field="target_id",
                )
            name = a["project"]
            key = pair_key(conn, name, a["sync_id"], b["sync_id"])
            if kind_name == "supersedes" and status != "ignored":
                self._refuse_cycle(conn, name, a, b, key)
            personal = "personal" in (a["scope"], b["scope"])
            self._write_relation(
                conn,
                key=key,
                project=name,
                scope="personal" if personal else "project",
                values={
                    "source_id": a["sync_id"],
                    "target_id": b["sync_id"],
                    "relation": kind_name,
                    "judgment_status": status,
                    "confidence": score,
                    "superseded_at": None,
                    "superseded_by_relation_id": None,
                    # A new statement about the pair: nothing of the old one's explanation stays.
                    **dict.fromkeys(_TEXT_FIELDS.values()),
                    **texts,
                },
            )
            return self._load_relation(conn, name, key)

    def judge_relation(
        self,
        relation_id: str,
        status: str = "judged",
        *,
        relation: str | None = None,
        reason: str | None = None,
        evidence: str | None = None,
        confidence: float | None = None,
        actor: str | None = None,
        kind: str | None = None,
        model: str | None = None,
        project: str | None = None,
    ) -> Relation:
        """Judge a relation: confirm it (``judged``, optionally as another ``relation`` kind —
        a conflict judged ``supersedes`` means its source replaces its target), dismiss it
        (``ignored``) or reopen it (``pending``)."""
        status = _check_status(status)
        kind_name = _check_relation_name(relation) if relation is not None else None
        texts = _check_texts(reason=reason, evidence=evidence, actor=actor, kind=kind, model=model)
        score = _check_confidence(confidence)
        with self.db.write() as conn:
            row = self._relation_row(conn, relation_id, project)
            if effective_state(row) == "orphaned":
                raise ValidationError(
                    f"relation {row['sync_id']} is orphaned (one of its memories was deleted); "
                    "nothing to judge",
                    field="relation_id",
                )
            values: dict[str, Any] = {"judgment_status": status, **texts}
            if kind_name is not None:
                values["relation"] = kind_name
            if confidence is not None:
                values["confidence"] = score
            final_kind = kind_name or row["relation"]
            if final_kind == "supersedes" and status != "ignored":
                a = conn.execute(
                    "SELECT * FROM observations WHERE project = ? AND sync_id = ?",
                    (row["project"], row["source_id"]),
                ).fetchone()
                b = conn.execute(
                    "SELECT * FROM observations WHERE project = ? AND sync_id = ?",
                    (row["project"], row["target_id"]),
                ).fetchone()
                self._refuse_cycle(conn, row["project"], a, b, row["sync_id"])
            self._write_relation(
                conn,
                key=row["sync_id"],
                project=row["project"],
                scope=row["scope"],
                values=values,
            )
            return self._load_relation(conn, row["project"], row["sync_id"])

    def _write_relation(
        self,
        conn: sqlite3.Connection,
        *,
        key: str,
        project: str,
        scope: str,
        values: dict[str, Any],
    ) -> None:
        """Create or change the relation ``(project, key)`` and journal its new state, in the
        caller's transaction. Fields not in ``values`` keep their value."""
        now = now_text()
        hlc, origin = self.journal.tick(conn)
        old = self._state(conn, "relation", project, key)
        state: dict[str, Any] = {
            "reason": None,
            "evidence": None,
            "confidence": None,
            "judgment_status": "pending",
            "marked_by_actor": None,
            "marked_by_kind": None,
            "marked_by_model": None,
            "session_id": None,
            "superseded_at": None,
            "superseded_by_relation_id": None,
            "created_at": now,
        }
        if old is not None:
            state.update({k: v for k, v in old.items() if k in RELATION_FIELDS})
        state.update(values)
        state.update(sync_id=key, project=project, updated_at=now, hlc=hlc, scope=scope)
        conn.execute(
            """INSERT INTO memory_relations(sync_id, project, scope, source_id, target_id,
                   relation, reason, evidence, confidence, judgment_status, marked_by_actor,
                   marked_by_kind, marked_by_model, session_id, superseded_at,
                   superseded_by_relation_id, created_at, updated_at, hlc)
               VALUES (:sync_id, :project, :scope, :source_id, :target_id, :relation, :reason,
                   :evidence, :confidence, :judgment_status, :marked_by_actor, :marked_by_kind,
                   :marked_by_model, :session_id, :superseded_at, :superseded_by_relation_id,
                   :created_at, :updated_at, :hlc)
               ON CONFLICT(project, sync_id) DO UPDATE SET scope = excluded.scope,
                   source_id = excluded.source_id, target_id = excluded.target_id,
                   relation = excluded.relation, reason = excluded.reason,
                   evidence = excluded.evidence, confidence = excluded.confidence,
                   judgment_status = excluded.judgment_status,
                   marked_by_actor = excluded.marked_by_actor,
                   marked_by_kind = excluded.marked_by_kind,
                   marked_by_model = excluded.marked_by_model, session_id = excluded.session_id,
                   superseded_at = excluded.superseded_at,
                   superseded_by_relation_id = excluded.superseded_by_relation_id,
                   created_at = excluded.created_at, updated_at = excluded.updated_at,
                   hlc = excluded.hlc""",
            state,
        )
        # Both memories' link counts may have changed (importance, engram/store/links.py).
        scoring.rescore_keys(conn, project, {state["source_id"], state["target_id"]}, now)
        self._journal_state(conn, "relation", project, key, hlc, origin)

    def _supersede(
        self,
        conn: sqlite3.Connection,
        project: str,
        scope: str,
        successor: str,
        replaced: str,
        reason: str,
        model: str,
    ) -> None:
        """Record, in the caller's transaction, that memory ``successor`` supersedes memory
        ``replaced`` (judged, by Engram itself: consolidation's merges)."""
        self._write_relation(
            conn,
            key=pair_key(conn, project, successor, replaced),
            project=project,
            scope=scope,
            values={
                "source_id": successor,
                "target_id": replaced,
                "relation": "supersedes",
                "judgment_status": "judged",
                "confidence": None,
                "superseded_at": None,
                "superseded_by_relation_id": None,
                "reason": reason,
                "evidence": None,
                "marked_by_actor": "engram",
                "marked_by_kind": "system",
                "marked_by_model": model,
                "session_id": None,
            },
        )

    def _end_supersession(
        self, conn: sqlite3.Connection, project: str, successor: str, key: str
    ) -> None:
        """Judge ``ignored`` the active ``supersedes`` relation of ``successor`` over the memory
        ``key`` (a memory merged away by consolidation was restored: nothing replaces it now)."""
        row = conn.execute(
            """SELECT sync_id, scope FROM memory_relations
               WHERE project = ? AND source_id = ? AND target_id = ? AND relation = 'supersedes'
                 AND judgment_status IN ('pending', 'judged') AND superseded_at IS NULL""",
            (project, successor, key),
        ).fetchone()
        if row is not None:
            self._write_relation(
                conn,
                key=row["sync_id"],
                project=project,
                scope=row["scope"],
                values={"judgment_status": "ignored", "reason": "restored: no longer merged"},
            )

    def _refuse_cycle(
        self,
        conn: sqlite3.Connection,
        project: str,
        new: sqlite3.Row,
        old: sqlite3.Row,
        key: str,
    ) -> None:
        """``new`` superseding ``old`` must not close a cycle: refuse when ``old`` already
        supersedes ``new`` through a chain of active supersessions (the relation ``key``, which
        this write replaces, left out)."""
        edges: dict[str, list[str]] = {}
        rows = conn.execute(
            f"""SELECT r.*, {_ENDS} FROM {_FROM}
                WHERE r.project = ? AND r.relation = 'supersedes' AND r.sync_id != ?""",
            (project, key),
        ).fetchall()
        for row in rows:
            if visible(row) and effective_state(row) in ("pending", "judged"):
                edges.setdefault(row["source_id"], []).append(row["target_id"])
        start, goal = old["sync_id"], new["sync_id"]
        parent: dict[str, str | None] = {start: None}
        queue = [start]
        while queue and len(parent) < MAX_CHAIN:
            node = queue.pop(0)
            for nxt in edges.get(node, []):
                if nxt in parent:
                    continue
                parent[nxt] = node
                if nxt == goal:
                    chain = [nxt]
                    step: str | None = node
                    while step is not None:
                        chain.append(step)
                        step = parent[step]
                    names = self._local_names(conn, project, [*reversed(chain), old["sync_id"]])
                    raise ValidationError(
                        f"#{new['id']} superseding #{old['id']} would make a cycle: "
                        f"{' supersedes '.join(names)} already",
                        field="relation",
                    )
                queue.append(nxt)

    @staticmethod
    def _local_names(conn: sqlite3.Connection, project: str, keys: Iterable[str]) -> list[str]:
        names = []
        for key in keys:
            row = conn.execute(
                "SELECT id FROM observations WHERE project = ? AND sync_id = ?", (project, key)
            ).fetchone()
            names.append(f"#{row[0]}" if row else key)
        return names

    # --- reading ----------------------------------------------------------------------------

    def _load_relation(self, conn: sqlite3.Connection, project: str, key: str) -> Relation:
        row = conn.execute(
            f"SELECT r.*, {_ENDS} FROM {_FROM} WHERE r.project = ? AND r.sync_id = ?",
            (project, key),
        ).fetchone()
        return relation_from_row(row)

    def get_relation(self, relation_id: str, *, project: str | None = None) -> Relation:
        """One relation by its key (``rel-…``)."""
        with self.db.read() as conn:
            return relation_from_row(self._relation_row(conn, relation_id, project))

    def relations_for(self, memory: Any, *, project: str | None = None) -> MemoryRelations:
        """A live memory (``#id`` or sync id) with every relation naming it, oldest first.
        Pending conflict checks run first, so a memory saved a moment ago already shows
        what it contradicts."""
        self.settle_conflicts()  # type: ignore[attr-defined]
        with self.db.read() as conn:
            row = self._memory_row(conn, memory, project, "id")
            found = relations_touching(conn, row["project"], [row["sync_id"]])
        return MemoryRelations(
            id=row["id"], sync_id=row["sync_id"], project=row["project"], title=row["title"],
            needs_review=_needs_review(found), relations=found,
        )  # fmt: skip

    def relations_of(self, sync_id: str, *, project: str | None = None) -> list[dict[str, str]]:
        """The active relations of the memory ``sync_id`` as ``{"type", "target"}`` (what the
        vault writes as wikilinks): ``supersedes`` from the successor, ``superseded_by``
        from the memory it replaced; ``conflicts_with`` / ``contested_by`` likewise."""
        inverse = {"supersedes": "superseded_by", "conflicts_with": "contested_by"}
        with self.db.read() as conn:
            if project is None:
                row = conn.execute(
                    """SELECT project FROM observations WHERE sync_id = ?
                       ORDER BY updated_at DESC, id DESC LIMIT 1""",
                    (sync_id,),
                ).fetchone()
                if row is None:
                    return []
                project = row[0]
            found = relations_touching(conn, project_name(project), [sync_id])
        out = []
        for rel in found:
            if not rel.active:
                continue
            if rel.source_id == sync_id:
                out.append({"type": rel.relation, "target": rel.target_id})
            else:
                out.append(
                    {"type": inverse.get(rel.relation, rel.relation), "target": rel.source_id}
                )
        return out

    def relation_count(self, memory_id: Any) -> int:
        """How many active relations link a live memory to others (importance counts them as
        links)."""
        with self.db.read() as conn:
            row = self._memory_row(conn, memory_id, None, "id")
            return sum(r.active for r in relations_touching(conn, row["project"], [row["sync_id"]]))

    def relation_counts(self, memory_ids: Iterable[int]) -> dict[int, int]:
        """:meth:`relation_count` of many memories at once (ids not live are left out)."""
        wanted = sorted({int(i) for i in memory_ids})
        counts: dict[int, int] = {}
        with self.db.read() as conn:
            keys: dict[str, dict[str, int]] = {}
            for start in range(0, len(wanted), _LOOKUP_BATCH):
                part = wanted[start : start + _LOOKUP_BATCH]
                for oid, project, key in conn.execute(
                    f"""SELECT id, project, sync_id FROM observations
                        WHERE id IN ({", ".join("?" for _ in part)}) AND deleted_at IS NULL""",
                    part,
                ):
                    keys.setdefault(project, {})[key] = oid
                    counts[oid] = 0
            for project, by_key in keys.items():
                for rel in relations_touching(conn, project, list(by_key)):
                    if not rel.active:
                        continue
                    for end in (rel.source_id, rel.target_id):
                        if end in by_key:
                            counts[by_key[end]] += 1
        return counts

    def review_queue(self, project: str | None = None, limit: int = 50) -> list[Relation]:
        """Pending conflicts (both memories need review), newest first."""
        clauses = ["r.relation = 'conflicts_with'", "r.judgment_status = 'pending'"]
        params: list[Any] = []
        if project:
            clauses.append("r.project = ?")
            params.append(project_name(project))
        with self.db.read() as conn:
            rows = conn.execute(
                f"""SELECT r.*, {_ENDS} FROM {_FROM} WHERE {" AND ".join(clauses)}
                    ORDER BY r.updated_at DESC, r.sync_id""",
                params,
            ).fetchall()
        found = [relation_from_row(r) for r in rows if visible(r)]
        return [r for r in found if r.state == "pending"][: max(1, int(limit))]

    def list_relations(
        self, project: str | None = None, *, limit: int = 200, offset: int = 0
    ) -> list[Relation]:
        """Relations (of one project, or all), newest first."""
        clauses, params = ["1"], []
        if project:
            clauses.append("r.project = ?")
            params.append(project_name(project))
        with self.db.read() as conn:
            rows = conn.execute(
                f"""SELECT r.*, {_ENDS} FROM {_FROM} WHERE {" AND ".join(clauses)}
                    ORDER BY r.updated_at DESC, r.sync_id LIMIT ? OFFSET ?""",
                [*params, max(1, int(limit)), max(0, int(offset))],
            ).fetchall()
        return [relation_from_row(r) for r in rows if visible(r)]

    # --- what relations mean for search results ---------------------------------------------

    def annotate_results(
        self, results: list[Observation], *, check_conflicts: bool = False
    ) -> list[Observation]:
        """The step search applies after ranking: each result gets its active supersessions and
        conflicts as one-line notes (``Observation.relations``), and a superseded memory moves
        right below its successor when both are in the results. ``check_conflicts``: run the
        queued conflict checks first (within the read budget, see :meth:`settle_conflicts`)."""
        if not results:
            return results
        if check_conflicts:
            self.settle_conflicts()  # type: ignore[attr-defined]
        with self.db.read() as conn:
            # (Most stores hold no relation: one probe instead of a lookup per project.)
            if conn.execute("SELECT 1 FROM memory_relations LIMIT 1").fetchone() is None:
                for obs in results:
                    obs.relations = []
                return results
            by_project: dict[str, list[str]] = {}
            for obs in results:
                by_project.setdefault(obs.project, []).append(obs.sync_id)
            found = {
                project: relations_touching(conn, project, keys)
                for project, keys in by_project.items()
            }
        successor: dict[int, int] = {}
        for obs in results:
            notes = []
            for rel in found.get(obs.project, []):
                if not rel.active or rel.relation not in ANNOTATED:
                    continue
                if obs.sync_id not in (rel.source_id, rel.target_id):
                    continue
                notes.append(rel.summary(obs.sync_id))
                superseded = rel.relation == "supersedes" and rel.target_id == obs.sync_id
                if superseded and rel.source.id is not None:
                    successor.setdefault(obs.id, rel.source.id)
            obs.relations = notes
        return order_superseded(results, successor) if successor else results


def _needs_review(found: list[Relation]) -> bool:
    return any(r.relation == "conflicts_with" and r.state == "pending" for r in found)


def _one_of(value: Any, choices: Sequence[str], field: str) -> str:
    """``value`` as one of ``choices`` (any case, spaces around ignored), else a
    ValidationError naming ``field``."""
    name = value.strip().lower() if isinstance(value, str) else ""
    if name not in choices:
        raise ValidationError(
            f"{field} must be one of {', '.join(choices)}, got {value!r}", field=field
        )
    return name


def _check_relation_name(value: Any) -> str:
    return _one_of(value, RELATION_TYPES, "relation")


def _check_status(value: Any) -> str:
    return _one_of(value, SETTABLE_STATUSES, "status")


def _check_confidence(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValidationError(
            f"confidence must be a number from 0 to 1, got {value!r}", field="confidence"
        )
    return float(value)


_TEXT_FIELDS = {
    "reason": "reason",
    "evidence": "evidence",
    "actor": "marked_by_actor",
    "kind": "marked_by_kind",
    "model": "marked_by_model",
    "session_id": "session_id",
}


def _check_texts(**given: str | None) -> dict[str, str | None]:
    """The optional texts of a relation write, checked, under their column names (only those
    given: the others keep their value)."""
    out: dict[str, str | None] = {}
    for name, value in given.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValidationError(f"{name} must be text", field=name)
        require_storable(value, name)
        value = value.strip()
        if len(value) > MAX_REASON_CHARS:
            raise ValidationError(
                f"{name} is {len(value):,} characters, over the {MAX_REASON_CHARS:,} allowed",
                field=name,
            )
        out[_TEXT_FIELDS[name]] = value or None
    return out
