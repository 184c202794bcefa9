"""Fixtures every test package may use: a private data directory and an open store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# The suite tests each search mode where it means to (tests/semantic): everywhere else searches
# stay lexical, in this process and in every CLI, MCP and HTTP process a test starts, whether
# or not the semantic extra is installed. tests/semantic clears this where it tests the default.
os.environ["ENGRAM_SEARCH_MODE"] = "lexical"

from engram.settings import Config
from engram.store import Store


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "engram-data"
    path.mkdir(mode=0o700)  # as Engram makes it: a looser one gets tightened, with a notice
    return path


@pytest.fixture
def config(data_dir: Path) -> Config:
    return Config(data_dir=data_dir)


@pytest.fixture
def store(config: Config) -> Iterator[Store]:
    with Store.open(config=config) as opened:
        yield opened


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator:
    """Open extra, independent stores (replicas) by name."""
    opened: list[Store] = []

    def make(name: str = "replica") -> Store:
        directory = tmp_path / f"store-{name}"
        directory.mkdir(mode=0o700, exist_ok=True)
        replica = Store.open(config=Config(data_dir=directory))
        opened.append(replica)
        return replica

    yield make
    for replica in opened:
        replica.close()
