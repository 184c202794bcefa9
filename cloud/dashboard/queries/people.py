"""Queries of the people page family: contributors (who pushed what) and one contributor's
recent records in the viewer's projects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, literal, literal_column, select, union_all

from engram_cloud import models
from engram_cloud.dashboard.queries.common import STUB_HLC, Page, Paging, Scope, clamped
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


def contributor_union(scope: Scope) -> Any:
    """``(project, contributor, observations, sessions, prompts, last)`` per table, stacked."""
    return union_all(
        select(
            _o.c.project,
            _o.c.contributor,
            literal(1).label("observations"),
            literal(0).label("sessions"),
            literal(0).label("prompts"),
            _o.c.created_at.label("last"),
        ).where(scope.where(_o.c.project), _o.c.deleted_at.is_(None)),
        select(
            _s.c.project,
            _s.c.contributor,
            literal(0),
            literal(1),
            literal(0),
            _s.c.started_at,
        ).where(scope.where(_s.c.project), _s.c.hlc != STUB_HLC),
        select(
            _p.c.project, _p.c.contributor, literal(0), literal(0), literal(1), _p.c.created_at
        ).where(scope.where(_p.c.project)),
    ).subquery("people")


@dataclass(frozen=True, slots=True)
class Contributor:
    name: str
    observations: int
    sessions: int
    prompts: int
    projects: int
    last_activity: str | None


def contributors(conn: Connection, scope: Scope, paging: Paging, *, q: str = "") -> Page:
    """Who pushed what, most recently active first (``q`` filters names, case-insensitively)."""
    people = contributor_union(scope)
    query = (
        select(
            people.c.contributor,
            func.sum(people.c.observations).label("observations"),
            func.sum(people.c.sessions).label("sessions"),
            func.sum(people.c.prompts).label("prompts"),
            func.count(people.c.project.distinct()).label("projects"),
            func.max(people.c.last).label("last"),
        )
        .where(people.c.contributor != "")
        .group_by(people.c.contributor)
        .order_by(literal_column("last").desc(), people.c.contributor)
    )
    if q:
        query = query.where(func.strpos(func.lower(people.c.contributor), q.lower()) > 0)
    found = [
        Contributor(r.contributor, r.observations, r.sessions, r.prompts, r.projects, r.last)
        for r in conn.execute(query)
    ]
    paging = clamped(paging, len(found))
    return Page(found[paging.offset : paging.offset + paging.size], paging, len(found))


def contributor(conn: Connection, scope: Scope, name: str) -> dict[str, Any] | None:
    """A contributor's recent sessions, observations and prompts in the viewer's projects."""
    obs = conn.execute(
        select(*OBSERVATION_COLUMNS)
        .where(scope.where(_o.c.project), _o.c.contributor == name, _o.c.deleted_at.is_(None))
        .order_by(*OBSERVATION_ORDER)
        .limit(25)
    ).all()
    sess = conn.execute(
        select(*SESSION_COLUMNS)
        .where(scope.where(_s.c.project), _s.c.contributor == name, _s.c.hlc != STUB_HLC)
        .order_by(*SESSION_ORDER)
        .limit(25)
    ).all()
    prm = conn.execute(
        select(*PROMPT_COLUMNS)
        .where(scope.where(_p.c.project), _p.c.contributor == name)
        .order_by(*PROMPT_ORDER)
        .limit(25)
    ).all()
    if not (obs or sess or prm):
        return None
    return {
        "observations": obs,
        "sessions": with_session_counts(conn, Page(sess, Paging(1, 25), len(sess))).rows,
        "prompts": prm,
        "projects": sorted({r.project for r in (*obs, *sess, *prm)}),
    }


# --- overview ------------------------------------------------------------------------------------
