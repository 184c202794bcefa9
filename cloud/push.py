"""Pushing to the team server, as one call per push route: the batch's shape and size, each
record on its own (rejected ones are listed, the rest go on), that the caller may write every
project in it (403 and one audit row otherwise), that none is paused (409 and one audit row),
then the batch stored exactly once (:mod:`engram_cloud.sync_log`) with one audit row per
project. The older ``{"entries": […]}`` body (clients before the mutation records) takes the
same path through :func:`engram_cloud.legacy.entry_candidate`.

The HTTP routes (:mod:`engram_cloud.api.sync`) only read the body and answer with what these
functions return; nothing here knows about requests.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from engram_cloud import chunks, controls, sync_log
from engram_cloud.auth import Principal, can_access, normalize_project_name, require_projects
from engram_cloud.errors import ApiError, invalid_request
from engram_cloud.guards import text_field
from engram_cloud.legacy import (
    CHUNK_SECTIONS,
    canonical_chunk,
    chunk_candidates,
    entry_candidate,
)
from engram_cloud.settings import Settings
from engram_cloud.sync_log import ClockBound

MAX_CREATED_BY = 200
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
    engine: Engine,
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


def push_mutations(
    engine: Engine, settings: Settings, principal: Principal, doc: Any
) -> dict[str, Any]:
    """Validate, authorize, store and audit one push body; the answer's JSON document
    (``accepted`` mids, ``rejected`` records with their reasons, ``latest_seq``)."""
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
        candidates: list[Any] = []
        rejected: list[Any] = []
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
    return answer


# --- chunks of the older format ----------------------------------------------------------------

ACTION_CHUNK_PUSH = "chunk_push"


def payload_invalid(message: str) -> ApiError:
    return ApiError(
        400, "repairable", "upgrade_repairable_payload_invalid", f"invalid push payload: {message}"
    )


def chunk_project(raw: Any, query_project: str | None) -> str:
    """The chunk's project: the body's, else the query's (400 when neither names one)."""
    project = normalize_project_name(raw) or normalize_project_name(query_project)
    if not project:
        raise ApiError(400, "blocked", "upgrade_blocked_project_required", "project is required")
    return text_field(project, "project")


def client_time(raw: Any) -> datetime | None:
    if raw is None or raw == "":
        return None
    try:
        moment = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise payload_invalid("client_created_at must be an RFC 3339 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def push_chunk(
    engine: Engine, settings: Settings, principal: Principal, doc: Any, query_project: str | None
) -> dict[str, Any]:
    """Validate, authorize, store and audit one chunk of the older format, decomposed into the
    mutation log; the answer's JSON document."""
    if not isinstance(doc, dict):
        raise payload_invalid("the body must be a JSON object")
    project = chunk_project(doc.get("project"), query_project)
    data = doc.get("data")
    if data is None:
        raise payload_invalid("data is required")
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
    client_created_at = client_time(doc.get("client_created_at"))
    try:
        chunk_id, raw, document = canonical_chunk(data, project)
        candidates, rejected, skipped = chunk_candidates(chunk_id, document, clock_of(settings))
    except ValueError as exc:
        raise payload_invalid(str(exc)) from None
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
    return {
        "status": "ok",
        "chunk_id": chunk_id,
        "mutations": {
            "accepted": len(result.accepted),
            "rejected": [r.to_dict() for r in refused],
            "skipped": skipped,
        },
        "latest_seq": result.latest_seq,
    }
