"""The first seed's Worker API vocabulary (docs/cloud.md, "Client machines and the Worker API"),
spoken on our machines routes: which heartbeat bodies are the seed's, their validation, the
seed's ``WorkerResponse``, and errors its clients can read.

* A heartbeat body without an ``origin`` is the seed's ``WorkerHeartbeatRequest``: ``hostname``,
  ``tailscale_ip``, ``gpu_type`` (strings) and ``ram_gb`` (a number) are required, ``local_ip``
  may be a string or null; unknown fields are ignored, as the seed's pydantic model does. A bad
  one is FastAPI's 422 ``{"detail": [{"type", "loc", "msg"}, …]}`` listing every bad field.
* Machines are answered in the seed's ``WorkerResponse`` fields first (``id``, ``hostname``,
  ``tailscale_ip``, ``status``, ``gpu_type``, ``ram_gb``, ``last_heartbeat``, ``created_at``;
  a machine that never reported a seed field gets ``""`` or ``0.0``, never null, since the seed's
  types are not optional), then ``local_ip`` and our own fields.
* Every error of these routes carries the seed's ``detail`` beside our envelope
  (``error_class``, ``error_code``, ``error``), so both kinds of client read it:
  :data:`EXCEPTION_HANDLERS` wraps the server's handlers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson
from litestar import Request, Response

from engram.text import unstorable_reason
from engram_cloud.errors import EXCEPTION_HANDLERS as API_HANDLERS
from engram_cloud.errors import ApiError, json_response

MAX_TEXT = 255
MAX_RAM_GB = 1_048_576.0  # a petabyte: anything larger is a unit mistake
_TEXT_FIELDS = (("hostname", True), ("tailscale_ip", True), ("local_ip", False), ("gpu_type", True))


def is_seed_body(body: Any) -> bool:
    """Whether a heartbeat body is the seed's (ours always names the replica's ``origin``)."""
    return not (isinstance(body, dict) and "origin" in body)


def field_error(kind: str, field: str | None, message: str) -> dict[str, Any]:
    """One entry of FastAPI's 422 list."""
    return {"type": kind, "loc": ["body", field] if field else ["body"], "msg": message}


def unprocessable(errors: list[dict[str, Any]]) -> ApiError:
    """The seed's 422 for a malformed body, inside our envelope."""
    summary = "; ".join(
        f"{e['loc'][-1]}: {e['msg']}" if len(e["loc"]) > 1 else e["msg"] for e in errors
    )
    return ApiError(
        422,
        "invalid_request",
        "payload_invalid",
        f"invalid heartbeat: {summary}",
        extra={"detail": errors},
    )


def invalid_json(message: str) -> ApiError:
    """A body that is not JSON (for :func:`engram_cloud.bodies.json_body`)."""
    return unprocessable([field_error("json_invalid", None, f"JSON decode error: {message}")])


def _text(body: dict[str, Any], name: str, required: bool, errors: list[dict[str, Any]]) -> Any:
    if name not in body or (body[name] is None and not required):
        if required:
            errors.append(field_error("missing", name, "Field required"))
        return None
    value = body[name]
    if not isinstance(value, str):
        errors.append(field_error("string_type", name, "Input should be a valid string"))
        return None
    value = value.strip()
    if problem := unstorable_reason(value):
        errors.append(field_error("value_error", name, f"Value error, {problem}"))
    elif len(value) > MAX_TEXT:
        errors.append(
            field_error(
                "string_too_long", name, f"String should have at most {MAX_TEXT} characters"
            )
        )
    elif name == "hostname" and not value:
        errors.append(
            field_error("string_too_short", name, "String should have at least 1 character")
        )
    elif name == "hostname" and (
        "/" in value or any(c.isspace() or not c.isprintable() for c in value)
    ):
        # The hostname is the machine's identity and is looked up in a URL path.
        errors.append(
            field_error(
                "value_error",
                name,
                "Value error, a hostname has no slash, whitespace or control character",
            )
        )
    return value


def _ram(body: dict[str, Any], errors: list[dict[str, Any]]) -> float | None:
    if "ram_gb" not in body:
        errors.append(field_error("missing", "ram_gb", "Field required"))
        return None
    value = body["ram_gb"]
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):  # pydantic's lax mode reads "8.0" too
        try:
            number = float(value.strip())
        except ValueError:
            errors.append(
                field_error(
                    "float_parsing",
                    "ram_gb",
                    "Input should be a valid number, unable to parse string as a number",
                )
            )
            return None
    if number is None:
        errors.append(field_error("float_type", "ram_gb", "Input should be a valid number"))
    elif not math.isfinite(number):
        errors.append(field_error("finite_number", "ram_gb", "Input should be a finite number"))
    elif number < 0:
        errors.append(
            field_error(
                "greater_than_equal", "ram_gb", "Input should be greater than or equal to 0"
            )
        )
    elif number > MAX_RAM_GB:
        errors.append(
            field_error(
                "less_than_equal", "ram_gb", f"Input should be less than or equal to {MAX_RAM_GB:g}"
            )
        )
    else:
        return number
    return None


def parse_heartbeat(body: Any) -> dict[str, Any]:
    """The row a seed heartbeat writes (hostname, tailscale_ip, local_ip, ram_gb, gpu_type), or
    the seed's 422 listing every bad field."""
    if not isinstance(body, dict):
        raise unprocessable(
            [
                field_error(
                    "model_attributes_type", None, "Input should be a valid dictionary or object"
                )
            ]
        )
    errors: list[dict[str, Any]] = []
    row = {name: _text(body, name, required, errors) for name, required in _TEXT_FIELDS}
    row["ram_gb"] = _ram(body, errors)
    if errors:
        raise unprocessable(errors)
    return row


def accepted(worker_id: int, hostname: str) -> dict[str, Any]:
    """The seed's ``HeartbeatResponse``."""
    return {
        "status": "accepted",
        "worker_id": worker_id,
        "message": f"Heartbeat received from {hostname}",
    }


def worker_response(machine: dict[str, Any]) -> dict[str, Any]:
    """A machine (from :func:`engram_cloud.fleet.machine_dict`) as the seed's
    ``WorkerResponse``, followed by our own fields."""
    return {
        **machine,
        "tailscale_ip": machine["tailscale_ip"] or "",
        "gpu_type": machine["gpu_type"] or "",
        "ram_gb": float(machine["ram_gb"] or 0.0),
    }


def not_found(key: str) -> ApiError:
    """The seed's 404 for a hostname nobody (that the caller may see) reported."""
    return ApiError(404, "invalid_request", "not_found", f"Worker {key[:100]!r} not found")


# --- errors both vocabularies read -----------------------------------------------------------


def _with_detail(original: Callable[[Request, Any], Response[Any]]) -> Callable[..., Response[Any]]:
    def handler(request: Request, exc: Exception) -> Response[Any]:
        response = original(request, exc)
        try:
            body = orjson.loads(response.content)
        except (orjson.JSONDecodeError, TypeError):
            return response
        if not isinstance(body, dict) or "detail" in body:
            return response
        body["detail"] = body.get("error", "error")
        status = response.status_code or 500  # the original handler always sets one
        return json_response(body, status, headers=dict(response.headers))

    return handler


#: The server's exception handlers, each adding the seed's ``detail`` to our envelope.
EXCEPTION_HANDLERS: dict[Any, Any] = {
    exc_type: _with_detail(handler) for exc_type, handler in API_HANDLERS.items()
}
