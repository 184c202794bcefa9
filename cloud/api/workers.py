"""Client machines' heartbeats, so an admin sees which machines stopped syncing.

``POST /api/v1/workers/heartbeat`` (any authenticated client) records, per ``origin`` (the
replica's id; the hostname is only a display name: two replicas may share a host), its version,
projects, pending and quarantined counts and last push/pull times.

A machine record belongs to the principal whose heartbeat created it (its ``owner``: a managed
principal's id, or the legacy token / admin token / insecure mode): a heartbeat from anyone else
naming the same origin is refused (409 ``worker_owned_elsewhere``) and changes nothing, so a
member cannot overwrite another machine's record by reusing its origin. Members' heartbeats are
rate-bounded per principal (``ENGRAM_CLOUD_HEARTBEATS_PER_MINUTE``, 429 beyond it; admins are
not limited), so nobody floods the fleet list with invented machines. ``GET /api/v1/workers``,
``GET /api/v1/workers/{origin or hostname}`` and ``POST /api/v1/workers/cleanup?minutes=N``
(mark machines silent for N minutes offline) are for admins.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, RawBody
from sqlalchemy import Connection, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from engram.record import find_unstorable
from engram.times import iso
from engram_cloud import models, ratelimit
from engram_cloud.api.access import require_admin
from engram_cloud.auth import Principal, normalize_project_name
from engram_cloud.bodies import read_small_json
from engram_cloud.errors import ApiError, invalid_request, json_response

_ORIGIN = re.compile(r"^[0-9a-f]{16}$")
MAX_PROJECTS = 200
DEFAULT_STALE_MINUTES = 10


def _timestamp(body: dict[str, Any], name: str) -> datetime | None:
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise invalid_request("payload_invalid", f"{name} must be an RFC 3339 time or null")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise invalid_request("payload_invalid", f"{name} is not an RFC 3339 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _count(body: dict[str, Any], name: str) -> int:
    value = body.get(name, 0)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
        raise invalid_request("payload_invalid", f"{name} must be a non-negative integer")
    return value


def _text(body: dict[str, Any], name: str, limit: int, *, required: bool = False) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise invalid_request("payload_invalid", f"{name} is required and must be a string")
    if len(value) > limit:
        raise invalid_request("payload_invalid", f"{name} is longer than {limit} characters")
    return value.strip()


def parse_heartbeat(body: Any) -> dict[str, Any]:
    """The row a heartbeat writes, or 400 naming the bad field."""
    if not isinstance(body, dict):
        raise invalid_request("payload_invalid", "a heartbeat must be a JSON object")
    problem = find_unstorable(body, "heartbeat")
    if problem:
        raise invalid_request("payload_invalid", problem)
    origin = body.get("origin")
    if not isinstance(origin, str) or not _ORIGIN.match(origin):
        raise invalid_request("payload_invalid", "origin must be 16 lowercase hex digits")
    projects = body.get("projects") or []
    if not isinstance(projects, list) or len(projects) > MAX_PROJECTS:
        raise invalid_request(
            "payload_invalid", f"projects must be a list of at most {MAX_PROJECTS} names"
        )
    names = sorted({normalize_project_name(p)[:200] for p in projects} - {""})
    return {
        "origin": origin,
        "hostname": _text(body, "hostname", 255, required=True),
        "version": _text(body, "version", 100),
        "projects": names,
        "pending": _count(body, "pending"),
        "quarantined": _count(body, "quarantined"),
        "last_push_at": _timestamp(body, "last_push_at"),
        "last_pull_at": _timestamp(body, "last_pull_at"),
    }


def owner_of(principal: Principal) -> str:
    """Who a machine record belongs to: a managed principal by id (renaming it changes
    nothing), else the kind of credential (the legacy shared token is one principal)."""
    return f"principal:{principal.id}" if principal.is_managed else principal.source


def record_heartbeat(conn: Connection, row: dict[str, Any], principal: Principal) -> bool:
    """Create or refresh the machine record; ``False`` (nothing written) when another
    principal owns that origin. A record without an owner (written before owners existed) is
    claimed by its next heartbeat."""
    w = models.workers
    owner = owner_of(principal)
    values = {
        **row,
        "last_seen_at": func.now(),
        "status": "online",
        "principal_id": principal.id,
        "principal_name": principal.label,
        "owner": owner,
    }
    stmt = pg_insert(w).values(**values)
    written = conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["origin"],
            set_={k: stmt.excluded[k] for k in values if k != "origin"},
            where=or_(w.c.owner == owner, w.c.owner == ""),
        ).returning(w.c.origin)
    ).first()
    return written is not None


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


def worker_dict(row: Any, now: datetime) -> dict[str, Any]:
    return {
        "origin": row.origin,
        "hostname": row.hostname,
        "version": row.version,
        "projects": row.projects,
        "pending": row.pending,
        "quarantined": row.quarantined,
        "last_push_at": iso(row.last_push_at),
        "last_pull_at": iso(row.last_pull_at),
        "last_seen_at": iso(row.last_seen_at),
        "first_seen_at": iso(row.first_seen_at),
        "seconds_since_seen": max(0, int((now - row.last_seen_at).total_seconds())),
        "status": row.status,
        "principal_id": row.principal_id,
        "principal_name": row.principal_name,
    }


def list_workers(
    conn: Connection, *, key: str | None = None, status: str | None = None
) -> list[dict[str, Any]]:
    w = models.workers
    query = select(w).order_by(w.c.hostname, w.c.origin)
    if key is not None:
        query = query.where(or_(w.c.origin == key, w.c.hostname == key))
    if status is not None:
        query = query.where(w.c.status == status)
    now = conn.execute(select(func.now())).scalar_one()
    return [worker_dict(r, now) for r in conn.execute(query)]


def mark_stale_offline(conn: Connection, minutes: int) -> int:
    w = models.workers
    return conn.execute(
        update(w)
        .where(
            w.c.status == "online",
            w.c.last_seen_at < func.now() - func.make_interval(0, 0, 0, 0, 0, minutes),
        )
        .values(status="offline")
    ).rowcount


# --- routes --------------------------------------------------------------------------------------


@post("/api/v1/workers/heartbeat", sync_to_thread=True, status_code=200)
def heartbeat(
    request: Request, body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    settings = request.app.state.settings
    row = parse_heartbeat(read_small_json(request, body))
    with request.app.state.engine.begin() as conn:
        wait = heartbeat_allowed(conn, principal, settings.heartbeats_per_minute)
        written = wait is None and record_heartbeat(conn, row, principal)
        now = conn.execute(select(func.now())).scalar_one()
    if wait is not None:
        raise ApiError(
            429,
            "policy",
            "rate_limited",
            f"too many heartbeats: at most {settings.heartbeats_per_minute} a minute per user",
            headers={"Retry-After": str(wait)},
        )
    if not written:
        raise ApiError(
            409,
            "policy",
            "worker_owned_elsewhere",
            f"machine {row['origin']} is registered by another user: its record was not changed",
        )
    return json_response({"status": "ok", "origin": row["origin"], "server_time": iso(now)})


@get("/api/v1/workers", sync_to_thread=True, guards=[require_admin])
def workers_index(request: Request) -> Response[bytes]:
    status = request.query_params.get("status") or None
    if status not in (None, "online", "offline"):
        raise invalid_request("invalid_parameter", "status must be online or offline")
    with request.app.state.engine.connect() as conn:
        found = list_workers(conn, status=status)
    return json_response({"workers": found, "count": len(found)})


@get("/api/v1/workers/{key:str}", sync_to_thread=True, guards=[require_admin])
def worker_detail(request: Request, key: FromPath[str]) -> Response[bytes]:
    with request.app.state.engine.connect() as conn:
        found = list_workers(conn, key=key[:255])
    if not found:
        raise ApiError(404, "invalid_request", "not_found", f"no machine {key[:100]!r}")
    return json_response({"workers": found, "count": len(found)})


@post("/api/v1/workers/cleanup", sync_to_thread=True, status_code=200, guards=[require_admin])
def workers_cleanup(request: Request) -> Response[bytes]:
    raw = request.query_params.get("minutes") or str(DEFAULT_STALE_MINUTES)
    try:
        minutes = int(raw)
    except ValueError:
        raise invalid_request("invalid_parameter", "minutes must be an integer") from None
    if not 1 <= minutes <= 525_600:
        raise invalid_request("invalid_parameter", "minutes must be between 1 and 525600")
    with request.app.state.engine.begin() as conn:
        marked = mark_stale_offline(conn, minutes)
    return json_response({"status": "ok", "minutes": minutes, "marked_offline": marked})


ROUTES = [heartbeat, workers_index, worker_detail, workers_cleanup]
