"""The dashboard's read-model queries, every one bounded to the projects the viewer may see, and
the pagination rules of reference §7.2.

**Scope.** A :class:`Scope` is the viewer's readable projects (``None`` = every project; see
:func:`engram_cloud.auth.readable_projects`). Every query filters by it, so a count or a list
never includes a project the viewer may not read.

**Bounded work.** Lists are ordered newest first and read per project through the
``(project, created_at)`` indexes: one ``ORDER BY … LIMIT offset+size`` branch per project,
merged (``UNION ALL``), so a page costs what it shows, not the size of the table. Counts stop
at :data:`COUNT_CAP` (the page says "5,000+", and paging stops there: narrow the list with a
filter or a search). A full-text search ranks (``ts_rank_cd``) the newest
:data:`SEARCH_WINDOW` matches: exact for any search that matches fewer, bounded for one that
matches half the table. Search text goes through ``websearch_to_tsquery``, so any input is a
query, never syntax.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Select,
    Table,
    and_,
    cast,
    false,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import REGCONFIG

from engram.record import is_agent_session
from engram_cloud import models
from engram_cloud.settings import Settings

PAGE_SIZES = (10, 25, 50, 100)
DEFAULT_PAGE_SIZE = 25
COUNT_CAP = 5_000
SEARCH_WINDOW = 1_000
MAX_QUERY_CHARS = 500
MAX_NAME_CHARS = 200
DETAIL_LIMIT = 100  # rows of a session's (or a contributor's) observations shown on its page
RELATED_LIMIT = 10
PREVIEW_CHARS = 600

#: A session row that only holds the place of a session whose record has not arrived.
STUB_HLC = ""


class QueryError(ValueError):
    """A filter or paging parameter is unusable; the message names it (shown as a 400 page)."""


# --- scope -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scope:
    """The projects a viewer may read: ``None`` = every project."""

    projects: frozenset[str] | None

    def allows(self, project: str) -> bool:
        return self.projects is None or project in self.projects

    def where(self, column: Column[Any] | ColumnElement[Any]) -> ColumnElement[bool]:
        if self.projects is None:
            return true()
        if not self.projects:
            return false()
        return column.in_(sorted(self.projects))


# --- paging ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Paging:
    page: int = 1
    size: int = DEFAULT_PAGE_SIZE

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size


def _int(params: Mapping[str, str], name: str, default: int) -> int:
    raw = (params.get(name) or "").strip()
    if not raw:
        return default
    if not re.fullmatch(r"[+-]?\d{1,9}", raw):
        raise QueryError(f"{name} must be a whole number, got {raw[:40]!r}")
    return int(raw)


def parse_paging(params: Mapping[str, str], default_size: int = DEFAULT_PAGE_SIZE) -> Paging:
    """``page`` (≥ 1) and ``pageSize`` (10…100) from the query string, clamped as in §7.2."""
    page = max(1, _int(params, "page", 1))
    size = min(max(_int(params, "pageSize", default_size), PAGE_SIZES[0]), PAGE_SIZES[-1])
    return Paging(page, size)


def page_strip(current: int, pages: int) -> list[int | None]:
    """The page links: every page when there are at most 7, else ``1 … p-1 p p+1 … last``
    (``None`` is a gap)."""
    if pages <= 7:
        return list(range(1, pages + 1))
    wanted = sorted(
        {1, pages, *(p for p in (current - 1, current, current + 1) if 1 <= p <= pages)}
    )
    strip: list[int | None] = []
    for number in wanted:
        if strip and number - (strip[-1] or 0) > 1:
            strip.append(None)
        strip.append(number)
    return strip


@dataclass(slots=True)
class Page:
    """One page of a list: its rows and where it sits in the whole."""

    rows: list[Any]
    paging: Paging
    total: int  # exact, or COUNT_CAP/SEARCH_WINDOW when ``capped``
    capped: bool = False

    @property
    def page(self) -> int:
        return self.paging.page

    @property
    def size(self) -> int:
        return self.paging.size

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.size))

    @property
    def first(self) -> int:
        return self.paging.offset + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.paging.offset + len(self.rows)

    @property
    def strip(self) -> list[int | None]:
        return page_strip(self.page, self.pages)


def _clamped(paging: Paging, total: int) -> Paging:
    pages = max(1, math.ceil(total / paging.size))
    return Paging(min(paging.page, pages), paging.size)


# --- shared building blocks ---------------------------------------------------------------------


def tsquery(q: str) -> ColumnElement[Any]:
    """The search text as a PostgreSQL query (web-search syntax: words, "phrases", -not, or)."""
    return func.websearch_to_tsquery(cast(literal(models.TS_CONFIG), REGCONFIG), q)


def matches(vector: ColumnElement[Any], q: str) -> ColumnElement[bool]:
    return vector.op("@@")(tsquery(q))


def clean_query(raw: str | None) -> str:
    """Search text, trimmed; a 400 when it is absurdly long."""
    q = (raw or "").strip()
    if len(q) > MAX_QUERY_CHARS:
        raise QueryError(f"search text is longer than {MAX_QUERY_CHARS} characters")
    return q


def clean_name(raw: str | None, what: str) -> str:
    value = (raw or "").strip()
    if len(value) > MAX_NAME_CHARS:
        raise QueryError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    return value


def _distinct_projects(conn: Connection, table: Table) -> list[str]:
    """Every project of ``table``, by hopping along its primary key (one probe per project,
    however many rows each holds)."""
    name = table.name  # from models, never from input
    sql = f"""WITH RECURSIVE p(project) AS (
                (SELECT project FROM {name} ORDER BY project LIMIT 1)
                UNION ALL
                SELECT (SELECT t.project FROM {name} t WHERE t.project > p.project
                        ORDER BY t.project LIMIT 1)
                FROM p WHERE p.project IS NOT NULL)
              SELECT project FROM p WHERE project IS NOT NULL"""
    return [row[0] for row in conn.execute(text(sql))]


def known_projects(conn: Connection) -> list[str]:
    """Projects that hold anything in the read model, sorted."""
    found: set[str] = set()
    for table in (models.sessions, models.observations, models.prompts):
        found.update(_distinct_projects(conn, table))
    return sorted(found)


def visible_projects(conn: Connection, scope: Scope) -> list[str]:
    """The projects the viewer may see that hold anything."""
    return [p for p in known_projects(conn) if scope.allows(p)]


def _branches(conn: Connection, scope: Scope, table: Table, project: str | None) -> list[str]:
    """The projects a list reads: the filter, else every visible project of ``table``."""
    if project:
        return [project] if scope.allows(project) else []
    if scope.projects is not None:
        return sorted(scope.projects)
    return _distinct_projects(conn, table)


def _newest(
    table: Table,
    columns: Sequence[ColumnElement[Any]],
    order: Sequence[ColumnElement[Any]],
    projects: Sequence[str],
    conditions: Sequence[ColumnElement[bool]],
    limit: int,
) -> Select[Any]:
    """The newest ``limit`` rows over ``projects``: per project an index-ordered branch, merged.
    Returns a select over a subquery whose columns are named like ``columns``."""
    branches = [
        select(*columns)
        .where(table.c.project == project, *conditions)
        .order_by(*order)
        .limit(limit)
        for project in projects
    ]
    merged = (branches[0] if len(branches) == 1 else union_all(*branches)).subquery("m")
    outer_order = [_reorder(merged, o) for o in order]
    return select(merged).order_by(*outer_order).limit(limit)


def _reorder(sub: Any, clause: ColumnElement[Any]) -> ColumnElement[Any]:
    """``clause`` (``col.desc()``) re-targeted at the subquery's column of the same name."""
    element = clause.element  # type: ignore[attr-defined]
    return sub.c[element.name].desc()


