"""Alembic environment of the cloud schema.

Engram runs migrations from Python (:mod:`engram_cloud.migrate`), handing over an open connection
in ``config.attributes["connection"]`` so that the upgrade runs inside the caller's transaction
and advisory lock. Run by hand (``alembic -x url=… upgrade head`` with a config whose
``script_location`` points here), the URL comes from ``-x url=``, ``sqlalchemy.url`` or
``ENGRAM_DATABASE_URL``, spelled any way :func:`engram_cloud.db.normalize_database_url` accepts.
"""

from __future__ import annotations

import os

from alembic import context

from engram_cloud.models import metadata

config = context.config


def _url() -> str:
    from engram_cloud.db import normalize_database_url

    raw = (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get("ENGRAM_DATABASE_URL", "")
    )
    return normalize_database_url(raw)


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    from engram_cloud.db import create_db_engine

    engine = create_db_engine(_url(), pool_size=1)
    try:
        with engine.connect() as conn:
            context.configure(connection=conn, target_metadata=metadata, compare_type=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
