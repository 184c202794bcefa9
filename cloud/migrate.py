"""Running the alembic history of ``migrations/`` from Python, and telling whether a database's
schema is current.

Upgrades take a transaction-level advisory lock, so several server processes started together
with ``--migrate`` upgrade once, one after the other, never concurrently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

MIGRATION_LOCK = 0x656E6772616D01  # "engram" + 1: the advisory lock key of schema changes


def script_location() -> Path:
    import engram_cloud.migrations as package

    return Path(package.__file__).resolve().parent


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic configuration without any ini file (works from an installed wheel)."""
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations directory has no revision"
    return head


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    current: str | None  # None: the database has no Engram schema yet
    head: str

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head

    def describe(self) -> str:
        if self.up_to_date:
            return f"schema is current (revision {self.head})"
        if self.current is None:
            return f"database has no Engram schema yet (head is {self.head})"
        return f"schema is at revision {self.current}, the server needs {self.head}"


def schema_status(engine: Engine) -> SchemaStatus:
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    return SchemaStatus(current=current, head=head_revision())


def _run(engine: Engine, action: str, revision: str) -> None:
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        config = alembic_config(conn)
        if action == "upgrade":
            command.upgrade(config, revision)
        else:
            command.downgrade(config, revision)


def upgrade(engine: Engine, revision: str = "head") -> SchemaStatus:
    """Upgrade to ``revision`` (default: the newest) and return the resulting status."""
    _run(engine, "upgrade", revision)
    return schema_status(engine)


def downgrade(engine: Engine, revision: str = "-1") -> SchemaStatus:
    """Downgrade to ``revision`` (default: one step back)."""
    _run(engine, "downgrade", revision)
    return schema_status(engine)