def _count(
    conn: Connection,
    table: Table,
    projects: Sequence[str],
    conditions: Sequence[ColumnElement[bool]],
    cap: int,
) -> tuple[int, bool]:
    if not projects:
        return 0, False
    inner = (
        select(literal(1)).where(table.c.project.in_(list(projects)), *conditions).limit(cap + 1)
    ).subquery()
    total = int(conn.execute(select(func.count()).select_from(inner)).scalar_one())
    return (cap, True) if total > cap else (total, False)


def _listing(
    conn: Connection,
    table: Table,
    columns: Sequence[ColumnElement[Any]],
    order: Sequence[ColumnElement[Any]],
    projects: Sequence[str],
    conditions: Sequence[ColumnElement[bool]],
    paging: Paging,
) -> Page:
    """A page of the newest rows (count capped at :data:`COUNT_CAP`; page clamped)."""
    total, capped = _count(conn, table, projects, conditions, COUNT_CAP)
    paging = _clamped(paging, total)
    if total == 0:
        return Page([], paging, 0)
    query = _newest(table, columns, order, projects, conditions, paging.offset + paging.size)
    rows = conn.execute(query.offset(paging.offset).limit(paging.size)).all()
    return Page(rows, paging, total, capped)


# --- observations ------------------------------------------------------------------------------

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
_OBS_ORDER = (_o.c.created_at.desc(), _o.c.sync_id.desc())


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
    projects = _branches(conn, scope, _o, flt.project)
    conds = flt.conditions()
    if not flt.q:
        return _listing(conn, _o, OBSERVATION_COLUMNS, _OBS_ORDER, projects, conds, paging)
    conds.append(matches(_o.c.search, flt.q))
    total, capped = _count(conn, _o, projects, conds, SEARCH_WINDOW)
    paging = _clamped(paging, total)
    if total == 0:
        return Page([], paging, 0)
    window = _newest(
        _o, (*OBSERVATION_COLUMNS, _o.c.search), _OBS_ORDER, projects, conds, SEARCH_WINDOW
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
) -> list[Any]:
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
    merged_from: list[Any]


