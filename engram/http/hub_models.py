"""The bodies of the first seed's Hub API (``engram hub``), field for field as the seed
names them (``SessionSearchInput``, ``SearchResponse``, ``HealthResponse``...).

Only types are checked here (a wrong type is the seed's 422); the rules on values — query length,
regular-expression syntax, the session id pattern, dates, "at least one filter" — are the
store's (:mod:`engram.store.pattern`), answered as the seed's 400s.
"""

from __future__ import annotations

import msgspec


class SessionSearchInput(msgspec.Struct):
    """``POST /search``: at least one field must be given. Unknown fields are ignored, as the
    seed's (pydantic) model does."""

    query: str = ""
    session_id: str | None = None
    tags: list[str] | None = None
    date_from: str | None = None
    date_to: str | None = None


class SearchResponse(msgspec.Struct):
    query: str
    #: Matching memories' text, newest first, at most 4,000 characters.
    results: str
    elapsed_ms: float


class HealthResponse(msgspec.Struct):
    status: str
    timestamp: str
    version: str


class StatusResponse(msgspec.Struct):
    service: str
    status: str
    #: The data directory (the seed's entity files are Engram's database rows).
    entities_path: str
    #: The SQLite database that is both store and index.
    index_path: str
    timestamp: str
    version: str
    #: ``available``, or why the database cannot be read (searches then answer 503).
    index: str
    memories: int | None = None
    sessions: int | None = None


class ServiceInfo(msgspec.Struct):
    service: str
    status: str
    version: str
    description: str
    endpoints: dict[str, str]


class Detail(msgspec.Struct):
    """Every error but 422: ``{"detail": "..."}``, as FastAPI answers."""

    detail: str


class FieldError(msgspec.Struct):
    type: str
    loc: list[str]
    msg: str


class ValidationDetail(msgspec.Struct):
    """422: ``{"detail": [{"type", "loc", "msg"}, ...]}``, as FastAPI answers."""

    detail: list[FieldError]
