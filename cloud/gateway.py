"""The first seed's WebSocket gateway on the cloud server (same process, litestar WebSockets), and
the live channel of the dashboard's pages.

Protocol (docs/cloud.md, "WebSocket gateway"), at ``/ws``:

1. Within :data:`HANDSHAKE_SECONDS` the client sends ``{"token": "…"}``: any token the server's
   HTTP API accepts (a managed ``egt_…`` token, the legacy shared or admin token). The answer is
   the seed's ``{"type": "handshake", "status": "connected", "timestamp", "agents",
   "gateway_version"}``; a bad token, invalid JSON or silence gets the seed's error message and
   close code 1008.
2. Then ``ping`` → ``pong``; ``status`` → agents and ``connected_clients`` (on this process);
   ``agent_command`` runs a command we have — ``librarian``/``reindex`` (admins: rebuild the read
   model), ``hub``/``sync_status`` (the caller's projects) — anything else gets the seed's error
   shape, as do invalid JSON and unknown types (the connection stays open).
3. Our addition: ``{"type": "subscribe"}`` starts a stream of ``{"type": "event", "event":
   "memory"|"push"|"pause"|"resume"|"heartbeat"|"machine_status", …}`` for the projects the
   caller may read (:mod:`engram_cloud.live`). Seed clients never ask, so their request/answer pairs stay in step.

Dashboard pages connect to ``/dashboard/ws`` (their login cookie has ``Path=/dashboard``) and send
``{"token": null}``: the cookie then authenticates, but only when the ``Origin`` header names this
server — a foreign page's WebSocket carries the cookie too, and must not ride it.

Keep-alive (the seed's 20 s ping interval, 10 s timeout) is uvicorn's ``ws_ping_interval`` and
``ws_ping_timeout``, set by ``engram cloud serve``: ASGI gives applications no ping frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import anyio
import orjson
from litestar import WebSocket, websocket
from litestar.exceptions import WebSocketDisconnect
from sqlalchemy import func, select, text

from engram_cloud import models, read_model, sync_log
from engram_cloud.auth import INSECURE_PRINCIPAL, Principal, authenticate, readable_projects
from engram_cloud.dashboard.auth import COOKIE_NAME, resolve_session
from engram_cloud.errors import ApiError
from engram_cloud.fleet import owner_of
from engram_cloud.live import LiveFeed
from engram_cloud.settings import Settings

log = logging.getLogger("engram_cloud.gateway")

GATEWAY_VERSION = "1.0.0"
HANDSHAKE_SECONDS = 5.0
POLICY_VIOLATION = 1008
MAX_MESSAGE_CHARS = 64 * 1024
#: The seed's agents, as this server fills their roles: the librarian keeps the read model (the
#: index), the hub answers sync questions; nothing here consolidates memories.
AGENTS = {"librarian": "online", "consolidator": "offline", "hub": "online"}
COMMANDS = {("librarian", "reindex"), ("hub", "sync_status")}


def timestamp() -> str:
    """The seed's timestamp: UTC, ISO-8601, microseconds, no zone suffix."""
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


class Clients:
    """The authenticated connections of this process (the seed's ``connected_clients``)."""

    def __init__(self) -> None:
        self.count = 0


def same_origin(socket: WebSocket) -> bool:
    """Whether the ``Origin`` header names the host the browser connected to."""
    origin = socket.headers.get("origin")
    host = socket.headers.get("host")
    if not origin or not host:
        return False
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


