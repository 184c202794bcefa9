"""Queries of the overview pages: totals over the viewer's projects (the stats page)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, func, select

from engram_cloud import models
from engram_cloud.dashboard.queries.common import STUB_HLC, Scope, visible_projects
from engram_cloud.dashboard.queries.people import contributor_union

_o, _s, _p = models.observations, models.sessions, models.prompts


@dataclass(slots=True)
class Stats:
    projects: int = 0
    contributors: int = 0
    sessions: int = 0
    observations: int = 0
    prompts: int = 0
    chunks: int = 0
    mutations: int = 0
    paused: int = 0
    by_type: list[tuple[str, int]] = field(default_factory=list)


def stats(conn: Connection, scope: Scope) -> Stats:
    """Totals over the viewer's projects."""
    out = Stats()
    out.projects = len(visible_projects(conn, scope))
    out.by_type = [
        (r.type, r.n)
        for r in conn.execute(
            select(_o.c.type, func.count().label("n"))
            .where(scope.where(_o.c.project), _o.c.deleted_at.is_(None))
            .group_by(_o.c.type)
            .order_by(func.count().desc(), _o.c.type)
        )
    ]
    out.observations = sum(n for _, n in out.by_type)
    out.sessions = conn.execute(
        select(func.count()).where(scope.where(_s.c.project), _s.c.hlc != STUB_HLC)
    ).scalar_one()
    out.prompts = conn.execute(select(func.count()).where(scope.where(_p.c.project))).scalar_one()
    people = contributor_union(scope)
    out.contributors = conn.execute(
        select(func.count(people.c.contributor.distinct())).where(people.c.contributor != "")
    ).scalar_one()
    ch, m, c = models.chunks, models.mutations, models.project_controls
    out.chunks = conn.execute(select(func.count()).where(scope.where(ch.c.project))).scalar_one()
    out.mutations = conn.execute(select(func.count()).where(scope.where(m.c.project))).scalar_one()
    out.paused = conn.execute(
        select(func.count()).where(scope.where(c.c.project), c.c.sync_enabled.is_(False))
    ).scalar_one()
    return out
