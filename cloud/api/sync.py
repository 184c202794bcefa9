"""The sync routes: mutation push/pull (what Engram's clients use) and the older chunk routes
(``POST /sync/push``, ``GET /sync/pull``, ``GET /sync/pull/{chunk_id}``), whose chunks are also
decomposed into the mutation log.

``POST /sync/mutations/push`` checks, in order: body size (413), compression and JSON (400),
batch shape and size (400), each record on its own (rejected ones are listed, the rest go on:
malformed, NUL or lone surrogates anywhere in it, a clock more than the allowed drift ahead of
the server's), that the caller may write every project in the batch (403 + one audit row), that
none is paused (409 + one audit row), then stores the batch exactly once
(:mod:`engram_cloud.sync_log`).

``GET /sync/mutations/pull`` serves the log in commit order for the projects the caller may
read, long-polling up to ``wait`` seconds when there is nothing new.
"""

from __future__ import annotations

import gzip
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import anyio
import orjson
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, RawBody

from engram_cloud import chunks, controls, sync_log
from engram_cloud.auth import (
    Principal,
    can_access,
    normalize_project_name,
    readable_projects,
    require_projects,
)
from engram_cloud.bodies import json_body
from engram_cloud.errors import ApiError, forbidden, invalid_request, json_response
from engram_cloud.guards import bigint, text_field
from engram_cloud.legacy import CHUNK_SECTIONS, canonical_chunk, chunk_candidates, entry_candidate
from engram_cloud.settings import Settings
from engram_cloud.sync_log import ClockBound

MAX_CREATED_BY = 200
#: JSON values a pushed record may hold (its envelope and payload need about 30; the rest is
#: room for fields a newer Engram adds). Bounds what a large push body may cost to parse.
VALUES_PER_RECORD = 256
#: A chunk document's rows hold a value per 12 bytes or more; a body much denser than one per
#: 8 bytes is not a chunk (``{},{},…`` is one per 3).
BYTES_PER_CHUNK_VALUE = 8
ACTION_MUTATION_PUSH = "mutation_push"


def clock_of(settings: Settings) -> ClockBound:
    """The server's clock now, with its configured drift (``ENGRAM_CLOUD_MAX_CLOCK_DRIFT_S``)."""
    return ClockBound.now(settings.max_clock_drift_s * 1000)


def contributor_of(principal: Principal, created_by: str | None) -> str:
    """A managed principal is named by the server; others by what the client says."""
    if principal.is_managed:
        return principal.label
    return (created_by or "").strip() or principal.display_name or "unknown"


def read_created_by(doc: dict[str, Any]) -> str | None:
    value = doc.get("created_by")
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_request("payload_invalid", "created_by must be a string")
    if len(value) > MAX_CREATED_BY:
        raise invalid_request(
            "payload_invalid", f"created_by is longer than {MAX_CREATED_BY} characters"
        )
    return text_field(value, "created_by")


def audit_paused(
    conn: Any,
    settings: Settings,
    principal: Principal,
    contributor: str,
    counts: Counter[str],
    action: str,
) -> dict[str, str | None]:
    """The paused projects among ``counts``; a push naming any leaves one audit row (written in
    ``conn``'s transaction, which the caller commits even though it refuses the push)."""
    paused = controls.paused_projects(conn, counts)
    if paused:
        controls.audit_refusal(
            conn,
            contributor=contributor,
            action=action,
            outcome=controls.OUTCOME_PAUSED,
            reason_code="sync-paused",
            refused={p: counts[p] for p in paused},
            submitted=sum(counts.values()),
            principal_id=principal.id,
            limits=controls.AuditLimits.of(settings),
        )
    return paused


def paused_error(paused: dict[str, str | None]) -> ApiError:
    """409 ``sync-paused`` naming the (first) paused project."""
    project = sorted(paused)[0]
    return ApiError(
        409,
        "policy",
        "sync-paused",
        f'sync is paused for project "{project}"',
        extra={
            "project": project,
            "project_source": "request_body",
            "project_path": "",
            "paused_projects": sorted(paused)[: controls.MAX_NAMED],
            "reason": paused[project],
        },
    )


