"""Waking long-polling pulls the moment a push commits.

Each server process keeps one LISTEN connection (psycopg 3, async) on the channel that pushes
``pg_notify`` on, so a push handled by any process behind the load balancer wakes the waiting
pulls of every process. Correctness never depends on it: waiters also re-check the database at
a short interval, and more often while the listener is reconnecting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg

from engram_cloud.sync_log import CHANNEL

log = logging.getLogger("engram_cloud.notify")
RECHECK_CONNECTED = 5.0  # seconds between database re-checks while notifications flow
RECHECK_DISCONNECTED = 0.5  # … and while the listener is down


class Notifier:
    """The latest seq announced by any push, and a way to wait for a newer one."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.latest = 0
        self.connected = False
        self._event: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._event = asyncio.Event()
        self._task = asyncio.create_task(self._listen(), name="engram-cloud-listen")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._wake()

    def _wake(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = asyncio.Event()

    async def _listen(self) -> None:
        delay = 0.2
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, application_name="engram-cloud-listen"
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.connected = True
                    delay = 0.2
                    self._wake()  # something may have committed while we were away
                    async for note in conn.notifies():
                        with contextlib.suppress(ValueError):
                            self.latest = max(self.latest, int(note.payload))
                        self._wake()
            except asyncio.CancelledError:
                self.connected = False
                raise
            except Exception as exc:  # the database restarted or is unreachable: retry
                if self.connected:
                    log.warning("notification listener lost its connection: %s", exc)
            self.connected = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def wait(self, after: int, timeout: float) -> None:
        """Return when a seq greater than ``after`` was announced, or after ``timeout`` (or
        sooner, to re-check the database)."""
        if self.latest > after or timeout <= 0:
            return
        event = self._event
        if event is None:
            await asyncio.sleep(min(timeout, RECHECK_DISCONNECTED))
            return
        limit = RECHECK_CONNECTED if self.connected else RECHECK_DISCONNECTED
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), min(timeout, limit))
