"""Fixtures of the semantic-search tests: the real model (it ships in the extra) and stores
whose searches default to what the extra makes the default (hybrid)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram import semantic
from engram.settings import Config
from engram.store import Store

needs_model = pytest.mark.skipif(
    not semantic.available(), reason="the semantic extra is not installed"
)


@pytest.fixture
def default_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches use Engram's own default, not the suite's pinned lexical mode."""
    monkeypatch.delenv("ENGRAM_SEARCH_MODE", raising=False)


@pytest.fixture
def semantic_store(config: Config, default_mode: None) -> Iterator[Store]:
    with Store.open(config=config) as opened:
        yield opened


def save(store: Store, title: str, content: str, project: str = "acme", **extra) -> int:
    return store.add_observation(
        title=title, content=content, project=project, **extra
    ).observation.id


#: Memories whose meaning is unmistakable and whose words barely overlap with the questions.
MEMORIES = [
    (
        "Raised the session TTL to 8h",
        "**What**: SESSION_COOKIE_AGE was 30 minutes; users had to "
        "sign in again all day. Now 8 hours.\n**Why**: support tickets.",
    ),
    (
        "Docker buildx cache filled the runner disk",
        "**What**: prune the builder cache before "
        "each job.\n**Where**: .github/workflows/build.yml",
    ),
    (
        "Stripe webhook signature checked on raw bytes",
        "**What**: construct_event needs request.body, not re-serialized JSON.",
    ),
    (
        "Postgres index creation locked the bookings table",
        "**What**: use CREATE INDEX CONCURRENTLY in migrations.\n**Learned**: lock_timeout=5s.",
    ),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workdir(tmp_path) -> object:
    """An MCP server's working directory: a plain directory, so its project is ``acme``."""
    path = tmp_path / "acme"
    path.mkdir()
    return path
