"""Fixtures for the MCP tests: the anyio backend and a private working directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The server's working directory: a plain directory, so its project is ``acme``."""
    path = tmp_path / "acme"
    path.mkdir()
    return path
