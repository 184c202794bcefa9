"""The fleet: every machine that sends heartbeats, in one table (``cloud_workers``) and two
vocabularies, and who may see which.

* **Our clients** (``kind = "engram"``) are keyed by ``origin`` (the replica's id; the hostname is
  only a display name: two replicas may share a host) and report version, projects, pending and
  quarantined counts and last push/pull times.
* **The first seed's workers** (``kind = "seed"``) are keyed by ``hostname`` — the seed's
  identity for a machine — and report ``tailscale_ip``, ``local_ip``, ``ram_gb`` and
  ``gpu_type``. They name no project, so such a machine is filed under the projects its sender
  may read when it beats (its teammates see it; grants changing later re-file it on the next
  beat).

Every machine has an integer ``id`` (the seed's ``worker_id``). A record belongs to the principal
whose heartbeat created it (its ``owner``): a heartbeat from anyone else naming the same origin or
seed hostname changes nothing. Members' heartbeats, in either shape, share one rate bound.

**Who sees what** (:class:`FleetView`): admins see every machine; anyone else sees the machines
they own and those filed under a project they may read, and of a machine's projects only those.
The JSON API, the dashboard and the live feed all apply this one rule.

**Status** is derived when read (:func:`status_of`): ``offline`` once marked so by a cleanup or
silent for ``ENGRAM_CLOUD_WORKER_OFFLINE_S`` (default an hour), ``unhealthy`` when silent for
``ENGRAM_CLOUD_WORKER_UNHEALTHY_S`` (default five minutes), else ``online``. The next heartbeat
brings a machine back online.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, false, func, or_, select, text, true, update
from sqlalchemy.dialects.postgresql import array
from sqlalchemy.dialects.postgresql import insert as pg_insert

from engram.times import iso
from engram_cloud import models, ratelimit
from engram_cloud.auth import Principal, readable_projects
from engram_cloud.settings import DEFAULT_WORKER_OFFLINE_S, DEFAULT_WORKER_UNHEALTHY_S, Settings

STATUSES = ("online", "unhealthy", "offline")
#: Projects a seed worker is filed under at most (its sender's readable projects, sorted).
MAX_PROJECTS = 200


@dataclass(frozen=True, slots=True)
class Liveness:
    """After how many seconds of silence a machine is ``unhealthy``, then ``offline``."""

    unhealthy_after: int = DEFAULT_WORKER_UNHEALTHY_S
    offline_after: int = DEFAULT_WORKER_OFFLINE_S

    @classmethod
    def of(cls, settings: Settings) -> Liveness:
        return cls(settings.worker_unhealthy_s, settings.worker_offline_s)


DEFAULT_LIVENESS = Liveness()


def status_of(stored: str, silent_seconds: float, liveness: Liveness) -> str:
    """A machine's status from its stored one (``online`` after a heartbeat, ``offline`` after
    a cleanup) and how long it has been silent."""
    if stored == "offline" or silent_seconds >= liveness.offline_after:
        return "offline"
    if silent_seconds >= liveness.unhealthy_after:
        return "unhealthy"
    return "online"


def owner_of(principal: Principal) -> str:
    """Who a machine record belongs to: a managed principal by id (renaming it changes
    nothing), else the kind of credential (the legacy shared token is one principal)."""
    return f"principal:{principal.id}" if principal.is_managed else principal.source


@dataclass(frozen=True, slots=True)
class FleetView:
    """Which machines a caller sees (see the module docstring). ``readable`` ``None`` = every
    project."""

    readable: frozenset[str] | None
    everything: bool = False
    owner: str = ""

    @classmethod
    def of(cls, settings: Settings, principal: Principal) -> FleetView:
        return cls(readable_projects(settings, principal), principal.is_admin, owner_of(principal))

    def allows(self, project: str) -> bool:
        return self.readable is None or project in self.readable

    def sees(self, projects: list[str], owner: str) -> bool:
        if self.everything or (self.owner and owner == self.owner):
            return True
        return any(self.allows(p) for p in projects)

    def shown_projects(self, projects: list[str]) -> list[str]:
        """The machine's projects this caller may know about."""
        return list(projects) if self.everything else [p for p in projects if self.allows(p)]

    def where(self) -> ColumnElement[bool]:
        """:meth:`sees` as SQL over ``cloud_workers``."""
        w = models.workers
        if self.everything:
            return true()
        if self.readable is None:
            by_project: ColumnElement[bool] = func.jsonb_array_length(w.c.projects) > 0
        elif self.readable:
            by_project = w.c.projects.has_any(array(sorted(self.readable)))
        else:
            by_project = false()
        return or_(w.c.owner == self.owner, by_project) if self.owner else by_project


def seed_projects(settings: Settings, principal: Principal) -> list[str]:
    """The projects a seed worker is filed under: what its sender may read (none when that is
    every project: such a machine is seen by its owner and admins)."""
    readable = readable_projects(settings, principal)
    return [] if readable is None else sorted(readable)[:MAX_PROJECTS]


# --- writing ------------------------------------------------------------------------------------


def heartbeat_allowed(conn: Connection, principal: Principal, per_minute: int) -> int | None:
    """Count a member's heartbeat; ``None`` when within the bound, else seconds to wait."""
    if principal.is_admin:
        return None
    key = f"heartbeat:{owner_of(principal)}"
    window = ratelimit.recent(conn, key, ratelimit.HEARTBEAT_WINDOW, limit=per_minute)
    if window.over(per_minute):
        return window.retry_after
    ratelimit.record(conn, key)
    return None


