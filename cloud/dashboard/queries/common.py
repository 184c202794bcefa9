"""The building blocks of every dashboard query: the viewer's :class:`Scope`, paging
(:class:`Paging`, :class:`Page`, the page strip), the caps, clean search text and names, and the
bounded newest-first listing that the page families' queries are made of (the rules are in the
package's docstring).

The caps (:data:`COUNT_CAP`, :data:`SEARCH_WINDOW`) are read from this module when a query runs
(``common.COUNT_CAP``), so a test can lower them in one place.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Select,
    Table,
    cast,
    false,
    func,
    literal,
    select,
    text,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import REGCONFIG

from engram_cloud import models

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
    """``page`` (≥ 1) and ``pageSize`` (10…100) from the query string, clamped to the list sizes the pages offer."""
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

    rows: Sequence[Any]
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


def clamped(paging: Paging, total: int) -> Paging:
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


def branches(conn: Connection, scope: Scope, table: Table, project: str | None) -> list[str]:
    """The projects a list reads: the filter, else every visible project of ``table``."""
    if project:
        return [project] if scope.allows(project) else []
    if scope.projects is not None:
        return sorted(scope.projects)
    return _distinct_projects(conn, table)


def newest(
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


def count_capped(
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


def listing(
    conn: Connection,
    table: Table,
    columns: Sequence[ColumnElement[Any]],
    order: Sequence[ColumnElement[Any]],
    projects: Sequence[str],
    conditions: Sequence[ColumnElement[bool]],
    paging: Paging,
) -> Page:
    """A page of the newest rows (count capped at :data:`COUNT_CAP`; page clamped)."""
    total, capped = count_capped(conn, table, projects, conditions, COUNT_CAP)
    paging = clamped(paging, total)
    if total == 0:
        return Page([], paging, 0)
    query = newest(table, columns, order, projects, conditions, paging.offset + paging.size)
    rows = conn.execute(query.offset(paging.offset).limit(paging.size)).all()
    return Page(rows, paging, total, capped)
