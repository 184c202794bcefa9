"""Bad input gets a tool error an agent can act on, writes nothing, and the server keeps serving;
project resolution refuses guesses; malformed frames do not kill the server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.mcp.client import call, engram_mcp, fail, saved_id
from tests.support import engram_env, run_engram

pytestmark = pytest.mark.anyio


async def test_bad_calls_get_actionable_errors_and_write_nothing(
    data_dir: Path, workdir: Path
) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        missing = await fail(s, "mem_save", title="No content")
        assert missing["error_code"] == "invalid_arguments"
        assert missing["arguments"] == ["content"]
        assert "content is required" in missing["error"]

        # (a fraction is truncated and a mistyped count is its default, as the Go tool reads
        # them: test_go_agents.py; a string or boolean id is refused there too)
        for wrong in ("twelve", "12", True):
            bad = await fail(s, "mem_get_observation", id=wrong)
            assert bad["error_code"] == "invalid_arguments"
            assert "id must be an integer" in bad["error"]
        bad = await fail(s, "mem_search", query="x", limit="many", match_mode="some")
        assert bad["arguments"] == ["match_mode"]
        assert "match_mode must be 'any' or 'all'" in bad["error"]
        assert (await fail(s, "mem_get_observation", id=0))["error_code"] == "invalid_arguments"

        unknown = await fail(s, "mem_get_observation", id=424242)
        assert unknown == {
            "error": "Observation #424242 not found. Find the right #id with mem_search.",
            "error_code": "not_found",
        }
        for tool, args in (
            ("mem_update", {"id": 424242, "title": "x"}),
            ("mem_delete", {"id": 424242}),
            ("mem_timeline", {"observation_id": 424242}),
        ):
            assert (await fail(s, tool, **args))["error_code"] == "not_found"

        empty = await fail(s, "mem_search", query="   ")
        assert empty["error_code"] == "invalid_argument"
        assert "query cannot be empty" in empty["error"]

        huge = await fail(s, "mem_save", title="Dump", content="x" * 60_000)
        assert huge["error_code"] == "invalid_argument"
        assert "60,000 bytes" in huge["error"] and "Split it" in huge["error"]
        long_title = await fail(s, "mem_save", title="t" * 5000, content="fine")
        assert "title is 5,000 bytes" in long_title["error"]

        # Write tools discard a project argument (DESIGN §7) and create a session they have
        # not seen (issue 16: test_go_agents.py); reads still refuse an unknown project.
        stranger = await fail(s, "mem_search", query="x", project="nope")
        assert stranger["error_code"] == "unknown_project"
        assert stranger["available_projects"] == ["acme"]
        similar = await fail(s, "mem_search", query="x", project="acmee")
        assert 'Did you mean "acme"?' in similar["error"]

        assert (await fail(s, "mem_session_end", id="ghost"))["error_code"] == "not_found"
        nothing = await fail(s, "mem_update", id=1)
        assert "provide at least one field" in nothing["error"]
        assert (await fail(s, "mem_suggest_topic_key"))["error_code"] == "invalid_argument"
        assert (await fail(s, "mem_no_such_tool"))["error_code"] == "unknown_tool"
        merge = await fail(s, "mem_merge_projects", **{"from": ["ghost-project"], "to": "acme"})
        assert merge["error_code"] == "unknown_project"

        stats = await call(s, "mem_stats")
        assert "- Observations: 0" in stats["result"] and "- Sessions: 0" in stats["result"]
        saved = await call(s, "mem_save", title="Still serving", content="after all those errors")
        assert saved_id(saved) == 1


async def test_ambiguous_directory_fails_writes_and_lists_the_choices(tmp_path: Path) -> None:
    mono = tmp_path / "mono"
    for child in ("billing", "web"):
        (mono / child).mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(mono / child)], check=True)
    data_dir = tmp_path / "data"
    async with engram_mcp(data_dir, mono, "--tools", "all") as s:
        here = await call(s, "mem_current_project")
        assert (here["project"], here["project_source"]) == ("", "ambiguous")
        assert here["available_projects"] == ["billing", "web"]

        for tool, args in (
            ("mem_save", {"title": "t", "content": "c"}),
            ("mem_save_prompt", {"content": "c"}),
            ("mem_session_summary", {"content": "c"}),
            ("mem_session_start", {"id": "s-1"}),
            ("mem_capture_passive", {"content": "## Key Learnings:\n1. one two three four five"}),
        ):
            refused = await fail(s, tool, **args)
            assert refused["error_code"] == "ambiguous_project", tool
            assert refused["available_projects"] == ["billing", "web"]
            assert "nothing was written" in refused["error"]
            assert "--project" in refused["error"]
        # a project argument does not choose for a write tool: it is discarded (DESIGN §7)
        named = await fail(s, "mem_save", title="Invoices", content="PDF export", project="web")
        assert named["error_code"] == "ambiguous_project"
        assert "- Sessions: 0" in (await call(s, "mem_stats"))["result"]

        found = await call(s, "mem_search", query="anything")  # reads look everywhere
        assert found["project_source"] == "ambiguous"
        picked = await call(s, "mem_search", query="anything", project="web")
        assert (picked["project"], picked["project_source"]) == ("web", "explicit_override")
    async with engram_mcp(data_dir, mono, "--project", "web") as s:  # the way to write there
        saved = await call(s, "mem_save", title="Invoices", content="PDF export")
        assert (saved["project"], saved["project_source"]) == ("web", "process_override")


async def test_process_override_names_the_project(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--project", "Team-X") as s:
        saved = await call(s, "mem_save", title="t", content="c")
        assert (saved["project"], saved["project_source"]) == ("team-x", "process_override")
        # The override and the directory's own project are both names a call may use.
        assert (await call(s, "mem_search", query="c", project="acme"))["project"] == "acme"
    async with engram_mcp(data_dir, workdir, env={"ENGRAM_PROJECT": "other"}) as s:
        assert (await call(s, "mem_context"))["project"] == "other"


def test_malformed_frames_do_not_kill_the_server(data_dir: Path, workdir: Path) -> None:
    """Raw bytes on stdin (broken JSON, invalid UTF-8, not JSON-RPC) between valid requests."""
    server = subprocess.Popen(
        [sys.executable, "-m", "engram", "mcp", "--tools", "all"],
        cwd=workdir,
        env=engram_env(data_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None

    def send(raw: bytes) -> None:
        server.stdin.write(raw)
        server.stdin.flush()

    def answer(request_id: int) -> dict:
        while True:
            message = orjson.loads(server.stdout.readline())
            if message.get("id") == request_id:
                return message

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
        send(b"\n")
        assert answer(1)["result"]["serverInfo"]["name"] == "engram"
        send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        send(b'{"jsonrpc": "2.0", "id": 2, "method": \n')  # cut short
        send(b"\xff\xfe\x00 not utf-8 \x80\n")
        send(b'[1, 2, 3]\n{"jsonrpc": "2.0", "id": "x"}\nnull\n')
        call = {"name": "mem_save", "arguments": {"title": "Survived", "content": "garbage"}}
        send(orjson.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}))
        send(b"\n")
        result = answer(3)["result"]
        assert not result["isError"]
        assert result["structuredContent"]["result"].startswith('Memory saved: #1 "Survived"')
    finally:
        server.stdin.close()
        assert server.wait(timeout=30) == 0
        server.stdout.close()


def test_unknown_tools_profile_is_refused_at_start(data_dir: Path, workdir: Path) -> None:
    done = run_engram("mcp", "--tools", "agent,bogus", data_dir=data_dir, cwd=workdir, input="")
    assert done.returncode == 1
    assert "unknown tool or profile 'bogus'" in done.stderr
    assert done.stdout == ""
