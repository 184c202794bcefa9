"""Issue 20 through a real ``engram mcp`` server and the SDK's stdio client: a small project's
memories saved with mem_save, the graph ingested with mem_graph_ingest, and mem_graph_query
answering "what connects the auth middleware to the session store?" with the triples and their
source memories; relations made, listed and judged by agents; conflicts found off the save
path; bad cases as tool errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.client import call, engram_mcp, fail, saved_id

pytestmark = pytest.mark.anyio

MEMORIES = [
    (
        "Auth middleware",
        "**What**: the auth middleware validates the JWT and loads the user "
        "from the session cache.\n**Where**: src/auth/middleware.py",
        "architecture",
    ),
    (
        "Session cache",
        "**What**: the session cache reads entries from the session store when a key expires.",
        "architecture",
    ),
    (
        "Session store",
        "**What**: the session store runs on Redis with a 30 minute TTL.",
        "decision",
    ),
    ("CI", "**What**: the CI pipeline runs on GitHub Actions.", "config"),
]


async def test_what_connects_the_auth_middleware_to_the_session_store(
    data_dir: Path, workdir: Path
) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as session:
        ids = [
            saved_id(await call(session, "mem_save", title=t, content=c, type=k))
            for t, c, k in MEMORIES
        ]
        ingested = await call(session, "mem_graph_ingest")
        assert ingested["project"] == "acme" and ingested["result"]["memories"] == 4
        assert ingested["result"]["remaining"] == 0
        answer = await call(
            session, "mem_graph_query",
            question="What connects the auth middleware to the session store?",
        )  # fmt: skip
        result = answer["result"]
        assert result["connected"] is True
        assert [e["name"] for e in result["entities"]] == ["auth middleware", "session store"]
        chain = [
            (t["subject"], t["predicate"], t["object"], t["source"]["id"])
            for t in result["triples"]
        ]
        assert chain == [
            ("auth middleware", "reads_from", "session cache", ids[0]),
            ("session cache", "reads_from", "session store", ids[1]),
        ]
        assert result["triples"][1]["sources"] == [
            {
                "id": ids[1],
                "sync_id": result["triples"][1]["source"]["sync_id"],
                "title": "Session cache",
            }
        ]
        assert "auth middleware —reads_from→ session cache" in result["text"]
        one = await call(session, "mem_graph_ingest", id=ids[2])
        assert one["result"]["memories"] == 1


async def test_agents_relate_list_and_judge(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir) as session:
        old = saved_id(
            await call(
                session,
                "mem_save",
                title="Session store",
                content="We keep sessions in Redis with a 30 minute TTL",
            )
        )
        new = saved_id(
            await call(
                session,
                "mem_save",
                title="Session store",
                content="We keep sessions in PostgreSQL with a 30 minute TTL",
            )
        )
        # The conflict check runs off the save path; the next read sees its result.
        listed = await call(session, "mem_relations", id=old)
        assert listed["result"]["needs_review"] is True
        [conflict] = listed["result"]["relations"]
        assert conflict["relation"] == "conflicts_with" and conflict["state"] == "pending"
        assert f"contested by #{new}" in listed["result"]["text"]
        found = await call(session, "mem_search", query="sessions redis postgresql")
        assert "pending review" in found["result"]
        judged = await call(
            session,
            "mem_judge",
            judgment_id=conflict["sync_id"],
            relation="supersedes",
            reason="we moved to PostgreSQL",
        )
        assert judged["result"]["relation"]["state"] == "judged"
        shown = await call(session, "mem_get_observation", id=old)
        assert f"superseded by #{new}" in shown["result"]
        found = await call(session, "mem_search", query="sessions redis")
        text = found["result"]
        assert text.index(f"#{new} ") < text.index(f"#{old} ")  # below its successor
        assert f"supersedes #{old}" in text
        # Sync ids work too, and a pair has one relation.
        sync_id = judged["result"]["relation"]["target_id"]
        again = await call(
            session, "mem_relate", source_id=f"#{new}", target_id=sync_id, relation="related"
        )
        assert again["result"]["relation"]["sync_id"] == conflict["sync_id"]


async def test_bad_relations_are_tool_errors(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir) as session:
        a = saved_id(await call(session, "mem_save", title="A", content="first"))
        other = saved_id(await call(session, "mem_save", title="B", content="x", project="acme"))
        assert (await fail(session, "mem_relate", source_id=a, target_id=999, relation="related"))[
            "error_code"
        ] == "not_found"
        assert (await fail(session, "mem_relate", source_id=a, target_id=a, relation="related"))[
            "error_code"
        ] == "invalid_argument"
        assert (await fail(session, "mem_relate", source_id=a, target_id=other, relation="loves"))[
            "error_code"
        ] == "invalid_arguments"
        assert (await fail(session, "mem_judge", judgment_id="rel-nope"))[
            "error_code"
        ] == "not_found"
        assert (await fail(session, "mem_graph_query", question=""))[
            "error_code"
        ] == "invalid_argument"
        nothing = await call(session, "mem_graph_query", question='x" OR 1=1 --')
        assert nothing["result"]["triples"] == []


async def test_the_first_seeds_graph_tools_on_request(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "agent,seed") as session:
        for title, content, kind in MEMORIES:
            await call(session, "mem_save", title=title, content=content, type=kind)
        assert (await call(session, "graph_ingest"))["result"]["memories"] == 4
        answer = await call(
            session,
            "graph_query",
            question="What connects the auth middleware to the session store?",
        )
        assert answer["result"]["connected"] and answer["result"]["count"] == 2
        found = await call(session, "graph_relationships", entity_name="Session Store")
        assert found["result"]["entity"] == "session store"
        predicates = {r["predicate"] for r in found["result"]["relationships"]}
        assert {"reads_from", "runs_on", "concerns"} == predicates  # concerns: the decision
        empty = await call(session, "graph_relationships", entity_name="nothing")
        assert empty["result"]["relationships"] == []
        assert (await fail(session, "graph_ingest", path="entities/foo.md"))[
            "error_code"
        ] == "invalid_argument"
