"""Importance, pins, review, restore, as-of and consolidation through a real ``engram mcp``
process and the SDK's stdio client."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.settings import Config
from engram.store import Store
from tests.mcp.client import call, engram_mcp, fail, saved_id

pytestmark = pytest.mark.anyio


async def test_pins_importance_and_review_through_mcp(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir) as s:
        saved = await call(s, "mem_save", title="Use pnpm", content="never npm", importance=0.7)
        first = saved_id(saved)
        assert saved["result"].endswith("Importance: 0.70, set by hand")
        pinned = await call(s, "mem_pin", id=first)
        assert pinned["result"] == {
            "result": f"Memory #{first} pinned",
            "id": first,
            "sync_id": pinned["result"]["sync_id"],
            "pinned": True,
            "importance": 0.7,
        }
        for i in range(25):
            await call(s, "mem_save", title=f"note {i}", content=f"body {i}")
        context = await call(s, "mem_context")
        assert context["result"].index("### Pinned") < context["result"].index("Use pnpm")
        full = await call(s, "mem_get_observation", id=first)
        assert (
            "Importance: 0.70 (set by hand)" in full["result"] and "Pinned: yes" in full["result"]
        )
        updated = await call(s, "mem_update", id=first, importance="auto", pinned=False)
        assert updated["result"].startswith(f"Memory updated: #{first}")
        review = await call(s, "mem_review")
        assert review["result"].startswith("Nothing to review")
        marked = await call(s, "mem_review", action="mark_reviewed", id=first)
        assert marked["result"].startswith(f"Memory #{first} marked reviewed")


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("mem_save", {"title": "t", "content": "c", "importance": 1.5}, "invalid_argument"),
        ("mem_save", {"title": "t", "content": "c", "importance": "high"}, "invalid_arguments"),
        ("mem_update", {"id": 1, "importance": -1}, "invalid_argument"),
        ("mem_update", {"id": 1, "importance": "loud"}, "invalid_arguments"),
        ("mem_consolidate", {"threshold": 3}, "invalid_arguments"),
        ("mem_consolidate", {"max": 0}, "invalid_arguments"),
        ("mem_review", {"action": "mark_reviewed"}, "invalid_argument"),
        ("mem_search", {"query": "rebase", "as_of": "someday"}, "invalid_argument"),
    ],
)
async def test_bad_arguments_are_tool_errors_that_change_nothing(
    data_dir: Path, workdir: Path, tool: str, arguments: dict, named: str
) -> None:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.add_observation(title="Rule", content="always rebase", project="acme")
        before = store.canonical_export()
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        error = await fail(s, tool, **arguments)
    assert error["error_code"] == named
    with Store.open(config=Config(data_dir=data_dir)) as store:
        assert store.canonical_export() == before


async def test_pinning_an_archived_memory_says_restore_first(data_dir: Path, workdir: Path) -> None:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        memory = store.add_observation(title="Rule", content="always rebase", project="acme")
        store.archive_observation(memory.observation.id)
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        error = await fail(s, "mem_pin", id=memory.observation.id)
        assert error["error_code"] == "conflict" and "restore it first" in error["error"]
        await call(s, "mem_restore", id=memory.observation.id)
        assert (await call(s, "mem_pin", id=memory.observation.id))["result"]["pinned"] is True


async def test_consolidate_and_search_as_of_through_mcp(data_dir: Path, workdir: Path) -> None:
    text = "**What**: raised the gunicorn worker timeout to 60s\n**Why**: slow SSO redirect"
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.import_data({"version": "0.1.0", "observations": [
            {"sync_id": "obs-a", "session_id": "s", "project": "acme", "title": "Login fix",
             "content": text, "created_at": "2026-01-01 10:00:00",
             "updated_at": "2026-01-01 10:00:00"},
            {"sync_id": "obs-b", "session_id": "s", "project": "acme", "title": "Login fixed",
             "content": text + "\nnginx matched", "created_at": "2026-01-02 10:00:00",
             "updated_at": "2026-01-02 10:00:00"},
            {"sync_id": "obs-other", "session_id": "s", "project": "elsewhere",
             "title": "Login fix", "content": text, "created_at": "2026-01-01 10:00:00",
             "updated_at": "2026-01-01 10:00:00"},
        ]})  # fmt: skip
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        dry = await call(s, "mem_consolidate", dry_run=True)
        assert dry["project"] == "acme" and dry["result"]["dry_run"] is True
        assert dry["result"]["merged"] == 2
        done = await call(s, "mem_consolidate")
        merged = done["result"]["merges"][0]
        assert merged["status"] == "merged" and {x["sync_id"] for x in merged["sources"]} == {
            "obs-a",
            "obs-b",
        }
        then = await call(s, "mem_search", query="gunicorn timeout", as_of="2026-01-01")
        assert "Login fix" in then["result"] and "Login fixed" not in then["result"]
    with Store.open(config=Config(data_dir=data_dir)) as store:
        # The server's project only: another project's twin is untouched.
        assert store.get_observation_by_sync_id("obs-other", project="elsewhere").deleted_at is None
