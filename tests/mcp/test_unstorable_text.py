"""Issue 12, hole 4, through a real ``engram mcp`` process and the SDK's stdio client: text the
store cannot keep is a tool error naming the field, and the server goes on serving."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.client import call, engram_mcp, fail

pytestmark = pytest.mark.anyio


async def test_nul_in_a_memory_or_prompt_is_a_tool_error(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir) as s:
        for args, field in (
            ({"title": "t\x00", "content": "c"}, "title"),
            ({"title": "t", "content": "before\x00after"}, "content"),
            ({"title": "t", "content": "c", "topic_key": "a/\x00"}, "topic_key"),
        ):
            error = await fail(s, "mem_save", **args)
            assert field in error["error"] and "NUL" in error["error"], error
        error = await fail(s, "mem_save_prompt", content="why\x00")
        assert "content" in error["error"] and "NUL" in error["error"], error
        saved = await call(s, "mem_save", title="Clean", content="still works")
        assert "Clean" in saved["result"]
