"""Agents and hooks set up for the Go tool keep working against ``engram mcp`` (issue 16, a
real server through the SDK's stdio client): write tools take the project from the working
directory and discard a ``project`` argument (DESIGN §7), create a session id they have not
seen, and numbers and flags are read as leniently as the Go tool reads them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engram.settings import Config
from engram.store import Store
from tests.mcp.client import call, engram_mcp, fail, saved_id

pytestmark = pytest.mark.anyio


def rows(data_dir: Path) -> dict:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        return orjson.loads(store.canonical_export())


async def test_a_project_argument_never_fails_or_redirects_a_write(
    data_dir: Path, workdir: Path
) -> None:
    async with engram_mcp(data_dir, workdir) as s:
        saved = await call(s, "mem_save", title="Auth", content="JWT", project="work-copy")
        assert (saved["project"], saved["project_source"]) == ("acme", "dir_basename")
        assert saved["project_ignored"] == "work-copy"
        same = await call(s, "mem_save", title="Cache", content="LRU", project="ACME")
        assert same["project"] == "acme" and "project_ignored" not in same
        prompt = await call(s, "mem_save_prompt", content="why JWT?", project="nope")
        assert prompt["project"] == "acme"
        summary = await call(s, "mem_session_summary", content="## Goal\nauth", project="x")
        assert summary["project"] == "acme"
        passive = await call(
            s, "mem_capture_passive", project="y",
            content="## Key Learnings:\n1. tokens expire after one hour exactly",
        )  # fmt: skip
        assert passive["project"] == "acme"
        moved = await call(s, "mem_update", id=saved_id(saved), title="Auth v2", project="other")
        assert moved["project_ignored"] == "other"
        started = await call(s, "mem_session_start", id="s-x", project="elsewhere")
        assert started["project"] == "acme"
    document = rows(data_dir)
    assert {o["project"] for o in document["observations"]} == {"acme"}
    assert {p["project"] for p in document["prompts"]} == {"acme"}
    assert {s["project"] for s in document["sessions"]} == {"acme"}
    assert "Auth v2" in {o["title"] for o in document["observations"]}  # updated in place


async def test_a_session_id_never_started_is_created_in_this_project(
    data_dir: Path, workdir: Path
) -> None:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.create_session("shared-id", "other", "/src/other")  # the same id elsewhere
    async with engram_mcp(data_dir, workdir) as s:
        saved = await call(
            s, "mem_save", title="Fix", content="the bug", session_id="never-started"
        )
        assert saved["project"] == "acme"
        await call(s, "mem_save_prompt", content="fix it", session_id="never-started-2")
        await call(s, "mem_save", title="Here", content="not there", session_id="shared-id")
        ended = await call(s, "mem_session_end", id="never-started", summary="done")
        assert ended["project"] == "acme"
    sessions = {(x["project"], x["id"]): x for x in rows(data_dir)["sessions"]}
    assert sessions[("acme", "never-started")]["summary"] == "done"
    assert sessions[("acme", "never-started")]["directory"] == str(workdir)
    assert ("acme", "never-started-2") in sessions
    # the other project's session of that id kept its own memories (none) and its place
    assert sessions[("other", "shared-id")]["directory"] == "/src/other"
    assert ("acme", "shared-id") in sessions
    observations = {o["title"]: o for o in rows(data_dir)["observations"]}
    assert (observations["Here"]["project"], observations["Here"]["session_id"]) == (
        "acme",
        "shared-id",
    )


async def test_numbers_and_flags_as_the_go_tool_reads_them(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        first = saved_id(await call(s, "mem_save", title="One", content="lenient alpha"))
        await call(s, "mem_save", title="Two", content="lenient beta")
        assert "One" in (await call(s, "mem_get_observation", id=first + 0.7))["result"]
        assert "One" in (await call(s, "mem_get_observation", id=float(first)))["result"]
        for wrong in ("1", True):  # the Go tool refuses these too ("id is required")
            assert (await fail(s, "mem_get_observation", id=wrong))["error_code"] == (
                "invalid_arguments"
            )
        both = await call(s, "mem_search", query="lenient", limit="many")
        assert "Found 2 memories" in both["result"]
        one = await call(s, "mem_search", query="lenient", limit=1.9)
        assert "Found 1 memory:" in one["result"]
        assert "Found 2" in (await call(s, "mem_search", query="lenient", limit=-4))["result"]
        shown = await call(s, "mem_timeline", observation_id=first, before="x", after=None)
        assert "Two" in shown["result"]
        soft = await call(s, "mem_delete", id=first, hard_delete="maybe")
        assert soft["result"] == f"Memory #{first} soft-deleted"
    [gone] = [o for o in rows(data_dir)["observations"] if o["title"] == "One"]
    assert gone["deleted_at"] is not None and gone["content"] == "lenient alpha"  # not hard
