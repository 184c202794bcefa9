"""The TUI's only door to the database: a thread-safe facade over :class:`engram.store.Store`.

Every method here runs on a Textual worker thread, never on the UI thread, so a slow or locked
database can delay an answer but never freeze the screen. The gateway opens the store lazily (the
first call opens it, so opening a locked or migrating database is also off the UI thread) and
remembers since when calls have been waiting, which the app shows as "waiting for the database".

Live search runs on a second connection of its own: when a newer keystroke arrives, the search
still running for an older one is interrupted instead of making the newer one queue behind it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from engram import settings as config_module
from engram.errors import EngramError, NotFoundError
from engram.settings import Config
from engram.store import (
    History,
    Observation,
    ProjectInfo,
    Prompt,
    Session,
    Stats,
    Store,
    Timeline,
)
from engram.store.models import MemoryRelations

T = TypeVar("T")

#: Most search results the TUI lists (the CLI and MCP default to far fewer).
SEARCH_CAP = 200
#: Results fetched per keystroke; more are fetched as the list is scrolled towards its end.
SEARCH_PAGE = 50
RECENT_ON_DASHBOARD = 8


@dataclass(frozen=True, slots=True)
class ObservationRow:
    """An observation as a list shows it: with whether its session is still open."""

    observation: Observation
    active: bool
    #: Relations to other memories (the detail screen shows them; lists leave them out).
    relations: MemoryRelations | None = None


@dataclass(frozen=True, slots=True)
class SyncTarget:
    """A place this replica syncs with: ``kind`` is ``git`` or ``cloud``; ``pending`` counts the
    changes still to send (known for the cloud, whose enrolled projects say what is sent)."""

    kind: str
    name: str
    pending: int | None = None
    projects: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Dashboard:
    stats: Stats
    recent: list[ObservationRow]
    database: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One live-search answer; ``generation`` tells stale answers from the current one."""

    generation: int
    query: str
    rows: list[ObservationRow]
    #: Whether asking for more rows may find more (the page was full and below the cap).
    more: bool = False


class Stale(Exception):
    """A search was superseded by a newer keystroke before or while it ran."""


class Closing(RuntimeError):
    """The TUI is quitting and has closed the store: nobody waits for this answer."""


def as_engram_error(exc: Exception) -> EngramError:
    """Errors the store raises on purpose pass as they are; anything else (a bug, a disk
    error) is still shown as one line, never left as a screen that keeps saying "Loading…"."""
    if isinstance(exc, EngramError):
        return exc
    return EngramError(f"unexpected error: {type(exc).__name__}: {exc}")


