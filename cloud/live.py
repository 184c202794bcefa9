"""What changed on the server, as a stream of small events for open dashboards and gateway
subscribers: new memories, pushes, paused/resumed projects, machine heartbeats, and machines
turning unhealthy or offline by silence (``machine_status``: nothing is written then, so the feed
notices the moment a machine's last heartbeat crosses a threshold of
:class:`~engram_cloud.fleet.Liveness`).

One :class:`LiveFeed` per server process reads the database — never the request that caused the
change — so a push handled by any process behind the load balancer reaches the pages open on
every process. It wakes at once when a push commits (the :class:`~engram_cloud.notify.Notifier`'s
LISTEN/NOTIFY) and otherwise checks every :data:`POLL_SECONDS` for heartbeats and pauses, which
announce nothing. It reads only while someone is subscribed, with one set of queries per tick
for all subscribers; each subscriber gets only the events of projects its scope allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import anyio
import orjson
from sqlalchemy import Engine, func, select

from engram.times import iso
from engram_cloud import models
from engram_cloud.fleet import DEFAULT_LIVENESS, Liveness
from engram_cloud.notify import Notifier

log = logging.getLogger("engram_cloud.live")

POLL_SECONDS = 1.0
MAX_MUTATIONS_PER_TICK = 2000
MAX_MEMORY_EVENTS_PER_PUSH = 20
QUEUE_LIMIT = 256  # events a slow subscriber may fall behind before it is told to reload


@dataclass(slots=True, eq=False)  # kept in a set: hashed by identity
class Subscriber:
    """One open page or gateway client: which projects it may see, whose machines are its own
    (:func:`engram_cloud.fleet.owner_of`), and its outbox."""

    allows: Callable[[str], bool]
    is_admin: bool = False
    owner: str = ""
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))
    overflowed: bool = False

    def offer(self, event: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            # A stalled client must not hold memory without bound: drop, and say so once.
            if not self.overflowed:
                self.overflowed = True
                with contextlib.suppress(asyncio.QueueEmpty):
                    self.queue.get_nowait()
                self.queue.put_nowait({"type": "event", "event": "overflow"})


@dataclass(slots=True)
class _Marks:
    seq: int = 0
    heartbeat: datetime | None = None
    control: datetime | None = None
    clock: datetime | None = None  # the database's time at the last tick


class LiveFeed:
    """Turns database changes into events for its subscribers (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        notifier: Notifier,
        poll: float = POLL_SECONDS,
        liveness: Liveness = DEFAULT_LIVENESS,
    ) -> None:
        self.engine = engine
        self.notifier = notifier
        self.poll = poll
        self.liveness = liveness
        self.subscribers: set[Subscriber] = set()
        self._marks: _Marks | None = None
        self._task: asyncio.Task[None] | None = None
        self._wanted: asyncio.Event | None = None

    async def start(self) -> None:
        self._wanted = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="engram-cloud-live")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def subscribe(
        self, allows: Callable[[str], bool], *, is_admin: bool = False, owner: str = ""
    ) -> Subscriber:
        subscriber = Subscriber(allows, is_admin, owner)
        self.subscribers.add(subscriber)
        if self._wanted is not None:
            self._wanted.set()
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)

    # --- the loop -------------------------------------------------------------------------

    async def _run(self) -> None:
        assert self._wanted is not None
        while True:
            if not self.subscribers:
                self._marks = None  # nobody listened: start afresh, without a backlog
                self._wanted.clear()
                await self._wanted.wait()
                continue
            try:
                if self._marks is None:
                    self._marks = await anyio.to_thread.run_sync(self._baseline)
                await self.notifier.wait(self._marks.seq, self.poll)
                events = await anyio.to_thread.run_sync(self._changes, self._marks)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is away: keep the pages, try again
                log.warning("live feed could not read the database: %s", exc)
                await asyncio.sleep(self.poll)
                continue
            for event in events:
                self.publish(event)

    def publish(self, event: dict[str, Any]) -> None:
        """Hand ``event`` to every subscriber allowed to see it: a project's events to those
        who may read the project; a machine's to admins, to its owner and to members who may
        read one of its projects (naming only those), as the machines page shows them
        (:class:`engram_cloud.fleet.FleetView`'s rule). The owner is never sent."""
        owner = event.get("owner", "")
        if "owner" in event:
            event = {k: v for k, v in event.items() if k != "owner"}
        for subscriber in list(self.subscribers):
            shown = event
            if "projects" in event:
                visible = [p for p in event["projects"] if subscriber.allows(p)]
                if not subscriber.is_admin:
                    mine = bool(owner) and owner == subscriber.owner
                    if not visible and not mine:
                        continue
                    shown = {**event, "projects": visible}
            elif "project" in event and not subscriber.allows(event["project"]):
                continue
            subscriber.offer(shown)

    def _baseline(self) -> _Marks:
        w, c, m = models.workers, models.project_controls, models.mutations
        with self.engine.connect() as conn:
            return _Marks(
                seq=conn.execute(select(func.coalesce(func.max(m.c.seq), 0))).scalar_one(),
                heartbeat=conn.execute(select(func.max(w.c.last_seen_at))).scalar_one(),
                control=conn.execute(select(func.max(c.c.updated_at))).scalar_one(),
                clock=conn.execute(select(func.now())).scalar_one(),
            )

    def _changes(self, marks: _Marks) -> list[dict[str, Any]]:
        """Events for everything newer than ``marks`` (which it advances)."""
        m, w, c = models.mutations, models.workers, models.project_controls
        events: list[dict[str, Any]] = []
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    m.c.seq, m.c.project, m.c.entity, m.c.op, m.c.key, m.c.record, m.c.created_by
                )
                .where(m.c.seq > marks.seq)
                .order_by(m.c.seq)
                .limit(MAX_MUTATIONS_PER_TICK)
            ).all()
            if rows:
                marks.seq = rows[-1].seq
                events += _push_events(rows)
            beats = select(w).order_by(w.c.last_seen_at)
            if marks.heartbeat is not None:
                beats = beats.where(w.c.last_seen_at > marks.heartbeat)
            for row in conn.execute(beats.limit(500)):
                marks.heartbeat = row.last_seen_at
                events.append(_machine_event(row, "heartbeat", row.status))
            events += self._silences(conn, marks)
            controls = select(c).order_by(c.c.updated_at)
            if marks.control is not None:
                controls = controls.where(c.c.updated_at > marks.control)
            for row in conn.execute(controls.limit(500)):
                marks.control = row.updated_at
                events.append(
                    {
                        "type": "event",
                        "event": "pause" if not row.sync_enabled else "resume",
                        "project": row.project,
                        "reason": row.paused_reason,
                        "by": row.updated_by,
                    }
                )
        return events

    def _silences(self, conn: Any, marks: _Marks) -> list[dict[str, Any]]:
        """``machine_status`` events for machines whose silence crossed a threshold since the
        last tick (``marks.clock``, which it advances)."""
        w = models.workers
        now = conn.execute(select(func.now())).scalar_one()
        events: list[dict[str, Any]] = []
        if marks.clock is not None:
            for seconds, status in (
                (self.liveness.unhealthy_after, "unhealthy"),
                (self.liveness.offline_after, "offline"),
            ):
                edge = w.c.last_seen_at + timedelta(seconds=seconds)
                crossed = select(w).where(w.c.status == "online", edge > marks.clock, edge <= now)
                for row in conn.execute(crossed.order_by(w.c.last_seen_at).limit(500)):
                    events.append(_machine_event(row, "machine_status", status))
        marks.clock = now
        return events


