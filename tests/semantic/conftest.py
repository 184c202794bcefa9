"""Fixtures of these tests: defined in :mod:`tests.support.semantic` (with the helpers the
tests import from there), made visible to pytest here."""

from tests.support.semantic import (  # noqa: F401  (pytest finds fixtures by name)
    anyio_backend,
    default_mode,
    semantic_store,
    workdir,
)
