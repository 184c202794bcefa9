"""The machines routes (``/api/v1/workers``): heartbeats, the fleet list, one machine, cleanup —
thin shells over :mod:`engram_cloud.fleet`, speaking two vocabularies on one table.

* ``POST /api/v1/workers/heartbeat``: a body naming an ``origin`` is our clients' heartbeat
  (origin, hostname, version, projects, pending and quarantined counts, last push/pull times;
  a bad one is 400 naming the field), answered ``{"status": "ok", "origin", "worker_id",
  "server_time"}``. Any other body is the first seed's (hostname, tailscale_ip, local_ip,
  ram_gb, gpu_type: :mod:`engram_cloud.api.seed_workers`), keyed by hostname and answered
  ``{"status": "accepted", "worker_id", "message"}``. Either way a record belongs to the
  principal whose heartbeat created it (409 ``worker_owned_elsewhere`` for anyone else, nothing
  changed) and members share one bound of ``ENGRAM_CLOUD_HEARTBEATS_PER_MINUTE`` (429 beyond it;
  admins are not limited).
* ``GET /api/v1/workers[?status=online|unhealthy|offline]``: the seed's array of machines;
  ``GET /api/v1/workers/{hostname or origin}``: one (the one seen most recently under that
  hostname), 404 otherwise; ``POST /api/v1/workers/cleanup?minutes=60``: mark machines silent
  that long offline, ``{"status": "completed", "workers_marked_offline": n, "minutes"}``.
  Each sees and cleans only the machines the caller may see (:class:`~engram_cloud.fleet.FleetView`).
* Errors carry the seed's ``detail`` beside our envelope.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, RawBody
from sqlalchemy import func, select

from engram.record import find_unstorable
from engram.times import iso
from engram_cloud import fleet
from engram_cloud.api import seed_workers as seed
from engram_cloud.auth import Principal, normalize_project_name
from engram_cloud.bodies import read_small_json
from engram_cloud.errors import ApiError, invalid_request, json_response
from engram_cloud.fleet import FleetView, Liveness, record_heartbeat
from engram_cloud.guards import bigint
from engram_cloud.settings import Settings

__all__ = ["ROUTES", "parse_heartbeat", "record_heartbeat"]

_ORIGIN = re.compile(r"^[0-9a-f]{16}$")
MAX_PROJECTS = 200
MAX_HOSTNAME = 255
DEFAULT_CLEANUP_MINUTES = 60  # the seed's default
MAX_CLEANUP_MINUTES = 525_600  # a year


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
        "hostname": _text(body, "hostname", MAX_HOSTNAME, required=True),
        "version": _text(body, "version", 100),
        "projects": names,
        "pending": _count(body, "pending"),
        "quarantined": _count(body, "quarantined"),
        "last_push_at": _timestamp(body, "last_push_at"),
        "last_pull_at": _timestamp(body, "last_pull_at"),
    }


# --- routes --------------------------------------------------------------------------------------

_ERRORS = seed.EXCEPTION_HANDLERS  # every error also carries the seed's "detail"


def _limits(request: Request) -> tuple[Settings, Liveness]:
    settings: Settings = request.app.state.settings
    return settings, Liveness.of(settings)


def _refused(settings: Settings, wait: int | None, what: str) -> ApiError:
    if wait is not None:
        return ApiError(
            429,
            "policy",
            "rate_limited",
            f"too many heartbeats: at most {settings.heartbeats_per_minute} a minute per user",
            headers={"Retry-After": str(wait)},
        )
    return ApiError(
        409,
        "policy",
        "worker_owned_elsewhere",
        f"machine {what} is registered by another user: its record was not changed",
    )


@post("/api/v1/workers/heartbeat", sync_to_thread=True, status_code=200, exception_handlers=_ERRORS)
def heartbeat(
    request: Request, body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    """Either vocabulary: a body naming an ``origin`` is ours, anything else the seed's."""
    settings, _ = _limits(request)
    # Which vocabulary is not known before parsing: a body that is not JSON gets the seed's 422.
    document = read_small_json(request, body, seed.invalid_json)
    seed_shape = seed.is_seed_body(document)
    row = seed.parse_heartbeat(document) if seed_shape else parse_heartbeat(document)
    with request.app.state.engine.begin() as conn:
        wait = fleet.heartbeat_allowed(conn, principal, settings.heartbeats_per_minute)
        worker_id = None
        if wait is None and seed_shape:
            projects = fleet.seed_projects(settings, principal)
            worker_id = fleet.record_seed_heartbeat(conn, row, principal, projects)
        elif wait is None:
            worker_id = fleet.record_heartbeat(conn, row, principal)
        now = conn.execute(select(func.now())).scalar_one()
    if worker_id is None:
        raise _refused(settings, wait, row["hostname"] if seed_shape else row["origin"])
    if seed_shape:
        return json_response(seed.accepted(worker_id, row["hostname"]))
    return json_response(
        {"status": "ok", "origin": row["origin"], "worker_id": worker_id, "server_time": iso(now)}
    )


def _status_filter(request: Request) -> str | None:
    status = request.query_params.get("status") or None
    if status not in (None, *fleet.STATUSES):
        raise invalid_request("invalid_parameter", "status must be online, unhealthy or offline")
    return status


@get("/api/v1/workers", sync_to_thread=True, exception_handlers=_ERRORS)
def workers_index(request: Request, principal: NamedDependency[Principal]) -> Response[bytes]:
    """The seed's array of ``WorkerResponse`` (``?status=`` keeps one status)."""
    settings, liveness = _limits(request)
    status = _status_filter(request)
    view = FleetView.of(settings, principal)
    with request.app.state.engine.connect() as conn:
        found = fleet.list_machines(conn, view, liveness, status=status)
    return json_response([seed.worker_response(m) for m in found])


@get("/api/v1/workers/{key:str}", sync_to_thread=True, exception_handlers=_ERRORS)
def worker_detail(
    request: Request, key: FromPath[str], principal: NamedDependency[Principal]
) -> Response[bytes]:
    """One machine by origin, or the one seen most recently under a hostname (404 otherwise,
    also for a machine the caller may not see)."""
    settings, liveness = _limits(request)
    view = FleetView.of(settings, principal)
    found = None
    if len(key) <= MAX_HOSTNAME:
        with request.app.state.engine.connect() as conn:
            found = fleet.find_machine(conn, view, key, liveness)
    if found is None:
        raise seed.not_found(key)
    return json_response(seed.worker_response(found))


@post("/api/v1/workers/cleanup", sync_to_thread=True, status_code=200, exception_handlers=_ERRORS)
def workers_cleanup(request: Request, principal: NamedDependency[Principal]) -> Response[bytes]:
    """Mark the machines the caller sees that were silent for ``minutes`` (default 60) offline:
    the seed's ``CleanupResponse``."""
    settings, _ = _limits(request)
    raw = request.query_params.get("minutes")
    minutes = DEFAULT_CLEANUP_MINUTES if raw is None else bigint(raw, "minutes", minimum=1)
    if minutes > MAX_CLEANUP_MINUTES:
        raise invalid_request(
            "invalid_parameter", f"minutes must be between 1 and {MAX_CLEANUP_MINUTES}"
        )
    with request.app.state.engine.begin() as conn:
        marked = fleet.mark_stale_offline(conn, minutes, FleetView.of(settings, principal))
    return json_response(
        {"status": "completed", "workers_marked_offline": marked, "minutes": minutes}
    )


ROUTES = [heartbeat, workers_index, worker_detail, workers_cleanup]
