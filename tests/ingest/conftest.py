"""Fixtures of these tests: defined in :mod:`tests.support.ingest` (with the helpers the
tests import from there), made visible to pytest here."""

from tests.support.ingest import (  # noqa: F401  (pytest finds fixtures by name)
    repo,
)
