"""Fixtures of these tests: defined in :mod:`tests.support.sync_cloud` (with the helpers the
tests import from there), made visible to pytest here."""

from tests.support.sync_cloud import (  # noqa: F401  (pytest finds fixtures by name)
    fixture_cloud_db_url,
    fixture_cloud_template,
    fixture_postgres_cluster,
    fixture_postgres_url,
    make_server,
    open_store,
    project,
    proxy,
    server,
    shared_server,
    start_serve,
)