def _principal_for(socket: WebSocket, token: Any) -> Principal | None:
    """Who the handshake names, or ``None`` (runs on a worker thread: it reads the database)."""
    state = socket.app.state
    settings: Settings = state.settings
    if isinstance(token, str) and token.strip():
        if settings.insecure:
            return INSECURE_PRINCIPAL
        # Wrong tokens count against the client's address, as on the HTTP API (a handshake is
        # one more place to guess); the count must be committed even when refusing.
        address = socket.client.host if socket.client else "unknown"
        with state.engine.connect() as conn:
            try:
                return authenticate(conn, settings, f"Bearer {token.strip()}", address)
            except ApiError as exc:
                if exc.status_code == 429:
                    raise
                return None
            finally:
                conn.commit()
    # No token: the dashboard's login cookie (or insecure mode's open door), from this origin only.
    if socket.headers.get("origin") is not None and not same_origin(socket):
        return None
    if settings.insecure:
        return INSECURE_PRINCIPAL
    cookie = socket.cookies.get(COOKIE_NAME)
    if not cookie or not same_origin(socket):
        return None
    with state.engine.connect() as conn:
        return resolve_session(conn, settings, cookie)


class Connection:
    """One authenticated gateway client."""

    def __init__(self, socket: WebSocket, principal: Principal) -> None:
        self.socket = socket
        self.principal = principal
        self.settings: Settings = socket.app.state.settings
        projects = readable_projects(self.settings, principal)
        self.projects = projects  # None = every project
        self._send_lock = asyncio.Lock()
        self._events: asyncio.Task[None] | None = None

    def allows(self, project: str) -> bool:
        return self.projects is None or project in self.projects

    async def send(self, message: dict[str, Any]) -> None:
        async with self._send_lock:
            await self.socket.send_data(orjson.dumps(message).decode(), mode="text")

    async def error(self, message: str) -> None:
        await self.send({"type": "error", "message": message})

    # --- messages ---------------------------------------------------------------------------

    async def handle(self, raw: str) -> None:
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            await self.error("Invalid JSON")
            return
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "ping":
            await self.send({"type": "pong", "timestamp": timestamp()})
        elif kind == "status":
            clients: Clients = self.socket.app.state.gateway_clients
            await self.send(
                {
                    "type": "status",
                    "agents": AGENTS,
                    "connected_clients": clients.count,
                    "timestamp": timestamp(),
                }
            )
        elif kind == "agent_command":
            await self.agent_command(message)
        elif kind == "subscribe":
            await self.subscribe()
        else:
            shown = kind if isinstance(kind, str) else orjson.dumps(kind).decode()
            await self.error(f"Unknown message type: {shown[:100]}")

    async def agent_command(self, message: dict[str, Any]) -> None:
        agent, command = message.get("agent"), message.get("command")
        if not isinstance(agent, str) or agent not in AGENTS:
            await self.error(f"Unknown agent: {str(agent)[:100]}")
            return
        if (agent, command) not in COMMANDS:
            await self.error(f"Unknown command for {agent}: {str(command)[:100]}")
            return
        try:
            if command == "reindex":
                result = await anyio.to_thread.run_sync(self._reindex, message.get("project"))
            else:
                result = await anyio.to_thread.run_sync(self._sync_status)
        except ApiError as exc:
            await self.error(str(exc))
            return
        await self.send(
            {
                "type": "agent_response",
                "agent": agent,
                "command": command,
                "status": "executed",
                "result": result,
                "timestamp": timestamp(),
            }
        )

    def _reindex(self, project: Any) -> dict[str, Any]:
        if not self.principal.is_admin:
            raise ApiError(403, "policy", "policy_forbidden", "forbidden: admin role required")
        if project is not None and (not isinstance(project, str) or not self.allows(project)):
            raise ApiError(403, "policy", "policy_forbidden", "forbidden: project not allowed")
        with self.socket.app.state.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": sync_log.PUSH_LOCK})
            stats = read_model.rebuild(conn, project)
        return {
            "message": f"Read model rebuilt for {project or 'every project'}",
            "project": project,
            "applied": stats.applied,
            "stale": stats.stale,
        }

    def _sync_status(self) -> dict[str, Any]:
        m, c = models.mutations, models.project_controls
        with self.socket.app.state.engine.connect() as conn:
            latest = select(m.c.project, func.max(m.c.seq), func.count()).group_by(m.c.project)
            paused = {r.project: r for r in conn.execute(select(c))}
            projects = []
            for name, seq, count in conn.execute(latest.order_by(m.c.project)):
                if not self.allows(name):
                    continue
                control = paused.get(name)
                projects.append(
                    {
                        "project": name,
                        "latest_seq": seq,
                        "mutations": count,
                        "paused": bool(control is not None and not control.sync_enabled),
                        "reason": control.paused_reason if control is not None else None,
                    }
                )
        return {"message": f"{len(projects)} projects", "projects": projects}

    async def subscribe(self) -> None:
        if self._events is not None:
            await self.send({"type": "subscribed", "projects": self._shown_projects()})
            return
        feed: LiveFeed = self.socket.app.state.live_feed
        subscriber = feed.subscribe(
            self.allows, is_admin=self.principal.is_admin, owner=owner_of(self.principal)
        )

        async def forward() -> None:
            try:
                while True:
                    await self.send(await subscriber.queue.get())
            finally:
                feed.unsubscribe(subscriber)

        await self.send({"type": "subscribed", "projects": self._shown_projects()})
        self._events = asyncio.create_task(forward(), name="engram-gateway-events")

    def _shown_projects(self) -> Any:
        return "*" if self.projects is None else sorted(self.projects)

    async def close(self) -> None:
        if self._events is not None:
            self._events.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._events


