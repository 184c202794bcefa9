"""Fixtures of these tests: defined in :mod:`tests.support.sync_git` (with the helpers the
tests import from there), made visible to pytest here."""

from tests.support.sync_git import (  # noqa: F401  (pytest finds fixtures by name)
    sync_dir,
    world,
)
