"""``Store.consolidate``: the first seed's "Dream Cycle" over the local store — re-score every
memory, merge near-duplicates, archive what fell below the importance threshold, and report
exactly what was done (docs/importance.md).

Every change is an ordinary journaled write (an upsert of the merged memory, soft deletes with
the reason ``archived``), so it syncs and converges like any edit, and an archived memory can be
restored. Each merge is one transaction and archives go in small batches, each step checking
that its memories did not change since the plan was made: a consolidation stopped half-way
(Ctrl-C, a crash, a concurrent edit) leaves every memory either as it was or fully merged, and
the next run carries on. A dry run writes nothing at all (not even scores or access counts).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engram import importance
from engram.errors import ValidationError
from engram.project import normalize_project
from engram.store import fts, scoring, vector_queue
from engram.store.base import StoreBase, drop_tombstone
from engram.store.links import LINKS_SQL
from engram.store.search_context import ContextRefresh, derive
from engram.text import normalized_hash
from engram.times import STORE_FORMAT, now_text

if TYPE_CHECKING:  # the planning modules load only when a consolidation runs
    from engram.consolidate import merge as merging
    from engram.consolidate.report import ConsolidationReport, ReportedMemory

#: Memory types never merged: each session summary records one session.
NEVER_MERGED = frozenset({"session_summary"})
ARCHIVE_BATCH = 200
Progress = Callable[[str, int, int], None]

_LOAD = f"""SELECT o.id, o.sync_id, o.project, o.scope, o.type, o.title, o.content,
               o.topic_key, o.tool_name, o.session_id, o.created_at, o.updated_at,
               o.valid_from, o.duplicate_count, o.importance_override, o.importance,
               o.pinned, o.hlc, o.reviewed_at, o.access_count, {LINKS_SQL} AS links
            FROM observations o WHERE o.deleted_at IS NULL"""


class ConsolidationMixin(StoreBase):
    def consolidate(
        self,
        project: str | None = None,
        *,
        dry_run: bool = False,
        max_changes: int | None = None,
        threshold: float | None = None,
        similarity: float | None = None,
        merge_provider: Any = None,
        progress: Progress | None = None,
    ) -> ConsolidationReport:
        """Consolidate one project's memories (every project's when ``project`` is None).

        ``max_changes`` caps how many memories change (each merged-away or archived memory
        counts one; a merge is done whole or not at all); ``threshold`` is the importance below
        which an unpinned memory is archived (default ``Config.archive_threshold``);
        ``similarity`` the bar for duplicates (0-1); ``merge_provider`` an LLM provider that
        rewrites each merged text (off by default: the deterministic merge is used).
        """
        from engram.consolidate.report import (
            ArchiveStep,
            ConsolidationReport,
            MergeStep,
            ReportedMemory,
        )
        from engram.consolidate.similarity import DEFAULT_SIMILARITY

        started = time.perf_counter()
        bar = _check_fraction(
            self.config.archive_threshold if threshold is None else threshold, "threshold"
        )
        likeness = _check_fraction(
            DEFAULT_SIMILARITY if similarity is None else similarity, "similarity"
        )
        if likeness <= 0:
            raise ValidationError("similarity must be above 0", field="similarity")
        budget = _check_max(max_changes)
        name = None if project is None else normalize_project(project)[0]
        report = ConsolidationReport.start(
            name, dry_run=dry_run, threshold=bar, similarity=likeness
        )
        if merge_provider is not None:
            report.merge_provider = str(getattr(merge_provider, "name", "llm"))
        now = now_text()
        where, params = ("o.project = ?", [name]) if name is not None else ("1", [])

        if dry_run:
            rows = self._scored_in_memory(where, params, now)
            report.rescored = len(rows)
        else:
            self.access.fold()
            with self.db.write() as conn:
                report.rescored = scoring.rescore_where(
                    conn, f"o.deleted_at IS NULL AND {where}", params, now
                )
            rows = [dict(r) for r in self.db.rows(f"{_LOAD} AND {where}", params)]
            for row in rows:
                row["score"] = importance.effective(row["importance_override"], row["importance"])
        report.processed = len(rows)
        if progress is not None:
            progress("scored", len(rows), len(rows))

        plans = self._plan_merges(rows, likeness, progress)
        grouped = {row["id"] for plan in plans for row in plan[1]}
        for row in rows:
            if row["pinned"] and row["score"] < bar:
                report.pinned_kept += 1
        doomed = sorted(
            (r for r in rows if not r["pinned"] and r["id"] not in grouped and r["score"] < bar),
            key=lambda r: (r["score"], r["sync_id"]),
        )

        for merged, sources, low in plans:
            if merge_provider is not None:
                merged = _llm_merge(merge_provider, merged, sources, report)
            step = MergeStep(
                merged=ReportedMemory(id=0, sync_id=merged.key, title=merged.title, importance=0.0),
                sources=[_ref(r) for r in sources],
                project=sources[0]["project"],
                status="planned",
                similarity=round(low, 3),
            )
            report.merges.append(step)
            if budget is not None and len(sources) > budget:
                step.status, budget = "over_max", 0
                report.over_max += 1
                continue
            if budget is not None:
                budget -= len(sources)
            if dry_run:
                report.merged += len(sources)
                report.merged_into += 1
                continue
            merged_id = self._apply_merge(merged, sources, sources[0]["scope"])
            if merged_id is None:
                step.status = "skipped"
                report.skipped += 1
            else:
                step.status = "merged"
                kept = self.db.one("SELECT importance FROM observations WHERE id = ?", (merged_id,))
                step.merged.id = merged_id
                step.merged.importance = float(kept[0] or 0) if kept else 0.0
                report.merged += len(sources)
                report.merged_into += 1
            if progress is not None:
                progress("merged", len(report.merges), len(plans))

        archives = [
            ArchiveStep(memory=_ref(r), project=r["project"], status="planned") for r in doomed
        ]
        report.archives = archives
        allowed = archives if budget is None else archives[:budget]
        for archive in archives[len(allowed) :]:
            archive.status = "over_max"
            report.over_max += 1
        if dry_run:
            report.archived = len(allowed)
        else:
            by_id = {r["id"]: r for r in doomed}
            for start in range(0, len(allowed), ARCHIVE_BATCH):
                batch = allowed[start : start + ARCHIVE_BATCH]
                done = self._apply_archives([by_id[a.memory.id] for a in batch], bar)
                for archive in batch:
                    archive.status = "archived" if archive.memory.id in done else "skipped"
                report.archived += len(done)
                report.skipped += len(batch) - len(done)
                if progress is not None:
                    progress("archived", start + len(batch), len(allowed))
        report.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        return report

    # --- planning ------------------------------------------------------------------------------

    def _scored_in_memory(self, where: str, params: list[Any], now: str) -> list[dict[str, Any]]:
        """The memories with the score a re-scoring would give them now (nothing written)."""
        pending = self.access.pending_counts()
        moment = datetime.strptime(now, STORE_FORMAT).replace(tzinfo=UTC)
        rows = [dict(r) for r in self.db.rows(f"{_LOAD} AND {where}", params)]
        for row in rows:
            accesses = row["access_count"] + pending.get((row["project"], row["sync_id"]), 0)
            changed = max(row["updated_at"], row["reviewed_at"] or "")
            computed = importance.compute(
                row["content"], row["topic_key"], row["type"], row["links"], changed, accesses,
                moment,
            )  # fmt: skip
            row["score"] = importance.effective(row["importance_override"], computed)
        return rows

    def _plan_merges(
        self, rows: list[dict[str, Any]], likeness: float, progress: Progress | None
    ) -> list[tuple[merging.Merged, list[dict[str, Any]], float]]:
        """Each group of near-duplicates: its merged memory, its sources, their lowest
        similarity. Pinned memories and session summaries are never merged."""
        from engram.consolidate import merge as merging
        from engram.consolidate.similarity import SAME_TOPIC_SIMILARITY, Item, find_groups

        candidates = sorted(
            (r for r in rows if not r["pinned"] and r["type"] not in NEVER_MERGED),
            key=lambda r: (r["project"], r["sync_id"]),
        )
        items = [
            Item(
                key=r["sync_id"],
                block=(r["project"], r["scope"]),
                text=f"{r['title']}\n{r['content']}",
                topic_key=r["topic_key"],
            )
            for r in candidates
        ]

        def tick(done: int, total: int) -> None:
            if progress is not None:
                progress("compared", done, total)

        topic_bar = min(SAME_TOPIC_SIMILARITY, likeness)
        embedding = self._embedding_similarity([r["id"] for r in candidates])
        groups = find_groups(
            items, similarity=likeness, topic_similarity=topic_bar, embedding=embedding,
            progress=tick,
        )  # fmt: skip
        plans = []
        for group in groups:
            sources = [candidates[i] for i in group.members]
            merged = merging.merge(sources[0]["project"], [_source(r) for r in sources])
            plans.append((merged, sources, group.lowest))
        return plans

    def _embedding_similarity(self, ids: list[int]) -> Callable[[int, int], float | None] | None:
        """With the semantic extra, the cosine similarity of two candidates' stored vectors
        (by their index in ``ids``). Only vectors already made are used: consolidation never
        runs the model (``engram vectorize`` or searches fill them in)."""
        from engram import semantic

        if not semantic.available() or not ids:
            return None
        try:
            model = semantic.model_id()
        except Exception:  # a damaged install: words alone still work
            return None
        import numpy as np

        position = {oid: i for i, oid in enumerate(ids)}
        found: dict[int, Any] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" for _ in part)
            for oid, blob in self.db.rows(
                f"SELECT obs_id, vector FROM observation_vectors WHERE model = ?"
                f" AND obs_id IN ({marks})",
                [model, *part],
            ):
                found[position[oid]] = np.frombuffer(blob, dtype="<f4")
        if not found:
            return None

        def cosine(i: int, j: int) -> float | None:
            a, b = found.get(i), found.get(j)
            return None if a is None or b is None else float(a @ b)

        return cosine

    # --- applying ------------------------------------------------------------------------------

    def _apply_merge(
        self, merged: merging.Merged, sources: list[dict[str, Any]], scope: str
    ) -> int | None:
        """Write the merged memory and archive its sources, in one transaction; ``None`` (and
        nothing written) when a source changed since the plan."""
        project = sources[0]["project"]
        with self.db.write() as conn:
            if not _unchanged(conn, sources):
                return None
            now = now_text()
            self._ensure_session(conn, merged.session_id, project)
            hlc, origin = self.journal.tick(conn)
            refresh = ContextRefresh(conn)
            values = {
                "sync_id": merged.key, "session_id": merged.session_id, "type": merged.type,
                "title": merged.title, "content": merged.content, "tool_name": merged.tool_name,
                "project": project, "scope": scope, "topic_key": merged.topic_key,
                "normalized_hash": normalized_hash(merged.content),
                "duplicate_count": merged.duplicate_count, "now": now, "hlc": hlc,
                "importance_override": merged.importance_override,
                "search_context": derive(conn, session_id=merged.session_id, project=project,
                                         scope=scope, created_at=now, sync_id=merged.key),
            }  # fmt: skip
            existing = conn.execute(
                "SELECT id FROM observations WHERE project = ? AND sync_id = ?",
                (project, merged.key),
            ).fetchone()
            if existing is not None:  # merged before (its sources were restored since)
                rowid = int(existing[0])
                refresh.observation(rowid)
                fts.remove(conn, "observations", "id", rowid)
                conn.execute(
                    """UPDATE observations SET session_id = :session_id, type = :type,
                           title = :title, content = :content, tool_name = :tool_name,
                           scope = :scope, topic_key = :topic_key,
                           normalized_hash = :normalized_hash,
                           revision_count = revision_count + 1,
                           duplicate_count = :duplicate_count, last_seen_at = :now,
                           updated_at = :now, deleted_at = NULL, delete_reason = NULL,
                           superseded_by = NULL, valid_to = NULL, valid_from = NULL,
                           importance_override = :importance_override, hlc = :hlc
                       WHERE id = :id""",
                    {**values, "id": rowid},
                )
                fts.restore(conn, "observations", "id", rowid)
            else:
                drop_tombstone(conn, "observation", project, merged.key)
                cursor = conn.execute(
                    """INSERT INTO observations(sync_id, session_id, type, title, content,
                           tool_name, project, scope, topic_key, normalized_hash,
                           revision_count, duplicate_count, last_seen_at, created_at,
                           updated_at, search_context, hlc, importance_override)
                       VALUES (:sync_id, :session_id, :type, :title, :content, :tool_name,
                           :project, :scope, :topic_key, :normalized_hash, 1,
                           :duplicate_count, :now, :now, :now, :search_context, :hlc,
                           :importance_override)""",
                    values,
                )
                rowid = int(cursor.lastrowid or 0)
                fts.add(conn, "observations", rowid, values)
                refresh.inserted(rowid, {**values, "created_at": now})
            self._journal_state(conn, "observation", project, merged.key, hlc, origin)
            # Each source is superseded by the merged memory: archived, restorable, and no
            # longer true from now on, when the merged memory's validity starts (an as-of
            # search before now still finds the sources, after it only the merged memory).
            for source in sources:
                hlc, origin = self.journal.tick(conn)
                refresh.observation(source["id"])
                vector_queue.forget_deleted(conn, "id", source["id"])
                conn.execute(
                    """UPDATE observations SET deleted_at = ?, updated_at = ?, hlc = ?,
                           delete_reason = 'archived', superseded_by = ?,
                           valid_to = CASE WHEN valid_to IS NULL OR valid_to > ? THEN ?
                                           ELSE valid_to END
                       WHERE id = ?""",
                    (now, now, hlc, merged.key, now, now, source["id"]),
                )
                self._journal_state(conn, "observation", project, source["sync_id"], hlc, origin)
                # The link itself is a relation of the memory graph (one relation model,
                # docs/graph.md): it replicates as its own record, and counts as a link.
                self._supersede(  # type: ignore[attr-defined]
                    conn, project, "personal" if scope == "personal" else "project",
                    merged.key, source["sync_id"], "merged by consolidation", "consolidation",
                )  # fmt: skip
            refresh.settle()  # the merged memory and its sources' neighbours: contexts anew
            written = [rowid, *(s["id"] for s in sources)]
            scoring.rescore_ids(conn, written, now)
            # The memories related to the sources lose a link (archived, they end their
            # relations but a supersession), and those related to a merged memory brought back
            # gain one: re-scored in this transaction, as an archive does.
            scoring.rescore_linked(conn, written, now)
        return rowid

    def _apply_archives(self, rows: list[dict[str, Any]], bar: float) -> set[int]:
        """Archive these memories (one transaction); the ids actually archived — a memory that
        changed since the plan, got pinned or rose above the bar is left alone."""
        done: set[int] = set()
        with self.db.write() as conn:
            now = now_text()
            refresh = ContextRefresh(conn)
            for row in rows:
                current = conn.execute(
                    """SELECT hlc, pinned, deleted_at, importance, importance_override
                       FROM observations WHERE id = ?""",
                    (row["id"],),
                ).fetchone()
                if (
                    current is None
                    or current["hlc"] != row["hlc"]
                    or current["pinned"]
                    or current["deleted_at"] is not None
                    or importance.effective(current["importance_override"], current["importance"])
                    >= bar
                ):
                    continue
                hlc, origin = self.journal.tick(conn)
                refresh.observation(row["id"])
                vector_queue.forget_deleted(conn, "id", row["id"])
                conn.execute(
                    """UPDATE observations SET deleted_at = ?, updated_at = ?, hlc = ?,
                           delete_reason = 'archived' WHERE id = ?""",
                    (now, now, hlc, row["id"]),
                )
                self._journal_state(conn, "observation", row["project"], row["sync_id"], hlc,
                                    origin)  # fmt: skip
                done.add(row["id"])
            refresh.settle()  # no archived text stays in a neighbour's session context
            scoring.rescore_linked(conn, done, now)  # the memories related to them lose a link
        return done


def _unchanged(conn: sqlite3.Connection, sources: list[dict[str, Any]]) -> bool:
    """Whether every source is still live, unpinned and at the clock the plan saw."""
    for source in sources:
        row = conn.execute(
            "SELECT hlc, pinned, deleted_at FROM observations WHERE id = ?", (source["id"],)
        ).fetchone()
        if row is None or row[0] != source["hlc"] or row[1] or row[2] is not None:
            return False
    return True


def _ref(row: dict[str, Any]) -> ReportedMemory:
    from engram.consolidate.report import ReportedMemory

    return ReportedMemory(
        id=row["id"], sync_id=row["sync_id"], title=row["title"],
        importance=round(float(row["score"]), 4),
    )  # fmt: skip


def _source(row: dict[str, Any]) -> merging.Source:
    from engram.consolidate import merge as merging

    return merging.Source(
        key=row["sync_id"],
        title=row["title"],
        content=row["content"],
        type=row["type"],
        topic_key=row["topic_key"],
        tool_name=row["tool_name"],
        session_id=row["session_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        valid_from=row["valid_from"],
        duplicate_count=int(row["duplicate_count"] or 1),
        importance_override=row["importance_override"],
    )


def _check_fraction(value: Any, field: str) -> float:
    return importance.check_importance(value, field)


def _check_max(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"max must be a whole number, got {value!r}", field="max")
    if value < 1:
        raise ValidationError(f"max must be at least 1, got {value}", field="max")
    return value


def _llm_merge(
    provider: Any, merged: merging.Merged, sources: list[dict[str, Any]], report: Any
) -> merging.Merged:
    """The merged text rewritten by an LLM (what leaves the machine is prompt-safe); on any
    failure the deterministic text stays and the report says why."""
    from dataclasses import replace

    from engram.ingest.summarize import prompt_safe

    system = (
        "You merge near-duplicate notes of a software team into one note. Keep every distinct "
        "fact, number, name, file and command; drop only repetition. Keep the **What** / "
        "**Why** / **Where** / **Learned** structure when the notes use it. Answer with the "
        "merged note's text only."
    )
    prompt = "\n\n---\n\n".join(
        f"Note {i}: {prompt_safe(s['title'])}\n{prompt_safe(s['content'])}"
        for i, s in enumerate(sources, 1)
    )
    try:
        text = provider.complete(system, prompt).strip()
    except Exception as exc:  # the deterministic merge is always there to fall back on
        report.warnings.append(f"LLM merge of {merged.key} failed ({exc}); kept the plain merge")
        return merged
    if not text:
        report.warnings.append(f"LLM merge of {merged.key} was empty; kept the plain merge")
        return merged
    return replace(merged, content=text)
