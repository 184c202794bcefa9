"""``engram mcp`` through the SDK's real stdio client: the tool list and its schemas, every tool,
and calls that build on each other."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.mcp.server import ADMIN_TOOLS, AGENT_TOOLS, ALL_TOOLS
from engram.settings import Config
from engram.store import Store
from tests.mcp.client import call, engram_mcp, fail, saved_id

pytestmark = pytest.mark.anyio

READ_ONLY = {
    "mem_search",
    "mem_context",
    "mem_get_observation",
    "mem_suggest_topic_key",
    "mem_current_project",
    "mem_list_projects",
    "mem_stats",
    "mem_timeline",
    "mem_relations",
    "mem_graph_query",
}
DESTRUCTIVE = {"mem_update", "mem_delete", "mem_merge_projects", "mem_consolidate"}


async def test_tools_have_typed_schemas_annotations_and_teaching_descriptions(
    data_dir: Path, workdir: Path
) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as session:
        init = session.initialize_result
        tools = {t.name: t for t in (await session.list_tools()).tools}

    assert init.server_info.name == "engram"
    assert "mem_context" in init.instructions and "mem_session_summary" in init.instructions
    assert set(tools) == set(ALL_TOOLS) == set(AGENT_TOOLS) | set(ADMIN_TOOLS)

    save = tools["mem_save"]
    assert save.input_schema["required"] == ["title", "content"]
    assert save.input_schema["properties"]["scope"]["enum"] == ["project", "personal"]
    for word in ("**What**", "**Why**", "**Where**", "**Learned**"):
        assert word in save.input_schema["properties"]["content"]["description"]
    assert "bug" in save.description and "topic_key" in save.description

    ident = tools["mem_get_observation"].input_schema["properties"]["id"]
    assert ident["type"] == "integer" and ident["minimum"] == 1
    assert tools["mem_search"].input_schema["required"] == ["query"]
    assert tools["mem_search"].input_schema["properties"]["match_mode"]["enum"] == ["any", "all"]
    assert "mem_get_observation" in tools["mem_search"].description
    merge = tools["mem_merge_projects"].input_schema
    assert sorted(merge["required"]) == ["from", "to"] and "from" in merge["properties"]

    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 40, name
        assert tool.annotations.title, name
        assert tool.annotations.read_only_hint is (name in READ_ONLY), name
        assert tool.annotations.destructive_hint is (name in DESTRUCTIVE), name
        # Only summarize may reach beyond the machine (a model provider, when a key is set).
        assert tool.annotations.open_world_hint is (name == "mem_summarize"), name
        assert set(tool.output_schema["required"]) == {
            "project",
            "project_source",
            "project_path",
            "result",
        }, name


async def test_every_tool_answers_with_the_project_envelope(data_dir: Path, workdir: Path) -> None:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.add_observation(title="Old name", content="kept under acme-old", project="acme-old")

    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        here = await call(s, "mem_current_project")
        assert (here["project"], here["project_source"]) == ("acme", "dir_basename")
        assert here["project_path"] == str(workdir) and here["cwd"] == str(workdir)
        assert here["available_projects"] == ["acme", "acme-old"]

        started = await call(s, "mem_session_start", id="s-1")
        assert started["result"] == 'Session "s-1" started for project "acme"'
        prompt = await call(s, "mem_save_prompt", content="fix the login timeout please")
        assert prompt["result"] == 'Prompt saved: "fix the login timeout please"'

        saved = await call(
            s,
            "mem_save",
            title="Fixed login timeout",
            content="**What**: raised the session TTL\n**Why**: users were logged out\n"
            "**Where**: auth/session.py\n**Learned**: the TTL is in seconds",
            type="bugfix",
        )
        assert {k: v for k, v in saved.items() if k != "data"} == {
            "project": "acme",
            "project_source": "dir_basename",
            "project_path": str(workdir),
            "result": f'Memory saved: #{saved_id(saved)} "Fixed login timeout" (bugfix)\n'
            "Suggested topic_key: bug/fixed-login-timeout\n"
            '⚠️ Project "acme" has no memories. Similar project found: "acme-old" (1 memory).'
            " Consider using that name instead.\n"
            "Importance: 0.31",
        }
        # The structured content also carries what `engram save --json` prints (issue 17 #8).
        data = saved["data"]
        assert data["id"] == saved_id(saved) and data["action"] == "created"
        assert data["sync_id"].startswith("obs-") and data["title"] == "Fixed login timeout"
        first = saved_id(saved)
        full = await call(s, "mem_get_observation", id=first)
        # Saved without a session_id, the memory joined the one session open in this directory.
        assert "Session: s-1" in full["result"] and "the TTL is in seconds" in full["result"]

        key = await call(s, "mem_suggest_topic_key", type="decision", title="Use JWT for auth")
        assert key["result"] == "Suggested topic_key: decision/use-jwt-for-auth"
        await call(s, "mem_save", title="Auth", content="JWT, 1h", topic_key="decision/auth")
        again = await call(
            s, "mem_save", title="Auth", content="JWT, 2h", topic_key="decision/auth"
        )
        assert again["result"].startswith("Memory updated (same topic)")

        passive = await call(
            s,
            "mem_capture_passive",
            content="Done.\n\n## Key Learnings:\n1. Always run the migrations before the tests"
            "\n2. The cache must be cleared after every deploy",
        )
        assert passive["result"] == "Passive capture complete: extracted=2 saved=2 duplicates=0"
        summary = await call(s, "mem_session_summary", content="## Goal\nFix the login timeout")
        assert summary["result"] == 'Session summary saved for project "acme"'

        context = await call(s, "mem_context")
        assert context["result"].startswith("## Memory from Previous Sessions")
        assert "Memory stats:" in context["result"] and "Fixed login timeout" in context["result"]
        found = await call(s, "mem_search", query="why were users logged out?")
        assert f"#{first} (bugfix) — Fixed login timeout" in found["result"]
        everywhere = await call(s, "mem_search", query="acme-old", all_projects=True)
        assert everywhere["project_source"] == "all_projects" and "Old name" in everywhere["result"]
        stats = await call(s, "mem_stats")
        assert "- Observations: 6" in stats["result"]
        listed = await call(s, "mem_list_projects")
        assert listed["result"]["count"] == 2
        assert {p["name"] for p in listed["result"]["projects"]} == {"acme", "acme-old"}
        timeline = await call(s, "mem_timeline", observation_id=first)
        assert f">>> #{first} [bugfix] Fixed login timeout <<<" in timeline["result"]

        ended = await call(s, "mem_session_end", id="s-1", summary="timeout fixed")
        assert ended["result"] == 'Session "s-1" completed'
        assert ended["project_source"] == "session"
        reopened = await fail(s, "mem_session_start", id="s-1")
        assert reopened["error_code"] == "session_already_ended"

        merged = await call(s, "mem_merge_projects", **{"from": "acme-old", "to": "acme"})
        assert merged["result"]["canonical"] == "acme"
        assert merged["result"]["observations_updated"] == 1
        updated = await call(s, "mem_update", id=first, title="Fixed the login timeout")
        assert updated["result"] == (
            f'Memory updated: #{first} "Fixed the login timeout" (bugfix, scope=project)'
        )
        deleted = await call(s, "mem_delete", id=first)
        assert deleted["result"] == f"Memory #{first} soft-deleted"
        gone = await fail(s, "mem_get_observation", id=first)
        assert gone["error_code"] == "not_found"


async def test_calls_build_on_each_other(data_dir: Path, workdir: Path) -> None:
    """save → search → get → update → timeline → delete, each step using the last one's id."""
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        await call(s, "mem_save", title="Chose SQLite", content="local-first, one file")
        saved = await call(
            s, "mem_save", title="N+1 in user list", content="**What**: added a join", type="bugfix"
        )
        # `observation` is the older name of `content`, still accepted.
        await call(s, "mem_save", title="Cache headers", observation="set max-age on assets")
        ident = saved_id(saved)

        found = await call(s, "mem_search", query="user list query", limit=5)
        assert f"[1] #{ident} (bugfix) — N+1 in user list" in found["result"]
        got = await call(s, "mem_get_observation", id=ident)
        assert got["result"].startswith(f"#{ident} [bugfix] N+1 in user list\n**What**")

        await call(s, "mem_update", id=ident, content="**What**: added a select_related join")
        got = await call(s, "mem_get_observation", id=ident)
        assert "select_related" in got["result"] and "Revisions: 2" in got["result"]
        found = await call(s, "mem_search", query="select_related")
        assert f"#{ident}" in found["result"]

        timeline = await call(s, "mem_timeline", observation_id=ident, before=1, after=1)
        text = timeline["result"]
        assert text.index("Chose SQLite") < text.index(f">>> #{ident}") < text.index("Cache")

        await call(s, "mem_delete", id=ident, hard_delete=True)
        found = await call(s, "mem_search", query="select_related")
        assert found["result"] == 'No memories found for: "select_related"'
        assert (await fail(s, "mem_timeline", observation_id=ident))["error_code"] == "not_found"