def refuse_forbidden(
    settings: Settings,
    engine: Any,
    principal: Principal,
    contributor: str,
    counts: Counter[str],
    action: str,
) -> None:
    """403 unless the caller may write every project; a refusal leaves one audit row."""
    try:
        require_projects(settings, principal, set(counts))
    except ApiError:
        denied = {p: n for p, n in counts.items() if not can_access(settings, principal, p)}
        with engine.begin() as conn:
            controls.audit_refusal(
                conn,
                contributor=contributor,
                action=action,
                outcome=controls.OUTCOME_FORBIDDEN,
                reason_code="policy_forbidden",
                refused=denied or counts,
                submitted=sum(counts.values()),
                principal_id=principal.id,
                limits=controls.AuditLimits.of(settings),
            )
        raise


@post("/sync/mutations/push", sync_to_thread=True, status_code=200)
def push_mutations(
    request: Request, body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    """Append a batch of mutation records; answer which were accepted and which rejected."""
    settings: Settings = request.app.state.settings
    budget = settings.max_batch * VALUES_PER_RECORD + 1_000
    with json_body(request, body, settings.max_push_bytes, max_values=lambda _size: budget) as doc:
        return _push_mutations(request, settings, doc, principal)


def _push_mutations(
    request: Request, settings: Settings, doc: Any, principal: Principal
) -> Response[bytes]:
    engine = request.app.state.engine
    if not isinstance(doc, dict):
        raise invalid_request("payload_invalid", "request body must be a JSON object")
    legacy = "mutations" not in doc and "entries" in doc
    items = doc.get("entries") if legacy else doc.get("mutations")
    if not isinstance(items, list):
        raise invalid_request(
            "payload_invalid", 'request body must hold a "mutations" list of records'
        )
    if not items:
        raise ApiError(
            400, "repairable", "empty_batch", "mutation batch must contain at least one entry"
        )
    if len(items) > settings.max_batch:
        raise invalid_request(
            "batch_too_large",
            f"batch too large: max {settings.max_batch} mutations per request",
        )
    created_by = read_created_by(doc)
    contributor = contributor_of(principal, created_by)
    clock = clock_of(settings)
    if legacy:
        candidates, rejected = [], []
        for index, entry in enumerate(items):
            outcome = entry_candidate(entry, index, clock)
            (rejected if isinstance(outcome, sync_log.Rejection) else candidates).append(outcome)
    else:
        candidates, rejected = sync_log.prepare(items, clock)
    counts = Counter(c.project for c in candidates)
    refuse_forbidden(settings, engine, principal, contributor, counts, ACTION_MUTATION_PUSH)
    with engine.begin() as conn:
        paused = audit_paused(conn, settings, principal, contributor, counts, ACTION_MUTATION_PUSH)
        if not paused:
            result = sync_log.push(
                conn,
                candidates,
                contributor=contributor,
                principal_id=principal.id,
                source="entries_push" if legacy else "mutation_push",
            )
            accepted = Counter(c.project for c in result.accepted)
            controls.write_audit(
                conn,
                [
                    {
                        "contributor": contributor,
                        "project": project,
                        "action": ACTION_MUTATION_PUSH,
                        "outcome": controls.OUTCOME_ACCEPTED,
                        "entry_count": accepted[project],
                        "principal_id": principal.id,
                        "metadata": {
                            "submitted": counts[project],
                            "rejected": counts[project] - accepted[project],
                        },
                    }
                    for project in sorted(counts)
                ],
                controls.AuditLimits.of(settings),
            )
    if paused:
        raise paused_error(paused)
    rejected = sorted([*rejected, *result.rejected], key=lambda r: r.index)
    answer: dict[str, Any] = {
        "accepted": [c.mid for c in result.accepted],
        "rejected": [r.to_dict() for r in rejected],
        "latest_seq": result.latest_seq,
    }
    if legacy:
        answer["accepted_seqs"] = [result.seqs[c.mid] for c in result.accepted]
    return json_response(answer)


def _int_param(request: Request, names: tuple[str, ...], default: int, *, minimum: int = 0) -> int:
    for name in names:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            continue
        return bigint(raw, name, minimum=minimum)
    return default


def pull_parameters(
    request: Request, settings: Settings, principal: Principal
) -> tuple[int, frozenset[str] | None, int, float]:
    """``(since, projects, limit, wait)`` from the query string, checked (a seq beyond what
    PostgreSQL's bigint holds is a 400, not an overflow in the database)."""
    since = _int_param(request, ("since", "since_seq"), 0)
    limit = _int_param(request, ("limit",), settings.default_pull_limit, minimum=1)
    limit = min(limit, settings.max_pull_limit)
    raw_wait = request.query_params.get("wait") or "0"
    try:
        wait = float(raw_wait)
    except ValueError:
        raise invalid_request(
            "invalid_parameter", f"wait must be a number of seconds, got {raw_wait[:50]!r}"
        ) from None
    if not 0 <= wait < float("inf"):
        raise invalid_request("invalid_parameter", "wait must be 0 or more seconds")
    wait = min(wait, settings.max_wait_seconds)
    requested = request.query_params.getall("project", [])
    if requested:
        names = {normalize_project_name(p) for p in requested}
        if "" in names:
            raise invalid_request("empty_project", "project must not be empty")
        denied = sorted(p for p in names if not can_access(settings, principal, p))
        if denied:
            raise forbidden(projects=[p[:200] for p in denied[:20]])
        return since, frozenset(names), limit, wait
    return since, readable_projects(settings, principal), limit, wait


@get("/sync/mutations/pull")
async def pull_mutations(
    request: Request, principal: NamedDependency[Principal]
) -> Response[bytes]:
    """The log after ``since``, in commit order; waits up to ``wait`` s for something new."""
    settings: Settings = request.app.state.settings
    engine = request.app.state.engine
    notifier = request.app.state.notifier
    since, projects, limit, wait = pull_parameters(request, settings, principal)

    def fetch() -> sync_log.Page:
        with engine.connect() as conn:
            return sync_log.pull(conn, since=since, projects=projects, limit=limit)

    deadline = time.monotonic() + wait
    seen = notifier.latest  # announced before this fetch: only a newer announcement wakes us
    page = await anyio.to_thread.run_sync(fetch)
    while not page.rows and (remaining := deadline - time.monotonic()) > 0:
        await notifier.wait(seen, remaining)
        seen = notifier.latest
        page = await anyio.to_thread.run_sync(fetch)
    return json_response(
        {
            "mutations": [{**orjson.loads(record), "seq": seq} for seq, record in page.rows],
            "next": page.next,
            "has_more": page.has_more,
        }
    )


# --- chunk routes (older clients) --------------------------------------------------------------

ACTION_CHUNK_PUSH = "chunk_push"
GZIP_ENVELOPE_TYPE = "application/vnd.engram.sync+gzip; version=1"


def _payload_invalid(message: str) -> ApiError:
    return ApiError(
        400, "repairable", "upgrade_repairable_payload_invalid", f"invalid push payload: {message}"
    )


def _chunk_project(request: Request, raw: Any) -> str:
    project = normalize_project_name(raw) or normalize_project_name(
        request.query_params.get("project")
    )
    if not project:
        raise ApiError(400, "blocked", "upgrade_blocked_project_required", "project is required")
    return text_field(project, "project")


def _client_time(raw: Any) -> datetime | None:
    if raw is None or raw == "":
        return None
    try:
        moment = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise _payload_invalid("client_created_at must be an RFC 3339 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@post("/sync/push", sync_to_thread=True, status_code=200)
def push_chunk(
    request: Request, body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    """Store one chunk of the older format and decompose it into the mutation log."""
    settings: Settings = request.app.state.settings
    with json_body(
        request,
        body,
        settings.max_push_bytes,
        _payload_invalid,
        max_values=lambda size: size // BYTES_PER_CHUNK_VALUE + 10_000,
    ) as doc:
        return _push_chunk(request, settings, doc, principal)


def _push_chunk(
    request: Request, settings: Settings, doc: Any, principal: Principal
) -> Response[bytes]:
    engine = request.app.state.engine
    if not isinstance(doc, dict):
        raise _payload_invalid("the body must be a JSON object")
    project = _chunk_project(request, doc.get("project"))
    data = doc.get("data")
    if data is None:
        raise _payload_invalid("data is required")
    created_by = read_created_by(doc)
    if isinstance(doc.get("client_created_at"), str):
        text_field(doc["client_created_at"], "client_created_at")
    contributor = contributor_of(principal, created_by)
    rows = 0
    if isinstance(data, dict):
        rows = sum(len(v) for s in CHUNK_SECTIONS if isinstance(v := data.get(s), list))
    counts = Counter({project: rows})
    refuse_forbidden(settings, engine, principal, contributor, counts, ACTION_CHUNK_PUSH)
    with engine.begin() as conn:
        paused = audit_paused(conn, settings, principal, contributor, counts, ACTION_CHUNK_PUSH)
    if paused:
        raise paused_error(paused)
    client_created_at = _client_time(doc.get("client_created_at"))
    try:
        chunk_id, raw, document = canonical_chunk(data, project)
        candidates, rejected, skipped = chunk_candidates(chunk_id, document, clock_of(settings))
    except ValueError as exc:
        raise _payload_invalid(str(exc)) from None
    with engine.begin() as conn:
        outcome = chunks.store(
            conn,
            project=project,
            chunk_id=chunk_id,
            payload=raw,
            document=document,
            created_by=contributor,
            client_created_at=client_created_at,
            principal_id=principal.id,
        )
        if outcome == chunks.CONFLICT:
            raise ApiError(
                409,
                "repairable",
                "upgrade_repairable_chunk_conflict",
                f"chunk {chunk_id} already exists with different content",
            )
        result = sync_log.push(
            conn,
            candidates,
            contributor=contributor,
            principal_id=principal.id,
            source="chunk_push",
        )
        controls.audit(
            conn,
            contributor=contributor,
            project=project,
            action=ACTION_CHUNK_PUSH,
            outcome=controls.OUTCOME_ACCEPTED,
            entry_count=len(result.accepted),
            principal_id=principal.id,
            metadata={
                "chunk_id": chunk_id,
                "new": result.inserted,
                "repeat": outcome,
                "rejected": len(rejected) + len(result.rejected),
            },
            limits=controls.AuditLimits.of(settings),
        )
    refused = sorted([*rejected, *result.rejected], key=lambda r: r.index)
    return json_response(
        {
            "status": "ok",
            "chunk_id": chunk_id,
            "mutations": {
                "accepted": len(result.accepted),
                "rejected": [r.to_dict() for r in refused],
                "skipped": skipped,
            },
            "latest_seq": result.latest_seq,
        }
    )


def _readable(request: Request, principal: Principal) -> str:
    project = _chunk_project(request, None)
    if not can_access(request.app.state.settings, principal, project):
        raise forbidden()
    return project


@get("/sync/pull", sync_to_thread=True)
def pull_manifest(request: Request, principal: NamedDependency[Principal]) -> Response[bytes]:
    """The chunks pushed for a project, oldest first."""
    project = _readable(request, principal)
    with request.app.state.engine.connect() as conn:
        return json_response(chunks.manifest(conn, project))


@get("/sync/pull/{chunk_id:str}", sync_to_thread=True)
def pull_chunk(
    request: Request, chunk_id: FromPath[str], principal: NamedDependency[Principal]
) -> Response[bytes]:
    """One chunk's stored JSON (gzip envelope when the client asks for it)."""
    project = _readable(request, principal)
    if not chunk_id.strip():
        raise invalid_request("invalid_parameter", "chunk id is required")
    with request.app.state.engine.connect() as conn:
        data = chunks.payload(conn, project, chunk_id[:64])
    if data is None:
        raise ApiError(
            404, "invalid_request", "not_found", f"read chunk: {chunk_id[:64]} not found"
        )
    if "application/vnd.engram.sync+gzip" in request.headers.get("accept", ""):
        return Response(gzip.compress(data), media_type=GZIP_ENVELOPE_TYPE)
    return Response(data, media_type="application/json")


ROUTES = [push_mutations, pull_mutations, push_chunk, pull_manifest, pull_chunk]
