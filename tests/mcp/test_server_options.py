"""``--tools`` profiles, and what the ``engram mcp`` process imports at start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engram.errors import ValidationError
from engram.mcp.server import ADMIN_TOOLS, AGENT_TOOLS, ALL_TOOLS, select_tools
from tests.mcp.client import call, engram_mcp, fail
from tests.support import engram_env


def test_select_tools_reads_profiles_and_names() -> None:
    # the default is the agent profile (issue 17 item 8); every tool is a flag away
    assert select_tools(None) == select_tools("") == select_tools("agent") == list(AGENT_TOOLS)
    assert select_tools("all") == list(ALL_TOOLS)
    assert select_tools(" admin , mem_save ") == ["mem_save", *ADMIN_TOOLS]
    assert select_tools(["mem_stats", "mem_stats"]) == ["mem_stats"]
    with pytest.raises(ValidationError, match="unknown tool or profile 'mem_sav'"):
        select_tools("mem_sav")


@pytest.mark.anyio
async def test_agent_profile_hides_admin_tools(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "agent") as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert names == list(AGENT_TOOLS)
        hidden = await fail(s, "mem_delete", id=1)
        assert hidden["error_code"] == "unknown_tool"
        assert "not enabled by this server's --tools" in hidden["error"]
        await call(s, "mem_save", title="agent profile", content="can still save")
    async with engram_mcp(data_dir, workdir, "--tools=admin,mem_search") as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert names == ["mem_search", *ADMIN_TOOLS]
        assert "- Observations: 1" in (await call(s, "mem_stats"))["result"]


def test_mcp_process_imports_only_the_sdk_and_the_store(data_dir: Path, workdir: Path) -> None:
    """The real ``engram mcp`` entry point, with stdin closed so it exits at once."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('LOADED', sorted(m for m in sys.modules if m.split('.')[0]"
        " in {'litestar', 'httpx', 'textual', 'sqlalchemy', 'jinja2', 'tomlkit'}),"
        " file=sys.stderr))\n"
        "from engram.cli.main import main\n"
        "sys.exit(main(['mcp']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=workdir,
        input="",
        env=engram_env(data_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stderr
