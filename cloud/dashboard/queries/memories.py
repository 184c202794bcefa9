"""Queries of the memories page family: observations, sessions and prompts (lists, search,
one record, its session's records, related ones, its earlier versions from the mutation log,
its importance and supersession links) and the observation types of the filter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Connection, and_, cast, func, literal, or_, select
from sqlalchemy.dialects.postgresql import REGCONFIG

from engram.record import is_agent_session
from engram_cloud import models
from engram_cloud.dashboard.queries import common
from engram_cloud.dashboard.queries.common import (
    DETAIL_LIMIT,
    PREVIEW_CHARS,
    RELATED_LIMIT,
    STUB_HLC,
    Page,
    Paging,
    Scope,
    branches,
    clamped,
    count_capped,
    listing,
    matches,
    newest,
    tsquery,
)

_o = models.observations
OBSERVATION_COLUMNS = (
    _o.c.project,
    _o.c.sync_id,
    _o.c.session_id,
    _o.c.type,
    _o.c.title,
    func.left(_o.c.content, PREVIEW_CHARS).label("preview"),
    _o.c.scope,
    _o.c.topic_key,
    _o.c.contributor,
    _o.c.created_at,
    _o.c.updated_at,
    _o.c.revision_count,
    _o.c.pinned,
)
OBSERVATION_ORDER = (_o.c.created_at.desc(), _o.c.sync_id.desc())


@dataclass(frozen=True, slots=True)
class ObservationFilter:
    project: str = ""
    type: str = ""
    q: str = ""

    def conditions(self) -> list[ColumnElement[bool]]:
        conds: list[ColumnElement[bool]] = [_o.c.deleted_at.is_(None)]
        if self.type:
            conds.append(_o.c.type == self.type)
        return conds


def observations(conn: Connection, scope: Scope, flt: ObservationFilter, paging: Paging) -> Page:
    """A page of live observations, newest first; with ``q``, best match first (among the
    newest :data:`SEARCH_WINDOW` matches)."""
    projects = branches(conn, scope, _o, flt.project)
    conds = flt.conditions()
    if not flt.q:
        return listing(conn, _o, OBSERVATION_COLUMNS, OBSERVATION_ORDER, projects, conds, paging)
    conds.append(matches(_o.c.search, flt.q))
    total, capped = count_capped(conn, _o, projects, conds, common.SEARCH_WINDOW)
    paging = clamped(paging, total)
    if total == 0:
        return Page([], paging, 0)
    window = newest(
        _o,
        (*OBSERVATION_COLUMNS, _o.c.search),
        OBSERVATION_ORDER,
        projects,
        conds,
        common.SEARCH_WINDOW,
    ).subquery("w")
    ranked = (
        select(*(c for c in window.c if c.name != "search"))
        .order_by(
            func.ts_rank_cd(window.c.search, tsquery(flt.q)).desc(),
            window.c.created_at.desc(),
            window.c.sync_id.desc(),
        )
        .offset(paging.offset)
        .limit(paging.size)
    )
    return Page(conn.execute(ranked).all(), paging, total, capped)


def recent_observations(
    conn: Connection, scope: Scope, flt: ObservationFilter, limit: int = 25
) -> Sequence[Any]:
    """The newest (or best-matching) observations, without paging (the activity page)."""
    return observations(conn, scope, flt, Paging(1, limit)).rows


def observation(conn: Connection, project: str, session_id: str, sync_id: str) -> Any | None:
    """One observation, whole (deleted ones included: their page says so)."""
    return conn.execute(
        select(_o).where(
            _o.c.project == project, _o.c.sync_id == sync_id, _o.c.session_id == session_id
        )
    ).first()


#: Earlier versions a memory page shows (the local store keeps as many).
HISTORY_LIMIT = 20


@dataclass(frozen=True, slots=True)
class Version:
    """One earlier version of a memory, read from the mutation log."""

    title: str
    content: str
    type: str
    updated_at: str
    contributor: str
    deleted: bool


def observation_history(conn: Connection, obs: Any) -> list[Version]:
    """The versions of ``obs`` that came before the one shown, newest first, from the mutation
    log (every upsert and soft delete of its key that was applied, the read model's own
    version left out), at most :data:`HISTORY_LIMIT`."""
    m = models.mutations
    rows = conn.execute(
        select(m.c.record, m.c.hlc, m.c.created_by)
        .where(
            m.c.project == obs.project,
            m.c.entity == "observation",
            m.c.key == obs.sync_id,
            m.c.held.is_(None),
            m.c.hlc < obs.hlc,
        )
        .order_by(m.c.hlc.desc())
        .limit(HISTORY_LIMIT * 2)  # deletes without text and repeats are skipped below
    ).all()
    versions: list[Version] = []
    last = (obs.title, obs.content, obs.type)
    for row in rows:
        try:
            payload = orjson.loads(row.record).get("payload") or {}
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if "content" not in payload or payload.get("hard"):
            continue  # a delete carrying only its key
        text = (
            str(payload.get("title") or ""),
            str(payload["content"]),
            str(payload.get("type") or ""),
        )
        if text == last:
            continue  # the same words (a counter, a move of scope): no new version
        last = text
        versions.append(
            Version(
                title=text[0],
                content=text[1],
                type=text[2],
                updated_at=str(payload.get("updated_at") or ""),
                contributor=row.created_by or "",
                deleted=bool(payload.get("deleted_at")),
            )
        )
        if len(versions) == HISTORY_LIMIT:
            break
    return versions


@dataclass(frozen=True, slots=True)
class Standing:
    """A memory's importance and where it stands among its neighbours (its observation page):
    the memory that superseded it and the ones merged into it (docs/importance.md)."""

    importance: float
    overridden: bool
    successor: Any | None
    merged_from: Sequence[Any]


def standing(conn: Connection, obs: Any, links: int) -> Standing:
    """The importance the server can compute for ``obs`` (the first seed's formula; access
    counts are local to each machine, so they count 0 here; ``links``: its active relations,
    :func:`engram_cloud.dashboard.graph.link_count`) and its supersession links."""
    from engram import importance

    merged_from = conn.execute(
        select(*OBSERVATION_COLUMNS)
        .where(_o.c.project == obs.project, _o.c.superseded_by == obs.sync_id)
        .order_by(*OBSERVATION_ORDER)
        .limit(RELATED_LIMIT)
    ).all()
    successor = None
    if obs.superseded_by:
        successor = conn.execute(
            select(*OBSERVATION_COLUMNS).where(
                _o.c.project == obs.project, _o.c.sync_id == obs.superseded_by
            )
        ).first()
    computed = importance.compute(
        obs.content,
        obs.topic_key,
        obs.type,
        links,
        max(obs.updated_at, obs.reviewed_at or ""),
        0,
    )
    value = importance.effective(obs.importance_override, computed)
    return Standing(value, obs.importance_override is not None, successor, merged_from)


def related_observations(conn: Connection, obs: Any) -> Sequence[Any]:
    """Other live observations of the same agent session or the same topic. Sessionless saves
    share one pseudo session per project, which says nothing about them: not related."""
    links = []
    if is_agent_session(obs.session_id):
        links.append(_o.c.session_id == obs.session_id)
    if obs.topic_key:
        links.append(_o.c.topic_key == obs.topic_key)
    if not links:
        return []
    same = or_(*links)
    return conn.execute(
        select(*OBSERVATION_COLUMNS)
        .where(
            _o.c.project == obs.project,
            _o.c.sync_id != obs.sync_id,
            _o.c.deleted_at.is_(None),
            same,
        )
        .order_by(*OBSERVATION_ORDER)
        .limit(RELATED_LIMIT)
    ).all()


TypesCache = dict[frozenset[str] | None, tuple[float, list[str]]]


def observation_types(
    conn: Connection, scope: Scope, cache: TypesCache, now: float, ttl: float = 60.0
) -> list[str]:
    """The distinct types of the viewer's observations (for the filter pills). Exact up to
    ``ttl`` seconds: finding them reads every row, so the app keeps the answer a minute in
    ``cache`` (only a cache: each server process has its own, nothing depends on it)."""
    hit = cache.get(scope.projects)
    if hit is not None and now - hit[0] < ttl:
        return hit[1]
    found = sorted(
        conn.execute(
            select(_o.c.type).where(scope.where(_o.c.project), _o.c.deleted_at.is_(None)).distinct()
        ).scalars()
    )
    if len(cache) > 256:
        cache.clear()
    cache[scope.projects] = (now, found)
    return found


# --- sessions ----------------------------------------------------------------------------------

_s = models.sessions
_obs_count = (
    select(func.count())
    .where(_o.c.project == _s.c.project, _o.c.session_id == _s.c.id, _o.c.deleted_at.is_(None))
    .scalar_subquery()
)
_prompt_count = (
    select(func.count())
    .where(models.prompts.c.project == _s.c.project, models.prompts.c.session_id == _s.c.id)
    .scalar_subquery()
)
SESSION_COLUMNS = (
    _s.c.project,
    _s.c.id,
    _s.c.directory,
    _s.c.started_at,
    _s.c.ended_at,
    _s.c.summary,
    _s.c.contributor,
    _s.c.hlc,
)
SESSION_ORDER = (_s.c.started_at.desc(), _s.c.id.desc())


def _session_text_match(q: str) -> ColumnElement[bool]:
    document = func.to_tsvector(
        cast(literal(models.TS_CONFIG), REGCONFIG),
        # A directory is one token to the parser ("/src/acme"); split it so its names match.
        func.concat_ws(" ", _s.c.id, func.translate(_s.c.directory, "/\\", "  "), _s.c.summary),
    )
    return or_(_s.c.id == q, document.op("@@")(tsquery(q)))


def sessions(
    conn: Connection, scope: Scope, paging: Paging, *, project: str = "", q: str = ""
) -> Page:
    """A page of sessions, newest first, each with its observation and prompt counts."""
    projects = branches(conn, scope, _s, project)
    conds = [_session_text_match(q)] if q else []
    page = listing(conn, _s, SESSION_COLUMNS, SESSION_ORDER, projects, conds, paging)
    return with_session_counts(conn, page)


def with_session_counts(conn: Connection, page: Page) -> Page:
    if not page.rows:
        return page
    keys = [(r.project, r.id) for r in page.rows]
    counts = {
        (r.project, r.id): (r.observations, r.prompts)
        for r in conn.execute(
            select(
                _s.c.project,
                _s.c.id,
                _obs_count.label("observations"),
                _prompt_count.label("prompts"),
            ).where(or_(*(and_(_s.c.project == p, _s.c.id == i) for p, i in keys)))
        )
    }
    page.rows = [SessionRow(row, *counts.get((row.project, row.id), (0, 0))) for row in page.rows]
    return page


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session row with its counts (attribute access like a database row)."""

    row: Any
    observations: int
    prompts: int

    def __getattr__(self, name: str) -> Any:
        return getattr(self.row, name)

    @property
    def is_stub(self) -> bool:
        return self.row.hlc == STUB_HLC


