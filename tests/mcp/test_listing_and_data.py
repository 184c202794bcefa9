"""What an agent pays for and gets back (issue 17 items 6, 8, 10, 11), through a real
``engram mcp`` process: the default ``tools/list`` is the agent profile, compact (short
descriptions, no output schemas) and under 12 KB — the bytes are measured; ``--tools all`` is
the full listing. Every result's structured content carries ``data``, the object the CLI
prints with ``--json``. ``mem_restore`` undoes a soft delete; ``mem_get_observation`` shows the
earlier versions; a wrong argument is named in the CLI's words."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engram.mcp.server import ADMIN_TOOLS, AGENT_TOOLS, ALL_TOOLS
from tests.mcp.client import call, engram_mcp, fail
from tests.support import run_engram

pytestmark = pytest.mark.anyio
LIMIT = 12 * 1024


def listing_bytes(tools) -> int:
    """The tools as the server sends them in tools/list (JSON, by alias, no nulls)."""
    return len(
        orjson.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
    )


async def test_the_default_listing_is_the_agent_profile_under_12_kb(
    data_dir: Path, workdir: Path
) -> None:
    async with engram_mcp(data_dir, workdir) as s:
        tools = (await s.list_tools()).tools
        assert [t.name for t in tools] == list(AGENT_TOOLS)
        size = listing_bytes(tools)
        assert size < LIMIT, f"the default tools/list is {size} bytes"
        for tool in tools:
            assert tool.output_schema is None, tool.name
            assert len(tool.description or "") <= 250, tool.name
            props = tool.input_schema.get("properties", {})
            assert all("title" not in prop for prop in props.values()), tool.name
        save = next(t for t in tools if t.name == "mem_save")
        assert "**What**" in save.description and "topic_key" in save.description
        assert set(save.input_schema["required"]) == {"title", "content"}
        assert save.input_schema["properties"]["topic_key"]["type"] == "string"
        assert save.input_schema["properties"]["session_id"]["description"] == "omit normally"
        assert (
            "default" not in save.input_schema["properties"]["allow_secrets"]
        )  # false: says nothing
        assert b"x-engram-compact" not in orjson.dumps([t.input_schema for t in tools])
        search = next(t for t in tools if t.name == "mem_search")
        assert search.annotations is not None and search.annotations.read_only_hint is True
        assert search.annotations.destructive_hint is None  # a write hint of a read-only tool
        # a compact schema still takes what the full one takes: null for an optional argument
        saved = await call(s, "mem_save", title="Pool", content="30 connections", topic_key=None)
        assert saved["data"]["topic_key"] is None


async def test_tools_all_is_the_full_listing(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        tools = (await s.list_tools()).tools
        assert [t.name for t in tools] == list(ALL_TOOLS)
        assert {"mem_delete", "mem_restore", "mem_timeline"} <= set(ADMIN_TOOLS)
        assert all(t.output_schema is not None for t in tools)
        assert "data" in next(t for t in tools if t.name == "mem_save").output_schema["properties"]
        assert listing_bytes(tools) > LIMIT  # what the compact default saves
        # each argument in its full words, without the short ones kept for the compact listing
        save = next(t for t in tools if t.name == "mem_save").input_schema["properties"]
        assert save["session_id"]["description"].startswith("a session id (one not seen yet")
        assert b"x-engram-compact" not in orjson.dumps([t.input_schema for t in tools])


async def test_every_result_carries_what_the_cli_prints(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        saved = await call(s, "mem_save", title="Cache policy", content="LRU, 10 minutes")
        oid = saved["data"]["id"]
        cli_get = orjson.loads(run_engram("get", str(oid), "--json", data_dir=data_dir).stdout)
        got = await call(s, "mem_get_observation", id=oid)
        assert got["data"] == cli_get
        found = await call(s, "mem_search", query="cache")
        cli_search = run_engram("search", "cache", "--json", "--project", "acme",
                                data_dir=data_dir)  # fmt: skip
        assert [o["id"] for o in found["data"]] == [
            o["id"] for o in orjson.loads(cli_search.stdout)
        ]
        context = await call(s, "mem_context")
        assert context["data"]["project"] == "acme" and "Cache policy" in context["data"]["context"]
        key = await call(s, "mem_suggest_topic_key", title="Use JWT", type="decision")
        assert key["data"] == {"topic_key": "decision/use-jwt"}
        stats = await call(s, "mem_stats")
        assert stats["data"]["total_observations"] == 1
        updated = await call(s, "mem_update", id=oid, content="LRU, 15 minutes")
        assert updated["data"]["content"] == "LRU, 15 minutes"
        assert (await call(s, "mem_timeline", observation_id=oid))["data"]["focus"]["id"] == oid
        assert (await call(s, "mem_list_projects"))["data"]["count"] == 1
        assert (await call(s, "mem_current_project"))["data"]["project"] == "acme"
        started = await call(s, "mem_session_start", id="s-9")
        assert started["data"]["id"] == "s-9"
        assert (await call(s, "mem_save_prompt", content="why?"))["data"]["content"] == "why?"
        deleted = await call(s, "mem_delete", id=oid)
        assert deleted["data"] == {"id": oid, "status": "deleted", "hard_delete": False}


async def test_restore_and_history(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        oid = (await call(s, "mem_save", title="Auth", content="JWT"))["data"]["id"]
        await call(s, "mem_update", id=oid, content="Sessions in Redis")
        history = await call(s, "mem_get_observation", id=oid, include_history=True)
        assert "1 earlier version" in history["result"] and "JWT" in history["result"]
        assert history["data"]["revisions"][0]["content"] == "JWT"
        await call(s, "mem_delete", id=oid)
        gone = await fail(s, "mem_get_observation", id=oid)
        assert gone["error_code"] == "not_found" and "was deleted at" in gone["error"]
        back = await call(s, "mem_restore", id=oid)
        # data: the memory, as `engram restore ID --json` prints it
        assert back["data"]["id"] == oid and back["data"]["deleted_at"] is None
        assert f"#{oid} restored" in back["result"]
        assert (await call(s, "mem_get_observation", id=oid))["data"]["deleted_at"] is None
        again = await fail(s, "mem_restore", id=oid)
        assert again["error_code"] == "conflict" and "is not deleted" in again["error"]


async def test_wrong_arguments_are_named_like_the_cli_names_them(
    data_dir: Path, workdir: Path
) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        bad = await fail(s, "mem_get_observation", id="abc")
        assert "id must be an integer (got 'abc')" in bad["error"]
        # what a client that cannot read "abc" as a number sends (the Inspector sends null)
        null = await fail(s, "mem_get_observation", id=None)
        assert "id must be an integer (got null)" in null["error"]
        merge = await fail(s, "mem_merge_projects", **{"from": "nosuch", "to": "acme"})
        assert merge["error_code"] == "unknown_project"
    cli = run_engram("get", "abc", data_dir=data_dir)
    assert "id must be an integer (got 'abc')" in cli.stderr
