"""Reading JSON request bodies without letting a small request cost a lot of memory.

Decompression stops at the body limit (:mod:`engram_cloud.compression`), but a body within the
limit can still be expensive to *parse*: 8 MiB of ``{},{},…`` — 732 bytes once zstd-compressed —
becomes 2.8 million Python dicts, about 110 MB, and eight such requests at once took a server
past 900 MB. So bodies are read in two classes:

* **light** (at most :data:`HEAVY_BYTES` once decompressed: every heartbeat and admin call, and
  most pushes): parsed at once; the worst case is a few MB;
* **heavy**: first counted — the JSON values it holds, from its structural characters outside
  strings (a regular-expression pass at C speed) — and refused (413) beyond what the route can
  use (a push of 500 records needs far fewer than 2.8 million); then parsed, and their whole
  request handled, while holding one of :data:`HEAVY_SLOTS` per-process slots. Pushes write under one PostgreSQL lock anyway, so this
  costs no throughput; a request that waits more than :data:`HEAVY_WAIT_S` for a slot gets 503
  ``server_busy`` (clients retry). A compressed body is first inflated only up to
  :data:`HEAVY_BYTES`: a waiting request holds its compressed bytes, never the inflated ones.

Handlers use :func:`json_body` as a context manager around all their work.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from litestar import Request

from engram_cloud.compression import decode_body
from engram_cloud.errors import ApiError, invalid_request, payload_too_large

HEAVY_BYTES = 256 * 1024
HEAVY_SLOTS = 2
HEAVY_WAIT_S = 30.0
#: Bodies of the small routes (heartbeat, admin) may not exceed this once decompressed.
SMALL_BODY_BYTES = 64 * 1024

_heavy = threading.BoundedSemaphore(HEAVY_SLOTS)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def count_values(raw: bytes | bytearray) -> int:
    """About how many JSON values (objects, arrays, scalars) ``raw`` holds: one per ``,``,
    ``[`` and ``{`` outside strings (object keys are not counted: orjson shares them)."""
    bare = _STRING.sub(b'""', raw)
    return bare.count(b",") + bare.count(b"[") + bare.count(b"{") + 1


def _invalid_body(message: str) -> ApiError:
    return invalid_request("payload_invalid", f"invalid request body: {message}")


def parse_json(raw: bytes | bytearray, invalid: Callable[[str], ApiError] = _invalid_body) -> Any:
    """``raw`` parsed (400 ``payload_invalid`` otherwise).

    orjson refuses a lone surrogate escape (``"\\ud800"``) anywhere in the text, which would
    refuse a whole push for one bad record; the standard parser reads it, so such a body is
    parsed again by it and the bad record is then rejected on its own (``payload_invalid``)."""
    if not raw.strip():
        raise invalid("the body is empty")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc):
            raise invalid(str(exc)) from None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise invalid(str(exc)) from None


def _busy() -> ApiError:
    return ApiError(
        503,
        "blocked",
        "server_busy",
        "the server is busy with other large requests: retry shortly",
        headers={"Retry-After": "5"},
    )


@contextmanager
def json_body(
    request: Request[Any, Any, Any],
    body: bytes,
    limit: int,
    invalid: Callable[[str], ApiError] = _invalid_body,
    *,
    max_values: Callable[[int], int] | None = None,
) -> Iterator[Any]:
    """The request's JSON document for the duration of the ``with`` block (see the module
    docstring); 413 beyond ``limit`` bytes once decompressed or beyond ``max_values(size)``
    JSON values in a heavy body, ``invalid(reason)`` when it is not JSON."""
    headers = request.headers
    probe = min(limit, HEAVY_BYTES)
    try:
        raw: bytes | bytearray | None = decode_body(body, headers, probe)
    except ApiError as exc:
        if exc.status_code != 413 or probe == limit:
            raise
        raw = None  # larger than a light body: inflate it again once a slot is ours
    if raw is not None and len(raw) <= probe:
        yield parse_json(raw, invalid)
        return
    if limit <= HEAVY_BYTES:
        raise payload_too_large(limit)
    if not _heavy.acquire(timeout=HEAVY_WAIT_S):
        raise _busy()
    try:
        if raw is None:
            raw = decode_body(body, headers, limit)
        if max_values is not None:
            found, allowed = count_values(raw), max_values(len(raw))
            if found > allowed:
                raise ApiError(
                    413,
                    "repairable",
                    "upgrade_repairable_payload_too_large",
                    f"the body holds about {found} JSON values; this route reads at most "
                    f"{allowed} (send fewer records per request)",
                )
        doc = parse_json(raw, invalid)
        del raw
        yield doc
    finally:
        _heavy.release()


def read_small_json(
    request: Request[Any, Any, Any],
    body: bytes,
    invalid: Callable[[str], ApiError] = _invalid_body,
) -> Any:
    """The JSON document of a route whose bodies are always small (at most
    :data:`SMALL_BODY_BYTES` once decompressed); ``invalid(reason)`` when it is not JSON."""
    with json_body(request, body, SMALL_BODY_BYTES, invalid) as doc:
        return doc