class Gateway:
    """Opens the store on first use; every public method is safe to call from any thread."""

    def __init__(self, config: Config | None = None) -> None:
        base = config or config_module.load()
        # The TUI lists more search results than the agent-facing faces return by default.
        self.config = dataclasses.replace(base, max_search_results=SEARCH_CAP)
        self._open_lock = threading.Lock()
        self._store: Store | None = None
        self._search_store: Store | None = None
        self._waits_lock = threading.Lock()
        self._waits: dict[int, float] = {}
        self._search_state = threading.Lock()
        self._search_run = threading.Lock()
        self._search_generation = 0
        self._search_running: int | None = None
        self._closed = False

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def database_path(self) -> str:
        return str(self.config.db_path)

    def _open(self) -> Store:
        with self._open_lock:
            if self._closed:
                raise Closing("the TUI is closing")
            if self._store is None:
                self._store = Store.open(config=self.config)
            return self._store

    @property
    def store(self) -> Store:
        """The open store (opening it on first use; may wait on a locked database)."""
        with self._waiting():
            return self._open()

    def close(self) -> None:
        with self._open_lock:
            self._closed = True
            for store in (self._search_store, self._store):
                if store is not None:
                    store.close()
            self._store = self._search_store = None

    # --- waiting ------------------------------------------------------------------------------

    @contextmanager
    def _waiting(self) -> Iterator[None]:
        key = threading.get_ident()
        with self._waits_lock:
            nested = key in self._waits
            if not nested:
                self._waits[key] = time.monotonic()
        try:
            yield
        finally:
            if not nested:
                with self._waits_lock:
                    self._waits.pop(key, None)

    def waiting_for(self) -> float:
        """Seconds the oldest call still running has waited (0 when none is running)."""
        with self._waits_lock:
            if not self._waits:
                return 0.0
            return time.monotonic() - min(self._waits.values())

    def call(self, fn: Callable[[Store], T]) -> T:
        """Run ``fn(store)``, counted as a database wait."""
        with self._waiting():
            return fn(self._open())

    # --- reads ----------------------------------------------------------------------------------

    def _rows(self, store: Store, observations: list[Observation]) -> list[ObservationRow]:
        """Attach the "active" flag: whether each observation's session is still open."""
        active: dict[tuple[str, str], bool] = {}
        for obs in observations:
            session = (obs.project, obs.session_id)  # sessions are per project
            if session not in active:
                try:
                    active[session] = store.get_session(obs.session_id, project=obs.project).active
                except NotFoundError:  # a replicated row whose session never arrived
                    active[session] = False
        return [ObservationRow(o, active[(o.project, o.session_id)]) for o in observations]

    def dashboard(self, project: str | None) -> Dashboard:
        def read(store: Store) -> Dashboard:
            stats = store.stats(project)
            recent = store.recent_observations(project, limit=RECENT_ON_DASHBOARD)
            return Dashboard(stats, self._rows(store, recent), str(store.path))

        return self.call(read)

    def sync_targets(self) -> list[SyncTarget]:
        """The configured cloud server (with what autosync still has to push for the enrolled
        projects) and the git sync directories this replica has exported to or imported from."""
        from engram.sync.cloud.config import TARGET_PREFIX, load_cloud_config
        from engram.sync.cloud.state import enrolled_projects

        def read(store: Store) -> list[SyncTarget]:
            found: list[SyncTarget] = []
            cloud = load_cloud_config(self.config.data_dir)
            if cloud.configured:
                projects = tuple(enrolled_projects(store))
                pending = (
                    store.journal.count_pending(cloud.target, projects=projects)
                    if projects
                    else None
                )
                found.append(SyncTarget("cloud", cloud.server_url or "", pending, projects))
            for name in store.journal.targets():
                if not name.startswith(TARGET_PREFIX):
                    found.append(SyncTarget("git", name.removeprefix("git:")))
            return found

        return self.call(read)

    def count_recent(self, project: str | None) -> int:
        return self.call(lambda s: s.count_observations(project))

    def recent(self, project: str | None, offset: int, limit: int) -> list[ObservationRow]:
        return self.call(
            lambda s: self._rows(s, s.recent_observations(project, limit=limit, offset=offset))
        )

    def count_sessions(self, project: str | None) -> int:
        return self.call(lambda s: s.count_sessions(project))

    def sessions(self, project: str | None, offset: int, limit: int) -> list[Session]:
        return self.call(lambda s: s.recent_sessions(project, limit=limit, offset=offset))

    def session(self, session_id: str) -> tuple[Session, int, int]:
        """A session with its counts of live observations and prompts."""

        def read(store: Store) -> tuple[Session, int, int]:
            session = store.get_session(session_id)
            observations, prompts = store.session_counts(session_id)
            return session, observations, prompts

        return self.call(read)

    def session_observations(
        self, session_id: str, offset: int, limit: int
    ) -> list[ObservationRow]:
        return self.call(
            lambda s: self._rows(s, s.session_observations(session_id, limit, offset=offset))
        )

    def session_prompts(self, session_id: str, offset: int, limit: int) -> list[Prompt]:
        return self.call(lambda s: s.session_prompts(session_id, limit, offset=offset))

    def observation(self, observation_id: int, *, record_access: bool = False) -> ObservationRow:
        """The live observation (``NotFoundError`` once it is deleted, by anyone), with its
        relations to other memories; ``record_access`` when a person opens it (a read that
        counts for its importance)."""

        def read(store: Store) -> ObservationRow:
            obs = store.get_observation(observation_id, record_access=record_access)
            row = self._rows(store, [obs])[0]
            return dataclasses.replace(row, relations=store.relations_for(observation_id))

        return self.call(read)

    def history(self, observation_id: int) -> History:
        """The memory and its kept earlier versions (``engram history``)."""
        return self.call(lambda s: s.history(observation_id))

    def timeline(self, observation_id: int, before: int, after: int) -> Timeline:
        return self.call(lambda s: s.timeline(observation_id, before=before, after=after))

    def projects(self) -> list[ProjectInfo]:
        return self.call(lambda s: s.list_projects())

    # --- writes -------------------------------------------------------------------------------

    def pin(self, observation_id: int, pinned: bool) -> Observation:
        return self.call(lambda s: s.pin_observation(observation_id, pinned))

    def delete(self, observation_id: int) -> Observation:
        """Soft-delete: hidden everywhere, replicated as a tombstone, restorable from sync."""
        return self.call(lambda s: s.delete_observation(observation_id, hard=False))

    def update(self, observation_id: int, **fields: Any) -> Observation:
        return self.call(lambda s: s.update_observation(observation_id, **fields))

    # --- live search ----------------------------------------------------------------------------

    def next_search(self) -> int:
        """Claim a generation for a new keystroke; interrupts the search still running for an
        older one (its thread then sees :class:`Stale`)."""
        with self._search_state:
            self._search_generation += 1
            running = self._search_running
            if running is not None and self._search_store is not None:
                # Safe: the running flag is cleared under this lock only after the statement
                # finished, and interrupting an idle connection is a no-op in SQLite.
                self._search_store.db.conn.interrupt()
            return self._search_generation

    @property
    def current_search(self) -> int:
        """The generation of the newest keystroke."""
        with self._search_state:
            return self._search_generation

    def _search_connection(self) -> Store:
        with self._open_lock:
            if self._closed:
                raise Closing("the TUI is closing")
            if self._search_store is None:
                self._search_store = Store.open(config=self.config)
            return self._search_store

    def search(
        self, generation: int, query: str, project: str | None, limit: int = SEARCH_PAGE
    ) -> SearchResult:
        """The best ``limit`` results for ``query``, unless a newer keystroke superseded
        ``generation`` (then :class:`Stale`)."""
        self._open()  # the main connection opens (and migrates) the database first
        with self._waiting(), self._search_run:
            store = self._search_connection()
            with self._search_state:
                if generation != self._search_generation:
                    raise Stale
                self._search_running = generation
            try:
                # As-you-type results are not reads: opening one is (record_access there).
                observations = store.search(
                    query, project=project, limit=limit, record_access=False
                )
            except sqlite3.OperationalError as exc:
                if "interrupt" in str(exc):
                    raise Stale from None
                raise
            finally:
                with self._search_state:
                    self._search_running = None
            rows = self._rows(store, observations)
        return SearchResult(generation, query, rows, len(rows) == limit < SEARCH_CAP)

    def search_more(self, query: str, project: str | None, limit: int) -> list[ObservationRow]:
        """The best ``limit`` results again (scrolling on; not superseded by keystrokes)."""
        return self.call(
            lambda s: self._rows(
                s,
                s.search(query, project=project, limit=min(limit, SEARCH_CAP), record_access=False),
            )
        )
