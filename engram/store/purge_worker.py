"""The background purge of long-running processes (``engram serve``, ``engram mcp``): a while
after the last write (``Config.purge_delay_s``, debounced), if something was hard-deleted —
here, by another process, or by a sync — run :meth:`Store.purge` on a connection of its own.

Writes reach it through ``store.add_write_listener``; the listener only sets an event, so
writers never wait for it.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator

from engram.errors import EngramError
from engram.store.store import Store

log = logging.getLogger(__name__)


class PurgeWorker:
    """A thread that purges ``delay`` seconds after the last write, when a purge is pending."""

    def __init__(self, store: Store, delay: float | None = None) -> None:
        self.store = store
        self.delay = store.config.purge_delay_s if delay is None else delay
        self._poked = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.purges = 0  # how many purges ran (for status and tests)

    def poke(self) -> None:
        """A write committed (called on the writer's thread: must not block)."""
        self._poked.set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self.store.add_write_listener(self.poke)
        self._poked.set()  # a delete may have happened before this process started
        self._thread = threading.Thread(target=self._run, name="engram-purge", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._poked.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._poked.wait()
            # Debounce: wait until no write arrived for `delay` seconds.
            while self._poked.is_set() and not self._stopping.is_set():
                self._poked.clear()
                self._stopping.wait(self.delay)
            if self._stopping.is_set():
                return
            try:
                self._purge_if_pending()
            except (EngramError, OSError, sqlite3.Error) as exc:  # busy: the next write retries
                log.warning("background purge failed: %s", exc)

    def _purge_if_pending(self) -> None:
        with Store.open(self.store.path, config=self.store.config) as own:
            if own.purge_pending():
                own.purge()
                self.purges += 1


class PurgeService:
    """``engram serve``'s background service (``start``/``stop`` around the app's life)."""

    def __init__(self, worker: PurgeWorker) -> None:
        self.worker = worker

    async def start(self) -> None:
        self.worker.start()

    async def stop(self) -> None:
        import anyio

        await anyio.to_thread.run_sync(self.worker.stop)


@contextlib.asynccontextmanager
async def purge_running(worker: PurgeWorker) -> AsyncIterator[PurgeWorker]:
    """``engram mcp``'s background service: purges while the client is connected."""
    service = PurgeService(worker)
    await service.start()
    try:
        yield worker
    finally:
        await service.stop()
