"""The background vectorizer of the long-running processes (``engram mcp``, ``engram serve``):
memories saved through them get their vector moments later, so searches rarely have to catch up
themselves, and a save still never waits for the model.

A daemon thread with a store connection of its own (never the host's, so its transactions never
interleave with a request's) sleeps until the host store's write listener says something was
written, then embeds whatever waits (:meth:`engram.store.Store.vectorize`) and sleeps again. It
also catches up once at start (after :data:`START_DELAY_S`, once the host has answered its
first requests). It runs only where the semantic extra is installed and search
is not pinned to ``lexical`` (``ENGRAM_SEARCH_MODE``), and it never takes the process down: an
error is reported in one line and the thread waits for the next write.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from engram import semantic, settings

if TYPE_CHECKING:
    from engram.store import Store

log = logging.getLogger(__name__)
#: Seconds the first run waits after start: loading ONNX Runtime and the model takes the
#: interpreter for a good while, and a client that just started ``engram mcp`` is waiting for
#: its handshake and tool list (issue 18: start-up within 1.2x of an empty server). A write
#: still gets its vector right after; a search catches up by itself meanwhile.
START_DELAY_S = 2.0


class BackgroundVectorizer:
    """Embeds waiting memories after writes, until :meth:`stop`."""

    def __init__(self, store: Store) -> None:
        self.path = store.path
        self.config = store.config
        self._dirty = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        #: Runs that finished (tests and benchmarks wait on it instead of sleeping).
        self.runs = 0
        self.idle = threading.Event()
        store.add_write_listener(self.notify)

    def notify(self) -> None:
        """Something was written: embed what waits (returns at once)."""
        self.idle.clear()
        self._dirty.set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._dirty.set()  # catch up on what was saved while no server ran
        self._thread = threading.Thread(target=self._run, name="engram-vectorizer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the batch in progress (a daemon thread: an exit never waits longer)."""
        self._stopping.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        from engram.store import Store

        store = None
        if self._stopping.wait(START_DELAY_S):
            self.idle.set()
            return
        try:
            store = Store.open(self.path, config=self.config)
            while not self._stopping.is_set():
                self._dirty.wait()
                self._dirty.clear()
                if self._stopping.is_set():
                    break
                try:
                    store.vectorize(should_stop=self._stopping.is_set)
                except Exception as exc:  # never take the server down for derived data
                    _say(f"could not embed new memories: {exc}")
                    log.debug("vectorize failed", exc_info=True)
                self.runs += 1
                if not self._dirty.is_set():
                    self.idle.set()
        except Exception as exc:
            _say(f"stopped: {exc}")
        finally:
            self.idle.set()
            if store is not None:
                store.close()


def _say(message: str) -> None:
    sys.stderr.write(f"[vectorizer] {message}\n")
    sys.stderr.flush()


def wanted(store: Store) -> bool:
    """Whether this process should run a background vectorizer (the extra is installed and
    searches are not pinned to lexical)."""
    pinned = store.config.search_mode or settings.raw("ENGRAM_SEARCH_MODE")
    return semantic.available() and pinned.lower() != "lexical"


class VectorizerService:
    """``engram serve``'s background service (``start``/``stop`` around the app's life)."""

    def __init__(self, vectorizer: BackgroundVectorizer) -> None:
        self.vectorizer = vectorizer

    async def start(self) -> None:
        self.vectorizer.start()

    async def stop(self) -> None:
        import anyio

        await anyio.to_thread.run_sync(self.vectorizer.stop)


@contextlib.asynccontextmanager
async def vectorizer_running(vectorizer: BackgroundVectorizer) -> AsyncIterator[None]:
    """``engram mcp``'s background service: runs while the client is connected."""
    service = VectorizerService(vectorizer)
    await service.start()
    try:
        yield
    finally:
        await service.stop()