def standing(conn: Connection, obs: Any) -> Standing:
    """The importance the server can compute for ``obs`` (the first seed's formula; access
    counts are local to each machine, so they count 0 here) and its supersession links."""
    from engram import importance

    merged_from = conn.execute(
        select(*OBSERVATION_COLUMNS)
        .where(_o.c.project == obs.project, _o.c.superseded_by == obs.sync_id)
        .order_by(*_OBS_ORDER)
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
        len(merged_from),
        max(obs.updated_at, obs.reviewed_at or ""),
        0,
    )
    value = importance.effective(obs.importance_override, computed)
    return Standing(value, obs.importance_override is not None, successor, merged_from)


def related_observations(conn: Connection, obs: Any) -> list[Any]:
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
        .order_by(*_OBS_ORDER)
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
_SESSION_ORDER = (_s.c.started_at.desc(), _s.c.id.desc())


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
    projects = _branches(conn, scope, _s, project)
    conds = [_session_text_match(q)] if q else []
    page = _listing(conn, _s, SESSION_COLUMNS, _SESSION_ORDER, projects, conds, paging)
    return _with_session_counts(conn, page)


def _with_session_counts(conn: Connection, page: Page) -> Page:
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


def session_observations(conn: Connection, project: str, session_id: str) -> list[Any]:
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
_PROMPT_ORDER = (_p.c.created_at.desc(), _p.c.sync_id.desc())


def prompts(
    conn: Connection, scope: Scope, paging: Paging, *, project: str = "", q: str = ""
) -> Page:
    """A page of prompts, newest first; with ``q``, best match first."""
    projects = _branches(conn, scope, _p, project)
    if not q:
        return _listing(conn, _p, PROMPT_COLUMNS, _PROMPT_ORDER, projects, [], paging)
    conds = [matches(_p.c.search, q)]
    total, capped = _count(conn, _p, projects, conds, SEARCH_WINDOW)
    paging = _clamped(paging, total)
    if total == 0:
        return Page([], paging, 0)
    window = _newest(
        _p, (*PROMPT_COLUMNS, _p.c.search), _PROMPT_ORDER, projects, conds, SEARCH_WINDOW
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
) -> list[Any]:
    return conn.execute(
        select(*PROMPT_COLUMNS)
        .where(_p.c.project == project, _p.c.session_id == session_id, _p.c.sync_id != exclude)
        .order_by(_p.c.created_at, _p.c.sync_id)
        .limit(DETAIL_LIMIT)
    ).all()


