"""Fixtures of the TUI tests: a seeded store and the app driven headless through Textual's Pilot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engram.settings import Config
from engram.store import Store
from tests.tui.helpers import Seeded, seed


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def seeded(data_dir: Path) -> Iterator[Seeded]:
    """A store with a few projects, sessions (one still open), memories and prompts."""
    with Store.open(config=Config(data_dir=data_dir)) as store:
        yield seed(store)
