"""Project sync controls (pause) and the sync audit log.

A paused project's pushes are refused with 409 ``sync-paused`` and leave an audit row; pulls keep
working and are never audited. A project without a controls row is enabled. Every push also
leaves an audit row per project saying who pushed how many mutations with which outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, func, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from engram_cloud import models
from engram_cloud.principals import iso

OUTCOME_ACCEPTED = "accepted"
OUTCOME_PAUSED = "rejected_project_paused"
OUTCOME_FORBIDDEN = "rejected_forbidden"


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
) -> None:
    conn.execute(
        insert(models.sync_audit_log).values(
            contributor=contributor,
            project=project,
            action=action,
            outcome=outcome,
            entry_count=entry_count,
            reason_code=reason_code,
            principal_id=principal_id,
            metadata=metadata,
        )
    )


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
