"""``Store``: the one Python API over the local database that the CLI, MCP server, HTTP API,
TUI and sync transports all call."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from engram import settings as config_module
from engram.errors import StoreUnavailableError
from engram.settings import Config
from engram.store import scoring
from engram.store.access import AccessLog
from engram.store.conflicts import ConflictsMixin
from engram.store.consolidation import ConsolidationMixin
from engram.store.context import ContextMixin
from engram.store.curation import CurationMixin
from engram.store.db import Database, describe_sqlite_error
from engram.store.exchange import ExchangeMixin
from engram.store.graph import GraphMixin
from engram.store.journal import Journal
from engram.store.observations import ObservationsMixin
from engram.store.pattern import PatternSearchMixin
from engram.store.projects import ProjectsMixin
from engram.store.prompts import PromptsMixin
from engram.store.purge import PurgeMixin
from engram.store.ranking import TermCounts
from engram.store.relations import RelationsMixin
from engram.store.replication import ReplicationMixin
from engram.store.revisions import RevisionsMixin
from engram.store.schema import SCHEMA_VERSION, apply_migrations, current_version
from engram.store.search import SearchMixin
from engram.store.sessions import SessionsMixin
from engram.store.vectors import VectorsMixin

if TYPE_CHECKING:
    from engram.store.clock_repair import ClockRepair


class Store(
    SessionsMixin,
    ObservationsMixin,
    PromptsMixin,
    SearchMixin,
    PatternSearchMixin,
    ContextMixin,
    ProjectsMixin,
    ExchangeMixin,
    ReplicationMixin,
    PurgeMixin,
    VectorsMixin,
    RevisionsMixin,
    RelationsMixin,
    ConflictsMixin,
    GraphMixin,
    ConsolidationMixin,
    CurationMixin,
):
    """The local memory store. Open it with :meth:`Store.open`; close it (or use ``with``)."""

    def __init__(self, db: Database, config: Config) -> None:
        self.db = db
        self.config = config
        self.journal = Journal(db, config.max_clock_drift_ms)
        self.term_counts = TermCounts()
        #: The vectors held in memory for semantic search (loaded on the first one).
        self.vector_index: Any = None
        #: Projects seen holding memories (the similar-project hint skips them).
        self.known_projects: set[str] = set()
        scoring.register(db.conn)
        self.access = AccessLog(db, config)

    @classmethod
    def open(cls, path: str | Path | None = None, *, config: Config | None = None) -> Store:
        """Open (creating and migrating as needed) the database at ``path``, by default
        ``$ENGRAM_DATA_DIR/engram.db``."""
        config = config or config_module.load()
        db_path = Path(path) if path is not None else config.db_path
        db = Database(db_path, config.busy_timeout_ms)
        try:
            store = cls(db, config)
            store._prepare()
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreUnavailableError(describe_sqlite_error(exc, db_path)) from exc
        except BaseException:
            db.close()
            raise
        return store

    def _prepare(self) -> None:
        conn = self.db.conn
        needs_migration = current_version(conn) != SCHEMA_VERSION
        if not needs_migration and self.journal.identity_matches():
            if self.journal.clock_poisoned():
                self.repair_clock()
            return  # the fast path: nothing to write on open
        from engram.store import legacy

        if needs_migration and legacy.is_go_database(conn):
            legacy.upgrade(self)
        else:
            with self.db.write() as conn:
                apply_migrations(conn)
                self.journal.ensure_identity(conn)
        if self.journal.clock_poisoned():
            self.repair_clock()

    def repair_clock(self) -> ClockRepair:
        """Check every record and row for a clock beyond now + the allowed drift and repair
        what it finds (``engram doctor``; also done on open when the clock is poisoned)."""
        from engram.store import clock_repair

        return clock_repair.repair(self)

    def quarantine_counts(self, projects: list[str] | None = None) -> dict[str, dict[str, int]]:
        """Quarantined records by direction and reason (see :mod:`engram.store.quarantine`)."""
        from engram.store import quarantine

        return quarantine.counts(self.db, projects=projects)

    def add_write_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every committed write (it must not block)."""
        self.db.write_listeners.append(listener)

    @property
    def path(self) -> Path:
        return self.db.path

    @property
    def origin(self) -> str:
        return self.journal.origin

    def close(self) -> None:
        self.access.flush()  # the hits this process noted (engram/store/access.py)
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
