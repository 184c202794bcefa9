"""Fixtures of these tests: defined in :mod:`tests.support.http` (with the helpers the
tests import from there), made visible to pytest here."""

from tests.support.http import (  # noqa: F401  (pytest finds fixtures by name)
    client,
    guarded,
    server,
)
