"""Checks every request of the team server passes before any handler runs, shared by the JSON
API and the dashboard: no path or query parameter may carry text the database cannot store.

PostgreSQL refuses NUL in text, so a NUL that reached a query used to surface as a 500 on any
route that looks a parameter up. Refusing it here, once, with a 400 keeps every route (and
every route added later) from having to remember it. Request bodies are checked where they are
parsed (:func:`engram.record.validate_record` for records, :func:`text_field` for other fields).
"""

from __future__ import annotations

from typing import Any

from litestar import Request

from engram.text import unstorable_reason
from engram_cloud.errors import invalid_request

#: The largest integer a PostgreSQL ``bigint`` holds: ids and sequence numbers beyond it are
#: refused as input instead of overflowing in the database.
MAX_BIGINT = 2**63 - 1


def refuse_unstorable_parameters(request: Request[Any, Any, Any]) -> None:
    """``before_request`` hook: 400 when the path or a query parameter holds NUL or a lone
    surrogate (the dashboard renders it as an error page, the API as the error envelope)."""
    problem = unstorable_reason(request.scope.get("path", ""))
    if problem:
        raise invalid_request("invalid_parameter", f"the request path {problem}")
    for name, value in request.query_params.multi_items():
        problem = unstorable_reason(name) or unstorable_reason(value)
        if problem:
            raise invalid_request("invalid_parameter", f"query parameter {name[:40]!r} {problem}")


def text_field(value: str, name: str) -> str:
    """``value``, or 400 naming ``name`` when no database can store it."""
    problem = unstorable_reason(value)
    if problem:
        raise invalid_request("payload_invalid", f"{name} {problem}")
    return value


def bigint(raw: str, name: str, *, minimum: int = 0) -> int:
    """A query parameter as an integer between ``minimum`` and :data:`MAX_BIGINT` (ASCII digits
    only: ``int()`` also reads other scripts' digits), or 400 naming it."""
    text = raw.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()):
        raise invalid_request("invalid_parameter", f"{name} must be an integer, got {raw[:50]!r}")
    value = int(text) if len(digits) <= 19 else (MAX_BIGINT + 1) * (-1 if text[0] == "-" else 1)
    if value < minimum:
        lowest = "0 or more" if minimum == 0 else f"at least {minimum}"
        raise invalid_request("invalid_parameter", f"{name} must be {lowest}")
    if value > MAX_BIGINT:
        raise invalid_request("invalid_parameter", f"{name} must be at most {MAX_BIGINT}")
    return value


def seconds(raw: str, name: str) -> float:
    """A query parameter as a finite number of seconds, 0 or more, or 400 naming it."""
    try:
        value = float(raw)
    except ValueError:
        raise invalid_request(
            "invalid_parameter", f"{name} must be a number of seconds, got {raw[:50]!r}"
        ) from None
    if not 0 <= value < float("inf"):
        raise invalid_request("invalid_parameter", f"{name} must be 0 or more seconds")
    return value
