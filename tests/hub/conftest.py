"""Fixtures of these tests: defined in :mod:`tests.support.hub` (with the helpers the
tests import from there), made visible to pytest here."""

from tests.support.hub import (  # noqa: F401  (pytest finds fixtures by name)
    hub,
    hub_store,
)
