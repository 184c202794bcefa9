"""The sync routes: mutation push/pull (what Engram's clients use) and the older chunk routes
(``POST /sync/push``, ``GET /sync/pull``, ``GET /sync/pull/{chunk_id}``), whose chunks are also
decomposed into the mutation log.

Each push route reads its body within the size and value budgets and makes one service call
(:func:`engram_cloud.push.push_mutations`, :func:`engram_cloud.push.push_chunk`: validation,
authorization, pause, storage and audit). ``GET /sync/mutations/pull`` serves the log in commit
order for the projects the caller may read, long-polling up to ``wait`` seconds when there is
nothing new. Query parameters are declared on the handlers (so the OpenAPI schema lists them);
numbers are checked by :mod:`engram_cloud.guards` so every refusal is the error envelope naming
the parameter (litestar's own conversion would accept ``1.0`` and refuse an empty value).
"""

from __future__ import annotations

import gzip
import time

import anyio
import orjson
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, RawBody

from engram_cloud import chunks, push, sync_log
from engram_cloud.auth import Principal, can_access, normalize_project_name, readable_projects
from engram_cloud.bodies import json_body
from engram_cloud.errors import ApiError, forbidden, invalid_request, json_response
from engram_cloud.guards import bigint, seconds
from engram_cloud.settings import Settings

#: JSON values a pushed record may hold (its envelope and payload need about 30; the rest is
#: room for fields a newer Engram adds). Bounds what a large push body may cost to parse.
VALUES_PER_RECORD = 256
#: A chunk document's rows hold a value per 12 bytes or more; a body much denser than one per
#: 8 bytes is not a chunk (``{},{},…`` is one per 3).
BYTES_PER_CHUNK_VALUE = 8
GZIP_ENVELOPE_TYPE = "application/vnd.engram.sync+gzip; version=1"


@post("/sync/mutations/push", sync_to_thread=True, status_code=200)
def push_mutations(
    request: Request, body: RawBody, principal: NamedDependency[Principal]
) -> Response[bytes]:
    """Append a batch of mutation records; answer which were accepted and which rejected."""
    settings: Settings = request.app.state.settings
    budget = settings.max_batch * VALUES_PER_RECORD + 1_000
    with json_body(request, body, settings.max_push_bytes, max_values=lambda _size: budget) as doc:
        answer = push.push_mutations(request.app.state.engine, settings, principal, doc)
    return json_response(answer)


def pull_projects(
    settings: Settings, principal: Principal, requested: list[str] | None
) -> frozenset[str] | None:
    """The projects a pull reads: those named (each readable by the caller, else 403), else
    every project the caller may read (``None`` = all)."""
    if not requested:
        return readable_projects(settings, principal)
    names = {normalize_project_name(p) for p in requested}
    if "" in names:
        raise invalid_request("empty_project", "project must not be empty")
    denied = sorted(p for p in names if not can_access(settings, principal, p))
    if denied:
        raise forbidden(projects=[p[:200] for p in denied[:20]])
    return frozenset(names)


@get("/sync/mutations/pull")
async def pull_mutations(
    request: Request,
    principal: NamedDependency[Principal],
    since: FromQuery[str | None] = None,
    since_seq: FromQuery[str | None] = None,
    limit: FromQuery[str | None] = None,
    wait: FromQuery[str | None] = None,
    project: FromQuery[list[str] | None] = None,
) -> Response[bytes]:
    """The log after ``since`` (alias ``since_seq``), in commit order, at most ``limit`` rows
    (clamped to the server's maximum); waits up to ``wait`` s for something new. A seq beyond
    what PostgreSQL's bigint holds is a 400, not an overflow in the database."""
    settings: Settings = request.app.state.settings
    engine = request.app.state.engine
    notifier = request.app.state.notifier
    after = bigint(since, "since") if since else bigint(since_seq, "since_seq") if since_seq else 0
    rows = bigint(limit, "limit", minimum=1) if limit else settings.default_pull_limit
    rows = min(rows, settings.max_pull_limit)
    patience = min(seconds(wait or "0", "wait"), settings.max_wait_seconds)
    projects = pull_projects(settings, principal, project)

    def fetch() -> sync_log.Page:
        with engine.connect() as conn:
            return sync_log.pull(conn, since=after, projects=projects, limit=rows)

    deadline = time.monotonic() + patience
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
# ``project`` is read as a list so that a repeated one means its first value, as it always did.


@post("/sync/push", sync_to_thread=True, status_code=200)
def push_chunk(
    request: Request,
    body: RawBody,
    principal: NamedDependency[Principal],
    project: FromQuery[list[str] | None] = None,
) -> Response[bytes]:
    """Store one chunk of the older format and decompose it into the mutation log (the body's
    ``project``, else the query's)."""
    settings: Settings = request.app.state.settings
    with json_body(
        request,
        body,
        settings.max_push_bytes,
        push.payload_invalid,
        max_values=lambda size: size // BYTES_PER_CHUNK_VALUE + 10_000,
    ) as doc:
        answer = push.push_chunk(
            request.app.state.engine, settings, principal, doc, _first(project)
        )
    return json_response(answer)


def _first(project: list[str] | None) -> str | None:
    """The first ``project`` query parameter (the chunk routes take one)."""
    return project[0] if project else None


def _readable(settings: Settings, principal: Principal, project: list[str] | None) -> str:
    name = push.chunk_project(None, _first(project))
    if not can_access(settings, principal, name):
        raise forbidden()
    return name


@get("/sync/pull", sync_to_thread=True)
def pull_manifest(
    request: Request,
    principal: NamedDependency[Principal],
    project: FromQuery[list[str] | None] = None,
) -> Response[bytes]:
    """The chunks pushed for a project, oldest first."""
    name = _readable(request.app.state.settings, principal, project)
    with request.app.state.engine.connect() as conn:
        return json_response(chunks.manifest(conn, name))


@get("/sync/pull/{chunk_id:str}", sync_to_thread=True)
def pull_chunk(
    request: Request,
    chunk_id: FromPath[str],
    principal: NamedDependency[Principal],
    project: FromQuery[list[str] | None] = None,
) -> Response[bytes]:
    """One chunk's stored JSON (gzip envelope when the client asks for it)."""
    name = _readable(request.app.state.settings, principal, project)
    if not chunk_id.strip():
        raise invalid_request("invalid_parameter", "chunk id is required")
    with request.app.state.engine.connect() as conn:
        data = chunks.payload(conn, name, chunk_id[:64])
    if data is None:
        raise ApiError(
            404, "invalid_request", "not_found", f"read chunk: {chunk_id[:64]} not found"
        )
    if "application/vnd.engram.sync+gzip" in request.headers.get("accept", ""):
        return Response(gzip.compress(data), media_type=GZIP_ENVELOPE_TYPE)
    return Response(data, media_type="application/json")


ROUTES = [push_mutations, pull_mutations, push_chunk, pull_manifest, pull_chunk]
