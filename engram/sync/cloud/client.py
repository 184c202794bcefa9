"""The HTTP client of the team server: push and pull mutations, heartbeats, and the probes that
status and ``engram cloud upgrade doctor`` use.

Every failure becomes a :class:`CloudError` carrying one of the client reason codes
(docs/cloud-sync.md): ``auth_required`` (401), ``policy_forbidden`` (403), ``paused`` (409 ``sync-paused``),
``payload_too_large`` (413: the caller splits the batch), and ``transport_failed`` for the rest
(network errors, timeouts, 5xx, a server without the mutation routes — ``server_unsupported``
in the message). Request bodies over 1 KiB are sent zstd-compressed; httpx decodes zstd or gzip
answers. Redirects are never followed, so a token cannot leak to another host.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import zstandard

from engram import __version__, settings
from engram.errors import EngramError
from engram.sync.cloud.config import CloudConfig

log = logging.getLogger("engram.cloud")

AUTH_REQUIRED = "auth_required"
POLICY_FORBIDDEN = "policy_forbidden"
PAUSED = "paused"
TRANSPORT_FAILED = "transport_failed"
PAYLOAD_TOO_LARGE = "payload_too_large"

DEFAULT_TIMEOUT_S = 30.0
TIMEOUT_ENV = "ENGRAM_CLOUD_TIMEOUT_S"
COMPRESS_ABOVE = 1024
MAX_PUSH_BATCH = 500  # the server's limit per request (docs/cloud.md, "The sync API")
_ZSTD = zstandard.ZstdCompressor(level=3)


class CloudError(EngramError):
    """A request to the cloud server failed; ``reason_code`` says why in one word."""

    def __init__(
        self,
        reason_code: str,
        message: str,
        *,
        status: int | None = None,
        error_class: str | None = None,
        error_code: str | None = None,
        project: str | None = None,
        projects: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.reason_code = reason_code
        self.projects = projects or []  # the projects a 403 named, when it names them
        self.status = status
        self.error_class = error_class
        self.error_code = error_code
        self.project = project

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason_code": self.reason_code,
            "error": str(self),
            "status": self.status,
            "error_class": self.error_class,
            "error_code": self.error_code,
        }


@dataclass(slots=True)
class Rejection:
    mid: str | None
    error_code: str
    error: str


@dataclass(slots=True)
class PushAnswer:
    accepted: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    latest_seq: int = 0


@dataclass(slots=True)
class PullPage:
    mutations: list[dict[str, Any]]
    next: int
    has_more: bool


def default_timeout() -> float:
    raw = settings.raw(TIMEOUT_ENV)
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _guidance(reason: str) -> str:
    return {
        AUTH_REQUIRED: " — check the token (engram cloud config --token T, or ENGRAM_CLOUD_TOKEN)",
        POLICY_FORBIDDEN: " — ask the server admin to allow the project "
        "(ENGRAM_CLOUD_ALLOWED_PROJECTS or a grant)",
        PAUSED: " — an admin paused this project's sync on the server; pulls still work",
    }.get(reason, "")


def error_from_response(response: httpx.Response, project: str | None = None) -> CloudError:
    """Map a non-2xx answer (error envelope or plain text) to a :class:`CloudError`."""
    status = response.status_code
    error_class = error_code = None
    message = ""
    named: list[str] = []
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict):
        error_class = body.get("error_class") if isinstance(body.get("error_class"), str) else None
        error_code = body.get("error_code") if isinstance(body.get("error_code"), str) else None
        if isinstance(body.get("error"), str):
            message = body["error"]
        if isinstance(body.get("projects"), list):
            named = [p for p in body["projects"] if isinstance(p, str)]
    if not message:
        message = response.text.strip()[:300] or response.reason_phrase
    if status == 401:
        reason = AUTH_REQUIRED
    elif status == 403:
        reason = POLICY_FORBIDDEN
    elif status == 409 and error_code == "sync-paused":
        reason = PAUSED
    elif status == 413:
        reason = PAYLOAD_TOO_LARGE
    else:
        reason = TRANSPORT_FAILED
        if status == 404 and response.request.url.path.endswith(("/mutations/push", "/pull")):
            error_code = error_code or "server_unsupported"
            message = (
                "the server does not offer the mutation sync routes (server_unsupported): "
                "deploy a newer engram cloud server"
            )
            log.warning("[autosync] cloud mutation endpoint returned 404 (server_unsupported)")
    text = f"server answered {status}: {message}{_guidance(reason)}"
    return CloudError(
        reason,
        text,
        status=status,
        error_class=error_class,
        error_code=error_code,
        project=project,
        projects=named,
    )


class CloudClient:
    """One connection pool to one server (use it from one thread at a time)."""

    def __init__(
        self,
        config: CloudConfig,
        *,
        timeout: float | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = config.require()
        self.timeout = timeout if timeout is not None else default_timeout()
        headers = {"User-Agent": f"engram/{__version__}", "Accept": "application/json"}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self._http = httpx.Client(
            base_url=str(config.server_url),
            headers=headers,
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            follow_redirects=False,
            transport=transport,
        )

    # --- plumbing -----------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> CloudClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Sequence[tuple[str, str | int | float | bool | None]] | None = None,
        timeout: float | None = None,
        project: str | None = None,
    ) -> Any:
        headers: dict[str, str] = {}
        content: bytes | None = None
        if body is not None:
            content = body.encode() if isinstance(body, _RawBody) else orjson.dumps(body)
            headers["Content-Type"] = "application/json"
            if len(content) > COMPRESS_ABOVE:
                content = _ZSTD.compress(content)
                headers["Content-Encoding"] = "zstd"
        extra: dict[str, Any] = {}
        if timeout is not None:
            extra["timeout"] = httpx.Timeout(timeout, connect=min(self.timeout, 10.0))
        try:
            response = self._http.request(
                method, path, content=content, params=list(params or ()), headers=headers, **extra
            )
        except httpx.TimeoutException as exc:
            raise CloudError(
                TRANSPORT_FAILED,
                f"no answer from {self.config.server_url} in time ({type(exc).__name__})",
                project=project,
            ) from None
        except httpx.HTTPError as exc:
            raise CloudError(
                TRANSPORT_FAILED,
                f"cannot reach {self.config.server_url}: {exc or type(exc).__name__}",
                project=project,
            ) from None
        if response.is_redirect:
            raise CloudError(
                TRANSPORT_FAILED,
                f"the server redirected to {response.headers.get('location', '?')}: configure "
                "that URL instead (redirects are not followed, to keep the token safe)",
                status=response.status_code,
                project=project,
            )
        if not response.is_success:
            raise error_from_response(response, project)
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise CloudError(
                TRANSPORT_FAILED,
                f"the server's answer to {method} {path} is not JSON "
                f"(status {response.status_code}): is {self.config.server_url} an engram server?",
                status=response.status_code,
                project=project,
            ) from None

    # --- the routes ---------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        answer: dict[str, Any] = self._send("GET", "/health", timeout=min(self.timeout, 5.0))
        return answer

    def whoami(self) -> dict[str, Any]:
        """Who the server thinks we are and which projects we may sync (``"*"`` = all)."""
        answer: dict[str, Any] = self._send(
            "GET", "/api/v1/whoami", timeout=min(self.timeout, 10.0)
        )
        return answer

    def push(
        self, records: Sequence[str], *, created_by: str, project: str | None = None
    ) -> PushAnswer:
        """Push mutation records (their exact JSON texts, at most 500)."""
        if len(records) > MAX_PUSH_BATCH:
            raise ValueError(f"at most {MAX_PUSH_BATCH} records per push")
        # The journal keeps each record's exact text; splice them instead of re-encoding.
        body = _RawBody(created_by, records)
        answer = self._send("POST", "/sync/mutations/push", body=body, project=project)
        if not isinstance(answer, dict) or not isinstance(answer.get("accepted"), list):
            raise CloudError(
                TRANSPORT_FAILED,
                "the server's push answer has no 'accepted' list: is it an engram server?",
                project=project,
            )
        rejected = [
            Rejection(
                r.get("mid") if isinstance(r.get("mid"), str) else None,
                str(r.get("error_code") or "rejected"),
                str(r.get("error") or ""),
            )
            for r in answer.get("rejected") or []
            if isinstance(r, dict)
        ]
        return PushAnswer(
            accepted=[m for m in answer["accepted"] if isinstance(m, str)],
            rejected=rejected,
            latest_seq=int(answer.get("latest_seq") or 0),
        )

    def pull(
        self,
        since: int,
        projects: Iterable[str],
        *,
        limit: int = 500,
        wait: float = 0,
    ) -> PullPage:
        """The log after ``since`` for ``projects``, long-polling up to ``wait`` seconds."""
        names = sorted(set(projects))
        params: list[tuple[str, str | int | float]] = [("since", since), ("limit", limit)]
        params += [("project", p) for p in names]
        if wait > 0:
            params.append(("wait", wait))
        answer = self._send(
            "GET",
            "/sync/mutations/pull",
            params=params,
            timeout=self.timeout + wait if wait > 0 else None,
            project=names[0] if len(names) == 1 else None,
        )
        if not isinstance(answer, dict) or not isinstance(answer.get("mutations"), list):
            raise CloudError(
                TRANSPORT_FAILED,
                "the server's pull answer has no 'mutations' list: is it an engram server?",
            )
        return PullPage(
            mutations=answer["mutations"],
            next=int(answer.get("next") or since),
            has_more=bool(answer.get("has_more")),
        )

    def heartbeat(self, body: Mapping[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self._send(
            "POST", "/api/v1/workers/heartbeat", body=dict(body), timeout=min(self.timeout, 10.0)
        )
        return answer


class _RawBody:
    """A push body whose records are already JSON texts: spliced as they are, so the server
    receives the journal's exact bytes and nothing is parsed and re-encoded on the way."""

    __slots__ = ("created_by", "records")

    def __init__(self, created_by: str, records: Sequence[str]) -> None:
        self.created_by = created_by
        self.records = records

    def encode(self) -> bytes:
        head = b'{"created_by":' + orjson.dumps(self.created_by) + b',"mutations":['
        return head + ",".join(self.records).encode() + b"]}"
