"""The dashboard's read-model queries, one module per page family (:mod:`.common` holds
the shared building blocks), every one bounded to the projects the viewer may see, and
the pagination rules of the dashboard (docs/dashboard.md).

**Scope.** A :class:`.common.Scope` is the viewer's readable projects (``None`` = every project; see
:func:`engram_cloud.auth.readable_projects`). Every query filters by it, so a count or a list
never includes a project the viewer may not read.

**Bounded work.** Lists are ordered newest first and read per project through the
``(project, created_at)`` indexes: one ``ORDER BY … LIMIT offset+size`` branch per project,
merged (``UNION ALL``), so a page costs what it shows, not the size of the table. Counts stop
at :data:`.common.COUNT_CAP` (the page says "5,000+", and paging stops there: narrow the list with a
filter or a search). A full-text search ranks (``ts_rank_cd``) the newest
:data:`.common.SEARCH_WINDOW` matches: exact for any search that matches fewer, bounded for one that
matches half the table. Search text goes through ``websearch_to_tsquery``, so any input is a
query, never syntax.
"""
