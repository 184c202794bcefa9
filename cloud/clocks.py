"""The clock bound for records the server stored before it refused far-future clocks.

Since the clock bound, a pushed record whose hlc is more than the drift
(``ENGRAM_CLOUD_MAX_CLOCK_DRIFT_S``) ahead of the server's clock is rejected ``clock_skew``
(:mod:`engram_cloud.sync_log`). A record stored earlier may still carry such a clock (year 2286,
say): in the read model it would beat every real edit and delete of its key until then.

:func:`repair_clocks` settles them: every record of the log beyond now + drift is marked
``held = 'clock_skew'`` and the read model of its project is rebuilt without it, so the real
edits win again; a held record that real time has caught up with is released and applied the
same way. The log keeps every record (pulls still serve them, and each client applies its own
clock bound), nothing is deleted. ``engram cloud repair-clocks`` runs it, and so does
``engram cloud serve`` at start-up: the check is one read of the log, and only when something
changes does it take the push lock (pushes wait while the affected projects are rebuilt).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, select, text, update

from engram.record import format_hlc
from engram_cloud import models, read_model, sync_log

HELD_CLOCK_SKEW = "clock_skew"


@dataclass(slots=True)
class ClockRepair:
    held: int = 0  # records newly held back
    released: int = 0  # held records whose time has come
    still_held: int = 0  # held after this run
    projects: list[str] = field(default_factory=list)  # whose read model was rebuilt

    @property
    def changed(self) -> bool:
        return bool(self.held or self.released)


def hlc_limit(now_ms: int, max_drift_ms: int) -> str:
    """The greatest hlc a record may carry now: every valid hlc above it (string order) has a
    wall time more than the drift ahead."""
    return format_hlc(min(now_ms + max_drift_ms, 10**13 - 1), 99_999, "f" * 16)


def repair_clocks(
    engine: Engine,
    *,
    max_drift_ms: int,
    now_ms: int | None = None,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ClockRepair:
    """Hold back log records beyond now + drift, release held ones now within it, and rebuild
    the read model of every project that changed (see the module docstring)."""
    limit = hlc_limit(int(time.time() * 1000) if now_ms is None else now_ms, max_drift_ms)
    with engine.connect() as conn:
        if dry_run:
            report = _survey(conn, limit)
            report.still_held = _held_count(conn) + report.held - report.released
            return report
        if not _anything_to_do(conn, limit):  # the usual case: one read, no lock
            return ClockRepair(still_held=_held_count(conn))
    with engine.begin() as conn:
        # Under the push lock nothing is pushed meanwhile: the rebuilt tables are exact.
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": sync_log.PUSH_LOCK})
        report = _survey(conn, limit)
        m = models.mutations
        conn.execute(
            update(m).where(m.c.held.is_(None), m.c.hlc > limit).values(held=HELD_CLOCK_SKEW)
        )
        conn.execute(
            update(m).where(m.c.held == HELD_CLOCK_SKEW, m.c.hlc <= limit).values(held=None)
        )
        for project in report.projects:
            if progress is not None:
                progress(f"  rebuilding the read model of {project!r}…")
            read_model.rebuild(conn, project)
        report.still_held = _held_count(conn)
    return report


def _survey(conn: Connection, limit: str) -> ClockRepair:
    """What a repair would hold and release, and which projects that touches."""
    m = models.mutations
    hold = conn.execute(select(m.c.project).where(m.c.held.is_(None), m.c.hlc > limit))
    hold_projects = hold.scalars().all()
    release = conn.execute(select(m.c.project).where(m.c.held == HELD_CLOCK_SKEW, m.c.hlc <= limit))
    release_projects = release.scalars().all()
    return ClockRepair(
        held=len(hold_projects),
        released=len(release_projects),
        projects=sorted({*hold_projects, *release_projects}),
    )


def _anything_to_do(conn: Connection, limit: str) -> bool:
    m = models.mutations
    ahead = select(m.c.seq).where(m.c.held.is_(None), m.c.hlc > limit).limit(1)
    due = select(m.c.seq).where(m.c.held == HELD_CLOCK_SKEW, m.c.hlc <= limit).limit(1)
    return bool(conn.execute(ahead).first() or conn.execute(due).first())


def _held_count(conn: Connection) -> int:
    m = models.mutations
    query = select(m.c.seq).where(m.c.held.is_not(None)).subquery()
    return int(conn.execute(select(text("count(*)")).select_from(query)).scalar_one())
