"""``mem_search`` says why each memory matched (issue 14), through the real stdio client."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.client import call, engram_mcp

pytestmark = pytest.mark.anyio


async def test_mem_search_names_the_matched_words(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir) as s:
        await call(s, "mem_session_start", id="s-1")
        await call(s, "mem_save_prompt", content="the login page times out after lunch")
        await call(s, "mem_save", title="Team server uses PostgreSQL", content="shared by all")
        found = await call(s, "mem_search", query="postgres login")
    text = found["result"]
    assert "[1] #1 (manual) — Team server uses PostgreSQL" in text
    assert "    matched: postgres (prefix) (+ session context: login)" in text