# --- projects ----------------------------------------------------------------------------------


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


def _controls(conn: Connection, names: Sequence[str] | None = None) -> dict[str, Any]:
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
    for name, control in _controls(conn, listed).items():
        out[name].paused = not control.sync_enabled
        out[name].paused_reason = control.paused_reason
        out[name].paused_by = control.updated_by
        out[name].paused_at = control.updated_at
    return [out[name] for name in names]


def project_names(conn: Connection, scope: Scope) -> list[tuple[str, bool]]:
    """The viewer's projects, alphabetical, each with whether it is paused (no counting: cheap
    at any size)."""
    controls = _controls(conn)
    paused = {n for n, row in controls.items() if not row.sync_enabled and scope.allows(n)}
    names = sorted(set(visible_projects(conn, scope)) | paused)
    return [(name, name in paused) for name in names]


def projects(conn: Connection, scope: Scope, paging: Paging, *, q: str = "") -> Page:
    """The viewer's projects (alphabetical) with their counts and pause state."""
    names = [name for name, _ in project_names(conn, scope)]
    if q:
        needle = q.lower()
        names = [n for n in names if needle in n]
    paging = _clamped(paging, len(names))
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


def project_rows(conn: Connection, name: str, what: str, limit: int = 50) -> list[Any]:
    """The newest ``limit`` observations, sessions or prompts of a project."""
    if what == "observations":
        return conn.execute(
            select(*OBSERVATION_COLUMNS)
            .where(_o.c.project == name, _o.c.deleted_at.is_(None))
            .order_by(*_OBS_ORDER)
            .limit(limit)
        ).all()
    if what == "sessions":
        rows = conn.execute(
            select(*SESSION_COLUMNS)
            .where(_s.c.project == name)
            .order_by(*_SESSION_ORDER)
            .limit(limit)
        ).all()
        return _with_session_counts(conn, Page(rows, Paging(1, limit), len(rows))).rows
    return conn.execute(
        select(*PROMPT_COLUMNS).where(_p.c.project == name).order_by(*_PROMPT_ORDER).limit(limit)
    ).all()


# --- contributors ------------------------------------------------------------------------------


def _contributor_union(scope: Scope) -> Any:
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
    people = _contributor_union(scope)
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
    paging = _clamped(paging, len(found))
    return Page(found[paging.offset : paging.offset + paging.size], paging, len(found))


def contributor(conn: Connection, scope: Scope, name: str) -> dict[str, Any] | None:
    """A contributor's recent sessions, observations and prompts in the viewer's projects."""
    obs = conn.execute(
        select(*OBSERVATION_COLUMNS)
        .where(scope.where(_o.c.project), _o.c.contributor == name, _o.c.deleted_at.is_(None))
        .order_by(*_OBS_ORDER)
        .limit(25)
    ).all()
    sess = conn.execute(
        select(*SESSION_COLUMNS)
        .where(scope.where(_s.c.project), _s.c.contributor == name, _s.c.hlc != STUB_HLC)
        .order_by(*_SESSION_ORDER)
        .limit(25)
    ).all()
    prm = conn.execute(
        select(*PROMPT_COLUMNS)
        .where(scope.where(_p.c.project), _p.c.contributor == name)
        .order_by(*_PROMPT_ORDER)
        .limit(25)
    ).all()
    if not (obs or sess or prm):
        return None
    return {
        "observations": obs,
        "sessions": _with_session_counts(conn, Page(sess, Paging(1, 25), len(sess))).rows,
        "prompts": prm,
        "projects": sorted({r.project for r in (*obs, *sess, *prm)}),
    }


# --- overview ------------------------------------------------------------------------------------


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
    people = _contributor_union(scope)
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
    inner = select(literal(1)).select_from(a).where(*conds).limit(COUNT_CAP + 1).subquery()
    total = int(conn.execute(select(func.count()).select_from(inner)).scalar_one())
    capped = total > COUNT_CAP
    total = min(total, COUNT_CAP)
    paging = _clamped(paging, total)
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
    controls = _controls(conn)
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
