"""Fixtures of these tests: defined in :mod:`tests.support.dashboard` (with the helpers the
tests import from there), made visible to pytest here."""

from tests.support.dashboard import (  # noqa: F401  (pytest finds fixtures by name)
    admin,
    fixture_client,
    fixture_cloud_db_url,
    fixture_cloud_template,
    fixture_engine,
    fixture_make_client,
    fixture_postgres_cluster,
    fixture_postgres_url,
    logged_in,
    make_user,
    seed,
    settings,
    utc_display,
)
