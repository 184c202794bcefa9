"""Queries of the projects page family: each project's counts, pause state and newest rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, literal, or_, select

from engram_cloud import models
from engram_cloud.dashboard.queries.common import (
    STUB_HLC,
    Page,
    Paging,
    Scope,
    clamped,
    visible_projects,
)
from engram_cloud.dashboard.queries.memories import (
    OBSERVATION_COLUMNS,
    OBSERVATION_ORDER,
    PROMPT_COLUMNS,
    PROMPT_ORDER,
    SESSION_COLUMNS,
    SESSION_ORDER,
    with_session_counts,
)

_o, _s, _p = models.observations, models.sessions, models.prompts


@dataclass(slots=True)
class ProjectSummary:
    name: str
    observations: int = 0
    sessions: int = 0
    prompts: int = 0
    contributors: int = 0  # people who saved its live memories
    last_activity: str | None = None
    paused: bool = False
    paused_reason: str | None = None
    paused_by: str | None = None
    paused_at: datetime | None = None


def project_controls(conn: Connection, names: Sequence[str] | None = None) -> dict[str, Any]:
    c = models.project_controls
    query = select(c)
    if names is not None:
        query = query.where(c.c.project.in_(list(names)))
    return {row.project: row for row in conn.execute(query)}


def _summaries(conn: Connection, names: Sequence[str]) -> list[ProjectSummary]:
    """Counts of each named project (one grouped statement per table)."""
    out = {name: ProjectSummary(name) for name in names}
    if not names:
        return []
    listed = list(names)
    # One pass over the observations gives their count, the latest and who saved them.
    for row in conn.execute(
        select(
            _o.c.project,
            func.count().label("n"),
            func.max(_o.c.created_at).label("last"),
            func.count(_o.c.contributor.distinct()).label("people"),
        )
        .where(_o.c.project.in_(listed), _o.c.deleted_at.is_(None))
        .group_by(_o.c.project)
    ):
        out[row.project].observations = row.n
        out[row.project].last_activity = row.last
        out[row.project].contributors = row.people
    for row in conn.execute(
        select(_s.c.project, func.count().label("n"), func.max(_s.c.started_at).label("last"))
        .where(_s.c.project.in_(listed), _s.c.hlc != STUB_HLC)
        .group_by(_s.c.project)
    ):
        out[row.project].sessions = row.n
        if row.last and (out[row.project].last_activity or "") < row.last:
            out[row.project].last_activity = row.last
    for row in conn.execute(
        select(_p.c.project, func.count().label("n"))
        .where(_p.c.project.in_(listed))
        .group_by(_p.c.project)
    ):
        out[row.project].prompts = row.n
    for name, control in project_controls(conn, listed).items():
        out[name].paused = not control.sync_enabled
        out[name].paused_reason = control.paused_reason
        out[name].paused_by = control.updated_by
        out[name].paused_at = control.updated_at
    return [out[name] for name in names]


def project_names(conn: Connection, scope: Scope) -> list[tuple[str, bool]]:
    """The viewer's projects, alphabetical, each with whether it is paused (no counting: cheap
    at any size)."""
    controls = project_controls(conn)
    paused = {n for n, row in controls.items() if not row.sync_enabled and scope.allows(n)}
    names = sorted(set(visible_projects(conn, scope)) | paused)
    return [(name, name in paused) for name in names]


def projects(conn: Connection, scope: Scope, paging: Paging, *, q: str = "") -> Page:
    """The viewer's projects (alphabetical) with their counts and pause state."""
    names = [name for name, _ in project_names(conn, scope)]
    if q:
        needle = q.lower()
        names = [n for n in names if needle in n]
    paging = clamped(paging, len(names))
    chosen = names[paging.offset : paging.offset + paging.size]
    return Page(_summaries(conn, chosen), paging, len(names))


def project(conn: Connection, name: str) -> ProjectSummary | None:
    """One project's summary, or ``None`` when nothing is known about it."""
    summary = _summaries(conn, [name])[0]
    known = summary.observations or summary.sessions or summary.prompts or summary.paused
    if known:
        return summary
    exists = conn.execute(
        select(literal(1)).where(
            or_(
                select(_s.c.id).where(_s.c.project == name).exists(),
                select(_o.c.sync_id).where(_o.c.project == name).exists(),
                select(_p.c.sync_id).where(_p.c.project == name).exists(),
                select(models.project_controls.c.project)
                .where(models.project_controls.c.project == name)
                .exists(),
            )
        )
    ).first()
    return summary if exists else None


def project_rows(conn: Connection, name: str, what: str, limit: int = 50) -> Sequence[Any]:
    """The newest ``limit`` observations, sessions or prompts of a project."""
    if what == "observations":
        return conn.execute(
            select(*OBSERVATION_COLUMNS)
            .where(_o.c.project == name, _o.c.deleted_at.is_(None))
            .order_by(*OBSERVATION_ORDER)
            .limit(limit)
        ).all()
    if what == "sessions":
        rows = conn.execute(
            select(*SESSION_COLUMNS)
            .where(_s.c.project == name)
            .order_by(*SESSION_ORDER)
            .limit(limit)
        ).all()
        return with_session_counts(conn, Page(rows, Paging(1, limit), len(rows))).rows
    return conn.execute(
        select(*PROMPT_COLUMNS).where(_p.c.project == name).order_by(*PROMPT_ORDER).limit(limit)
    ).all()


# --- contributors ------------------------------------------------------------------------------
