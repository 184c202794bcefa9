"""How long a project the server refused is left alone.

A 403 ``policy_forbidden`` (the server does not let this token sync the project) stops pushes
*and* pulls of that project; a 409 ``paused`` (an admin paused it) stops pushes only — pulls
still work. Asking again every few seconds changes nothing but fills the server's audit log, so
each refusal sets a wait that doubles with every refusal in a row: :data:`DEFAULT_BASE_S`
(2 minutes), 4, 8, … up to :data:`DEFAULT_MAX_S` (an hour). The wait is kept per
``(server, project)`` in ``sync_cloud_projects`` (``refused_until``, ``refused_count``), so every
process on the machine honours it and ``engram cloud status`` shows it.

It ends at once when the situation may have changed: a push or pull of the project succeeds
(``engram sync --cloud`` always tries, whatever the wait), the project is enrolled again, or the
cloud configuration changes (``engram cloud config``; autosync also notices an edited
``cloud.json``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from engram.sync.cloud import state
from engram.times import iso

if TYPE_CHECKING:
    from engram.store import Store

PAUSED = "paused"  # the client reason codes of engram.sync.cloud.client (no httpx import here)
POLICY_FORBIDDEN = "policy_forbidden"
#: Which directions each refusal stops.
STOPS = {POLICY_FORBIDDEN: ("push", "pull"), PAUSED: ("push",)}
DEFAULT_BASE_S = 120.0
DEFAULT_MAX_S = 3600.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """The first wait after a refusal and the longest (seconds)."""

    base: float = DEFAULT_BASE_S
    ceiling: float = DEFAULT_MAX_S

    def delay(self, count: int) -> float:
        """The wait after the ``count``-th refusal in a row: doubled each time, capped, with
        up to 10 % jitter so machines refused together do not come back together."""
        wait = float(min(self.base * 2 ** max(0, count - 1), self.ceiling))
        return wait * (1 + random.random() / 10) if wait < self.ceiling else wait


DEFAULT_BACKOFF = Backoff()


@dataclass(frozen=True, slots=True)
class Refusal:
    reason_code: str
    until: datetime
    count: int

    @property
    def directions(self) -> tuple[str, ...]:
        return STOPS.get(self.reason_code, ())

    def stops(self, direction: str) -> bool:
        return direction in self.directions


def note(
    store: Store,
    target: str,
    project: str,
    reason_code: str,
    message: str,
    backoff: Backoff = DEFAULT_BACKOFF,
) -> Refusal:
    """Record a refusal of ``project``: its reason, and a wait longer than the last one."""
    row = state.project_row(store, target, project) or {}
    same = row.get("reason_code") == reason_code and row.get("refused_until")
    count = (int(row.get("refused_count") or 0) if same else 0) + 1
    until = state.utc_now() + timedelta(seconds=backoff.delay(count))
    state.update_project(
        store,
        target,
        project,
        reason_code=reason_code,
        reason_message=message,
        refused_until=iso(until, milliseconds=True),
        refused_count=count,
    )
    return Refusal(reason_code, until, count)


def active(store: Store, target: str, project: str) -> Refusal | None:
    """The project's refusal while its wait lasts, else ``None``."""
    row = state.project_row(store, target, project)
    if not row or row.get("reason_code") not in STOPS:
        return None
    until = state.parse_iso(row.get("refused_until"))
    if until is None or until <= state.utc_now():
        return None
    return Refusal(row["reason_code"], until, int(row.get("refused_count") or 0))


def waiting(store: Store, target: str, project: str, direction: str) -> Refusal | None:
    """The active refusal that stops ``direction`` (``push`` or ``pull``) of ``project``."""
    refusal = active(store, target, project)
    return refusal if refusal is not None and refusal.stops(direction) else None


def clear(store: Store, target: str, project: str | None = None) -> int:
    """End the wait (of one project, or every project of ``target``); the reason stays until
    the next successful sync replaces it. The number of projects that were waiting."""
    sql = """UPDATE sync_cloud_projects SET refused_until = NULL, refused_count = 0
             WHERE target = ? AND refused_until IS NOT NULL"""
    params: list[str] = [target]
    if project is not None:
        sql += " AND project = ?"
        params.append(project)
    with store.db.write() as conn:
        return conn.execute(sql, params).rowcount


def clear_everywhere(store: Store) -> int:
    """End every wait on this machine (the cloud configuration changed)."""
    with store.db.write() as conn:
        return conn.execute(
            """UPDATE sync_cloud_projects SET refused_until = NULL, refused_count = 0
               WHERE refused_until IS NOT NULL"""
        ).rowcount


def describe(refusal: Refusal, project: str) -> str:
    """One line for people: what is refused, until when, and how to retry now."""
    what = "pushes and pulls" if refusal.stops("pull") else "pushes"
    minutes = max(0.0, (refusal.until - state.utc_now()).total_seconds() / 60)
    return (
        f"the server refused {what} of {project!r} ({refusal.reason_code}, {refusal.count} "
        f"time(s) in a row): autosync asks again at {iso(refusal.until, milliseconds=True)} (in "
        f"{minutes:.0f} min); 'engram sync --cloud --project {project}' retries now"
    )