def _machine_event(row: Any, event: str, status: str) -> dict[str, Any]:
    return {
        "type": "event",
        "event": event,
        "worker_id": row.id,
        "kind": row.kind,
        "hostname": row.hostname,
        "origin": row.origin,
        "tailscale_ip": row.tailscale_ip,
        "local_ip": row.local_ip,
        "ram_gb": row.ram_gb,
        "gpu_type": row.gpu_type,
        "projects": list(row.projects or []),
        "pending": row.pending,
        "status": status,
        "last_seen_at": iso(row.last_seen_at),
        "owner": row.owner,  # who else may see it; stripped by publish
    }


def _push_events(rows: Sequence[Any]) -> list[dict[str, Any]]:
    """One ``push`` event per project and contributor, and a ``memory`` event for each memory
    saved (up to a few per push: a bulk import is one push, not a thousand toasts)."""
    pushes: dict[tuple[str, str], dict[str, Any]] = {}
    memories: list[dict[str, Any]] = []
    for row in rows:
        push = pushes.setdefault(
            (row.project, row.created_by),
            {
                "type": "event",
                "event": "push",
                "project": row.project,
                "created_by": row.created_by,
                "mutations": 0,
                "memories": 0,
                "seq": row.seq,
            },
        )
        push["mutations"] += 1
        push["seq"] = row.seq
        if row.entity == "observation" and row.op == "upsert":
            push["memories"] += 1
            if push["memories"] <= MAX_MEMORY_EVENTS_PER_PUSH:
                payload = orjson.loads(row.record).get("payload") or {}
                memories.append(
                    {
                        "type": "event",
                        "event": "memory",
                        "project": row.project,
                        "key": row.key,
                        "title": str(payload.get("title") or "")[:200],
                        "kind": str(payload.get("type") or ""),
                        "created_by": row.created_by,
                        "seq": row.seq,
                    }
                )
    return [*memories, *pushes.values()]