def session(conn: Connection, project: str, session_id: str) -> SessionRow | None:
    row = conn.execute(
        select(*SESSION_COLUMNS, _obs_count.label("n_obs"), _prompt_count.label("n_prompts")).where(
            _s.c.project == project, _s.c.id == session_id
        )
    ).first()
    return None if row is None else SessionRow(row, row.n_obs, row.n_prompts)


def session_observations(conn: Connection, project: str, session_id: str) -> Sequence[Any]:
    return conn.execute(
        select(*OBSERVATION_COLUMNS)
        .where(_o.c.project == project, _o.c.session_id == session_id, _o.c.deleted_at.is_(None))
        .order_by(_o.c.created_at, _o.c.sync_id)
        .limit(DETAIL_LIMIT)
    ).all()


# --- prompts -----------------------------------------------------------------------------------

_p = models.prompts
PROMPT_COLUMNS = (
    _p.c.project,
    _p.c.sync_id,
    _p.c.session_id,
    func.left(_p.c.content, PREVIEW_CHARS).label("preview"),
    _p.c.contributor,
    _p.c.created_at,
)
PROMPT_ORDER = (_p.c.created_at.desc(), _p.c.sync_id.desc())


def prompts(
    conn: Connection, scope: Scope, paging: Paging, *, project: str = "", q: str = ""
) -> Page:
    """A page of prompts, newest first; with ``q``, best match first."""
    projects = branches(conn, scope, _p, project)
    if not q:
        return listing(conn, _p, PROMPT_COLUMNS, PROMPT_ORDER, projects, [], paging)
    conds = [matches(_p.c.search, q)]
    total, capped = count_capped(conn, _p, projects, conds, common.SEARCH_WINDOW)
    paging = clamped(paging, total)
    if total == 0:
        return Page([], paging, 0)
    window = newest(
        _p, (*PROMPT_COLUMNS, _p.c.search), PROMPT_ORDER, projects, conds, common.SEARCH_WINDOW
    ).subquery("w")
    ranked = (
        select(*(c for c in window.c if c.name != "search"))
        .order_by(
            func.ts_rank_cd(window.c.search, tsquery(q)).desc(),
            window.c.created_at.desc(),
            window.c.sync_id.desc(),
        )
        .offset(paging.offset)
        .limit(paging.size)
    )
    return Page(conn.execute(ranked).all(), paging, total, capped)


def prompt(conn: Connection, project: str, session_id: str, sync_id: str) -> Any | None:
    return conn.execute(
        select(_p).where(
            _p.c.project == project, _p.c.sync_id == sync_id, _p.c.session_id == session_id
        )
    ).first()


def session_prompts(
    conn: Connection, project: str, session_id: str, *, exclude: str = ""
) -> Sequence[Any]:
    return conn.execute(
        select(*PROMPT_COLUMNS)
        .where(_p.c.project == project, _p.c.session_id == session_id, _p.c.sync_id != exclude)
        .order_by(_p.c.created_at, _p.c.sync_id)
        .limit(DETAIL_LIMIT)
    ).all()


# --- projects ----------------------------------------------------------------------------------
