"""Project sync controls (pause) and the sync audit log.

A paused project's pushes are refused with 409 ``sync-paused``; pulls keep working and are never
audited. A project without a controls row is enabled. An accepted push leaves an audit row per
project saying who pushed how many mutations; a **refused** push leaves exactly one row, however
many projects it named (the first refused project, the counts of projects and records, and up to
:data:`MAX_NAMED` names in its metadata), so a hostile client cannot multiply rows by naming
projects.

The log is bounded (``ENGRAM_CLOUD_AUDIT_RETENTION_DAYS`` / ``ENGRAM_CLOUD_AUDIT_MAX_ROWS``):
every :data:`PRUNE_EVERY`-th row written triggers :func:`prune_audit`, which drops rows older
than the retention and all but the newest ``max_rows``; the server also prunes at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from engram.errors import ValidationError
from engram.text import unstorable_reason
from engram.times import iso
from engram_cloud import models

if TYPE_CHECKING:
    from engram_cloud.settings import Settings

OUTCOME_ACCEPTED = "accepted"
OUTCOME_PAUSED = "rejected_project_paused"
OUTCOME_FORBIDDEN = "rejected_forbidden"
MAX_NAMED = 20  # project names kept in a refusal's metadata
PRUNE_EVERY = 200  # audit rows between two prunes (by id, so every server process agrees)


@dataclass(frozen=True, slots=True)
class AuditLimits:
    """How much audit log the server keeps (from the settings)."""

    retention_days: int
    max_rows: int

    @classmethod
    def of(cls, settings: Settings) -> AuditLimits:
        return cls(settings.audit_retention_days, settings.audit_max_rows)


def paused_projects(conn: Connection, projects: Iterable[str]) -> dict[str, str | None]:
    """The paused ones among ``projects``, with their reasons."""
    names = sorted(set(projects))
    if not names:
        return {}
    c = models.project_controls
    rows = conn.execute(
        select(c.c.project, c.c.paused_reason).where(
            c.c.project.in_(names), c.c.sync_enabled.is_(False)
        )
    )
    return {project: reason for project, reason in rows}


def set_sync_enabled(
    conn: Connection, project: str, enabled: bool, *, reason: str | None, updated_by: str
) -> dict[str, Any]:
    """Pause (``enabled=False``) or resume a project; resuming clears the reason."""
    for field, value in (("project", project), ("reason", reason)):
        if value and (problem := unstorable_reason(value)):
            raise ValidationError(f"{field} {problem}", field=field)
    c = models.project_controls
    values = {
        "project": project,
        "sync_enabled": enabled,
        "paused_reason": None if enabled else ((reason or "").strip() or None),
        "updated_by": updated_by,
        "updated_at": func.now(),
    }
    stmt = pg_insert(c).values(**values)
    row = conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["project"],
            set_={k: stmt.excluded[k] for k in values if k != "project"},
        ).returning(*c.c)
    ).one()
    return control_dict(row)


def control_dict(row: Any) -> dict[str, Any]:
    return {
        "project": row.project,
        "sync_enabled": row.sync_enabled,
        "paused_reason": row.paused_reason,
        "updated_by": row.updated_by,
        "updated_at": iso(row.updated_at),
    }


def list_controls(conn: Connection) -> list[dict[str, Any]]:
    c = models.project_controls
    return [control_dict(r) for r in conn.execute(select(c).order_by(c.c.project))]


def audit(
    conn: Connection,
    *,
    contributor: str,
    project: str,
    action: str,
    outcome: str,
    entry_count: int,
    reason_code: str | None = None,
    principal_id: int | None = None,
    metadata: dict[str, Any] | None = None,
    limits: AuditLimits | None = None,
) -> None:
    """Write one audit row (and prune the log when its turn comes, given ``limits``)."""
    write_audit(
        conn,
        [
            {
                "contributor": contributor,
                "project": project,
                "action": action,
                "outcome": outcome,
                "entry_count": entry_count,
                "reason_code": reason_code,
                "principal_id": principal_id,
                "metadata": metadata,
            }
        ],
        limits,
    )


def write_audit(
    conn: Connection, rows: list[dict[str, Any]], limits: AuditLimits | None = None
) -> None:
    """Write audit rows in one statement; prune when one of their ids is a multiple of
    :data:`PRUNE_EVERY` (and ``limits`` are given)."""
    if not rows:
        return
    a = models.sync_audit_log
    full = [{"reason_code": None, "principal_id": None, "metadata": None, **row} for row in rows]
    ids = conn.execute(insert(a).returning(a.c.id), full).scalars().all()
    if limits is not None and any(i % PRUNE_EVERY == 0 for i in ids):
        prune_audit(conn, limits)


def audit_refusal(
    conn: Connection,
    *,
    contributor: str,
    action: str,
    outcome: str,
    reason_code: str,
    refused: Mapping[str, int],
    submitted: int,
    principal_id: int | None,
    limits: AuditLimits | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """The one audit row of a refused request: ``refused`` maps each refused project to its
    record count; the row names the first, and counts the rest."""
    names = sorted(refused)
    audit(
        conn,
        contributor=contributor,
        project=names[0][:200],
        action=action,
        outcome=outcome,
        entry_count=sum(refused.values()),
        reason_code=reason_code,
        principal_id=principal_id,
        metadata={
            "projects": len(names),
            "project_names": [n[:200] for n in names[:MAX_NAMED]],
            "submitted": submitted,
            **(extra or {}),
        },
        limits=limits,
    )


def prune_audit(conn: Connection, limits: AuditLimits) -> int:
    """Drop audit rows older than the retention, then all but the newest ``max_rows``; the
    number of rows removed."""
    a = models.sync_audit_log
    removed = conn.execute(
        delete(a).where(
            a.c.occurred_at < func.now() - func.make_interval(0, 0, 0, limits.retention_days)
        )
    ).rowcount
    newest = conn.execute(select(func.max(a.c.id))).scalar_one()
    if newest is not None:
        removed += conn.execute(delete(a).where(a.c.id <= newest - limits.max_rows)).rowcount
    return removed


def audit_rows(
    conn: Connection,
    *,
    project: str | None = None,
    contributor: str | None = None,
    outcome: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The newest audit rows first, optionally filtered."""
    a = models.sync_audit_log
    query = select(a).order_by(a.c.occurred_at.desc(), a.c.id.desc()).limit(limit)
    if project is not None:
        query = query.where(a.c.project == project)
    if contributor is not None:
        query = query.where(a.c.contributor == contributor)
    if outcome is not None:
        query = query.where(a.c.outcome == outcome)
    return [
        {
            "id": r.id,
            "occurred_at": iso(r.occurred_at),
            "contributor": r.contributor,
            "project": r.project,
            "action": r.action,
            "outcome": r.outcome,
            "entry_count": r.entry_count,
            "reason_code": r.reason_code,
            "principal_id": r.principal_id,
            "metadata": r.metadata,
        }
        for r in conn.execute(query)
    ]
