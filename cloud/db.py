"""The connection to PostgreSQL: URL spellings, the SQLAlchemy engine (always psycopg 3), and a
reachability check with a one-line reason.

The engine is synchronous: request handlers run in litestar's worker threads and keep each
transaction short, while long-polling waits happen on the event loop (see
:mod:`engram_cloud.notify`), so a waiting client holds neither a thread nor a connection.
"""

from __future__ import annotations

import orjson
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from engram_cloud.settings import SettingsError

DRIVER = "postgresql+psycopg"
_POSTGRES_SCHEMES = ("postgres", "postgresql")


def normalize_database_url(raw: str) -> str:
    """``postgres://``, ``postgresql://`` and ``postgresql+<any driver>://`` → psycopg 3.

    Raises :class:`SettingsError` for anything that is not a PostgreSQL URL.
    """
    try:
        url = make_url(raw.strip())
    except ArgumentError:
        raise SettingsError(
            "ENGRAM_DATABASE_URL is not a database URL (expected postgresql://USER:PASSWORD@HOST/DB)"
        ) from None
    backend = url.drivername.split("+", 1)[0]
    if backend not in _POSTGRES_SCHEMES:
        raise SettingsError(
            f"ENGRAM_DATABASE_URL must be a PostgreSQL URL, not {url.drivername}://"
        )
    if not url.database:
        raise SettingsError("ENGRAM_DATABASE_URL names no database (…/DBNAME at the end)")
    return url.set(drivername=DRIVER).render_as_string(hide_password=False)


def libpq_url(database_url: str) -> str:
    """The same database as a plain libpq URL, for psycopg connections made directly."""
    url: URL = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def create_db_engine(database_url: str, *, pool_size: int = 10) -> Engine:
    """An engine on ``database_url`` (normalized to psycopg 3). ``pool_pre_ping`` replaces
    connections that a database restart cut, so the next request after a restart works."""
    return create_engine(
        normalize_database_url(database_url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_recycle=1800,
        json_serializer=lambda value: orjson.dumps(value).decode(),
        json_deserializer=orjson.loads,
        connect_args={"connect_timeout": 10, "application_name": "engram-cloud"},
    )


class DatabaseUnavailableError(Exception):
    """PostgreSQL cannot be reached; the message is one line."""


def describe_db_error(exc: BaseException) -> str:
    """The first line of a driver error, without SQLAlchemy's boilerplate."""
    original = getattr(exc, "orig", None) or exc
    message = str(original).strip().splitlines()
    return message[0] if message else exc.__class__.__name__


def check_database(engine: Engine) -> None:
    """Connect once; raise :class:`DatabaseUnavailableError` saying why it failed."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as exc:
        where = engine.url.render_as_string(hide_password=True)
        raise DatabaseUnavailableError(
            f"database unreachable at {where}: {describe_db_error(exc)}"
        ) from None