def _upsert(
    conn: Connection,
    values: dict[str, Any],
    principal: Principal,
    conflict: dict[str, Any],
) -> int | None:
    """Create or refresh a machine record; its id, or ``None`` (nothing written) when another
    principal owns it. A record without an owner (written before owners existed) is claimed by
    its next heartbeat."""
    w = models.workers
    owner = owner_of(principal)
    values = {
        **values,
        "last_seen_at": func.now(),
        "status": "online",
        "principal_id": principal.id,
        "principal_name": principal.label,
        "owner": owner,
    }
    stmt = pg_insert(w).values(**values)
    keys = set(conflict["index_elements"])
    return conn.execute(
        stmt.on_conflict_do_update(
            **conflict,
            set_={k: stmt.excluded[k] for k in values if k not in keys},
            where=or_(w.c.owner == owner, w.c.owner == ""),
        ).returning(w.c.id)
    ).scalar()


def record_heartbeat(conn: Connection, row: dict[str, Any], principal: Principal) -> int | None:
    """Our clients' heartbeat (``row`` from ``parse_heartbeat``: origin, hostname, version,
    projects, pending, quarantined, last_push_at, last_pull_at): the machine's id, or ``None``
    when another principal owns that origin."""
    return _upsert(conn, {**row, "kind": "engram"}, principal, {"index_elements": ["origin"]})


def record_seed_heartbeat(
    conn: Connection, row: dict[str, Any], principal: Principal, projects: list[str]
) -> int | None:
    """The first seed's heartbeat (``row``: hostname, tailscale_ip, local_ip, ram_gb,
    gpu_type), keyed by hostname and filed under ``projects``: the machine's id, or ``None``
    when another principal owns that hostname."""
    return _upsert(
        conn,
        {**row, "kind": "seed", "projects": projects},
        principal,
        # The partial unique index's predicate, as a literal: a bound parameter (kind = $1)
        # cannot prove the index applies once psycopg prepares the statement (its sixth use on
        # a connection), and PostgreSQL then refuses ON CONFLICT.
        {"index_elements": ["hostname"], "index_where": text("kind = 'seed'")},
    )


def mark_stale_offline(conn: Connection, minutes: int, view: FleetView) -> int:
    """Mark the machines ``view`` sees that were silent for ``minutes`` offline; how many."""
    w = models.workers
    return conn.execute(
        update(w)
        .where(
            w.c.status != "offline",
            w.c.last_seen_at < func.now() - func.make_interval(0, 0, 0, 0, 0, minutes),
            view.where(),
        )
        .values(status="offline")
    ).rowcount


# --- reading ------------------------------------------------------------------------------------


def machine_dict(row: Any, now: datetime, liveness: Liveness, view: FleetView) -> dict[str, Any]:
    """One machine in both vocabularies (the seed's fields first, ``None`` where a machine never
    reported one), its projects cut to what ``view`` may know."""
    silent = max(0, int((now - row.last_seen_at).total_seconds()))
    return {
        "id": row.id,
        "hostname": row.hostname,
        "tailscale_ip": row.tailscale_ip,
        "status": status_of(row.status, silent, liveness),
        "gpu_type": row.gpu_type,
        "ram_gb": row.ram_gb,
        "last_heartbeat": iso(row.last_seen_at),
        "created_at": iso(row.first_seen_at),
        "local_ip": row.local_ip,
        "kind": row.kind,
        "origin": row.origin,
        "version": row.version,
        "projects": view.shown_projects(row.projects or []),
        "pending": row.pending,
        "quarantined": row.quarantined,
        "last_push_at": iso(row.last_push_at),
        "last_pull_at": iso(row.last_pull_at),
        "last_seen_at": iso(row.last_seen_at),
        "first_seen_at": iso(row.first_seen_at),
        "seconds_since_seen": silent,
        "principal_id": row.principal_id,
        "principal_name": row.principal_name,
    }


def list_machines(
    conn: Connection,
    view: FleetView,
    liveness: Liveness = DEFAULT_LIVENESS,
    *,
    status: str | None = None,
) -> list[dict[str, Any]]:
    """The machines ``view`` sees, by hostname, optionally only those with ``status``."""
    w = models.workers
    now = conn.execute(select(func.now())).scalar_one()
    rows = conn.execute(select(w).where(view.where()).order_by(w.c.hostname, w.c.id))
    found = [machine_dict(r, now, liveness, view) for r in rows]
    return [m for m in found if status is None or m["status"] == status]


def find_machine(
    conn: Connection, view: FleetView, key: str, liveness: Liveness = DEFAULT_LIVENESS
) -> dict[str, Any] | None:
    """The machine ``view`` sees whose origin is ``key``, else the one seen most recently under
    the hostname ``key`` (two replicas, or a replica and a seed worker, may share a host)."""
    w = models.workers
    now = conn.execute(select(func.now())).scalar_one()
    row = conn.execute(
        select(w)
        .where(or_(w.c.origin == key, w.c.hostname == key), view.where())
        .order_by(
            # an exact origin first (NULL, a seed worker's, must not sort before false)
            func.coalesce(w.c.origin == key, False).desc(),
            w.c.last_seen_at.desc(),
            w.c.id.desc(),
        )
        .limit(1)
    ).first()
    return None if row is None else machine_dict(row, now, liveness, view)