async def _receive_text(socket: WebSocket, timeout: float | None = None) -> str | None:
    """The next message as text (``None`` once the client has gone)."""
    message = await asyncio.wait_for(socket.receive(), timeout)
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    if isinstance(text, str):
        return text
    raw = message.get("bytes")
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""


async def _refuse(socket: WebSocket, message: str) -> None:
    with contextlib.suppress(Exception):
        await socket.send_data(orjson.dumps({"type": "error", "message": message}).decode())
        await socket.close(code=POLICY_VIOLATION, reason=message[:120])


async def serve(socket: WebSocket) -> None:
    """One client, from handshake to goodbye."""
    await socket.accept()
    try:
        raw = await _receive_text(socket, HANDSHAKE_SECONDS)
    except TimeoutError:
        await _refuse(socket, "Handshake timeout")
        return
    except WebSocketDisconnect:
        return
    if raw is None:
        return
    try:
        hello = orjson.loads(raw[:MAX_MESSAGE_CHARS])
    except orjson.JSONDecodeError:
        await _refuse(socket, "Invalid JSON")
        return
    token = hello.get("token") if isinstance(hello, dict) else None
    try:
        principal = await anyio.to_thread.run_sync(_principal_for, socket, token)
    except ApiError:  # the address sent too many wrong tokens
        await _refuse(socket, "Too many invalid authentication tokens: try again later")
        return
    if principal is None:
        await _refuse(socket, "Invalid authentication token")
        return
    clients: Clients = socket.app.state.gateway_clients
    client = Connection(socket, principal)
    clients.count += 1
    try:
        await client.send(
            {
                "type": "handshake",
                "status": "connected",
                "timestamp": timestamp(),
                "agents": AGENTS,
                "gateway_version": GATEWAY_VERSION,
            }
        )
        while (raw := await _receive_text(socket)) is not None:
            if len(raw) > MAX_MESSAGE_CHARS:
                await client.error(f"Message too large (limit {MAX_MESSAGE_CHARS} characters)")
                continue
            await client.handle(raw)
    except WebSocketDisconnect:
        pass
    finally:
        clients.count -= 1
        await client.close()


@websocket("/ws")
async def gateway(socket: WebSocket) -> None:
    await serve(socket)


@websocket("/dashboard/ws")
async def dashboard_gateway(socket: WebSocket) -> None:
    await serve(socket)


ROUTES = [gateway, dashboard_gateway]
