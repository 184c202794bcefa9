"""Driving a real ``engram mcp`` subprocess through the SDK's own stdio client."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support import engram_env


@asynccontextmanager
async def engram_mcp(
    data_dir: Path,
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    command: list[str] | None = None,
) -> AsyncIterator[ClientSession]:
    """Start ``engram mcp ARGS`` in ``cwd`` and yield an initialized client session."""
    argv = command or [sys.executable, "-m", "engram", "mcp"]
    params = StdioServerParameters(
        command=argv[0], args=[*argv[1:], *args], env=engram_env(data_dir, env), cwd=str(cwd)
    )
    # The server's stderr goes to a file beside its directory (pytest's capture has no fd).
    with (cwd.parent / f"mcp-stderr-{cwd.name}.log").open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content: the envelope the text
    holds (checked: the same JSON) plus ``data``, the object ``engram … --json`` prints."""
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text
    assert not result.is_error, f"{tool}({arguments}) failed: {text}"
    structured = dict(result.structured_content or {})
    assert "data" in structured, f"{tool}: no data in the structured content"
    assert orjson.loads(text) == {k: v for k, v in structured.items() if k != "data"}
    return result.structured_content


async def fail(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must fail with a tool error; return the error object."""
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text
    assert result.is_error, f"{tool}({arguments}) should have failed, got: {text}"
    assert result.structured_content is None  # clients may check it against the output schema
    error = orjson.loads(text)
    assert error["error"] and error["error_code"]
    return error


def saved_id(envelope: dict[str, Any]) -> int:
    """The #id in a ``Memory saved: #12 ...`` result."""
    match = re.search(r"#(\d+)", envelope["result"])
    assert match, envelope
    return int(match.group(1))
