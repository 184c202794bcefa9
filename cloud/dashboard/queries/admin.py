"""Queries of the admin pages: the sync audit log, the projects an admin may control, and the
counts of the health page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, func, literal, select, text

from engram_cloud import models
from engram_cloud.dashboard.queries import common
from engram_cloud.dashboard.queries.common import Page, Paging, clamped, known_projects
from engram_cloud.dashboard.queries.projects import project_controls
from engram_cloud.settings import Settings

# --- admin ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditFilter:
    contributor: str = ""
    project: str = ""
    outcome: str = ""
    since: datetime | None = None
    until: datetime | None = None  # exclusive


def audit_log(conn: Connection, flt: AuditFilter, paging: Paging) -> Page:
    """The sync audit log, newest first."""
    a = models.sync_audit_log
    conds: list[ColumnElement[bool]] = []
    if flt.contributor:
        conds.append(a.c.contributor == flt.contributor)
    if flt.project:
        conds.append(a.c.project == flt.project)
    if flt.outcome:
        conds.append(a.c.outcome == flt.outcome)
    if flt.since is not None:
        conds.append(a.c.occurred_at >= flt.since)
    if flt.until is not None:
        conds.append(a.c.occurred_at < flt.until)
    # select_from: with no filter there is no condition naming the table, and a bare SELECT 1
    # counts one row (the pager read "1–11 of 1").
    inner = select(literal(1)).select_from(a).where(*conds).limit(common.COUNT_CAP + 1).subquery()
    total = int(conn.execute(select(func.count()).select_from(inner)).scalar_one())
    capped = total > common.COUNT_CAP
    total = min(total, common.COUNT_CAP)
    paging = clamped(paging, total)
    rows = conn.execute(
        select(a)
        .where(*conds)
        .order_by(a.c.occurred_at.desc(), a.c.id.desc())
        .offset(paging.offset)
        .limit(paging.size)
    ).all()
    return Page(rows, paging, total, capped)


def audit_outcomes(conn: Connection) -> list[str]:
    a = models.sync_audit_log
    return list(conn.execute(select(a.c.outcome).distinct().order_by(a.c.outcome)).scalars())


def admin_projects(conn: Connection, settings: Settings) -> list[tuple[str, Any | None]]:
    """Every project an admin may control: what the read model holds, what has a control row,
    and the allowlist's explicit names; each with its control row (``None`` = never paused)."""
    controls = project_controls(conn)
    names = set(known_projects(conn)) | set(controls)
    names |= {n for n in settings.allowed_projects if n != "*"}
    names = {n for n in names if settings.project_allowed(n)} | set(controls)
    return [(name, controls.get(name)) for name in sorted(names)]


def counts_for_health(conn: Connection) -> dict[str, int]:
    m = models.mutations
    return {
        "latest_seq": int(conn.execute(select(func.coalesce(func.max(m.c.seq), 0))).scalar_one()),
        "chunks": int(conn.execute(select(func.count()).select_from(models.chunks)).scalar_one()),
        "principals": int(
            conn.execute(select(func.count()).select_from(models.principals)).scalar_one()
        ),
        "recent_rejections": int(
            conn.execute(
                select(func.count()).where(
                    models.sync_audit_log.c.outcome != "accepted",
                    models.sync_audit_log.c.occurred_at > func.now() - text("interval '1 day'"),
                )
            ).scalar_one()
        ),
    }
