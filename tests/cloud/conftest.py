"""Fixtures of these tests: defined in :mod:`tests.support.cloud` (with the helpers the
tests import from there), made visible to pytest here."""

from tests.support.cloud import (  # noqa: F401  (pytest finds fixtures by name)
    fixture_client,
    fixture_cloud_db_url,
    fixture_cloud_template,
    fixture_engine,
    fixture_make_client,
    fixture_postgres_cluster,
    fixture_postgres_url,
    make_user,
    serve,
    settings,
    start_server,
)
