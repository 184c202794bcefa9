"""The ingest and summarize tools through the real stdio client, and the second seed's
aliases (``ingestGit``, ``summarize``) served on request."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.mcp.server import SEED_ALIASES, select_tools
from tests.mcp.client import call, engram_mcp, fail

pytestmark = pytest.mark.anyio


async def test_ingest_and_summarize_tools(data_dir: Path, repo) -> None:
    async with engram_mcp(data_dir, repo.path, "--tools", "all") as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"mem_ingest_git", "mem_summarize"} <= tools and not set(SEED_ALIASES) & tools
        first = await call(session, "mem_ingest_git", days=30)
        assert first["project"] == "shop" and len(first["result"]["added"]) == 3
        again = await call(session, "mem_ingest_git")
        assert again["result"]["added"] == [] and again["result"]["already_present"] == 3
        await call(session, "mem_save", title="Cache", content="**Learned**: warm the cache first")
        summary = await call(session, "mem_summarize", min_confidence=0.7)
        assert summary["result"]["provider"] == "offline" and summary["result"]["saved"] == 1
        error = await fail(session, "mem_ingest_git", days=0)
        assert error["error_code"] == "invalid_arguments"


async def test_seed_aliases_on_request(data_dir: Path, repo) -> None:
    assert select_tools("seed") == list(SEED_ALIASES)
    async with engram_mcp(data_dir, repo.path, "--tools", "agent,seed") as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert set(SEED_ALIASES) <= tools
        added = await call(session, "ingestGit", workspace=str(repo.path), days=30)
        assert len(added["result"]["added"]) == 3
        learned = await call(session, "summarize", minConfidence=0.9)
        assert learned["result"]["min_confidence"] == 0.9


@pytest.fixture
def repo(tmp_path: Path):
    from tests.support.ingest import make_repo

    return make_repo(tmp_path)
