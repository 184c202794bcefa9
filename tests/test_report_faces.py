"""One object on every face for the graph's and consolidation's results: ``engram … --json``,
the HTTP API and the MCP tools' structured data give the same JSON object for a graph query and a
consolidation dry run — the Structs the store builds (engram/graph/answers.py,
engram/consolidate/report.py), served as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from litestar.testing import TestClient

from engram.consolidate.report import ConsolidationReport
from engram.graph.answers import GraphAnswer
from engram.http.app import create_app
from engram.settings import Config
from engram.store import Store
from tests.mcp.client import call, engram_mcp
from tests.support import run_engram
from tests.support.http import BASE_URL

QUESTION = "What connects the auth middleware to the session store?"
LOGIN = "**What**: raised the gunicorn worker timeout to 60s\n**Why**: slow SSO redirect"
#: Dated over 90 days ago, so the importance the dry run computes (its recency term) is the
#: same whenever each face runs it.
MEMORIES = [
    ("obs-auth", "Auth middleware", "**What**: the auth middleware validates the JWT and loads "
     "the user from the session cache.\n**Where**: src/auth/middleware.py"),
    ("obs-cache", "Session cache", "**What**: the session cache reads entries from the session "
     "store when a key expires."),
    ("obs-store", "Session store", "**What**: the session store runs on Redis with a 30 minute "
     "TTL."),
    ("obs-login-a", "Login fix", LOGIN),
    ("obs-login-b", "Login fixed", LOGIN + "\nnginx"),
    ("obs-trivia", "tmp", "x"),
]  # fmt: skip


def _fill(store: Store) -> None:
    stamp = "2025-01-01 10:00:00"
    store.import_data(
        {
            "version": "0.1.0",
            "observations": [
                {"sync_id": key, "session_id": "s", "project": "acme", "title": title,
                 "content": content, "created_at": stamp, "updated_at": stamp}
                for key, title, content in MEMORIES
            ],
        }
    )  # fmt: skip


def _same(answer: dict[str, Any]) -> dict[str, Any]:
    """The object without what differs from one run to the next (the time it took) and the
    MCP tools' human text."""
    return {k: v for k, v in answer.items() if k not in ("elapsed_ms", "text")}


def _cli(data_dir: Path, *args: str) -> dict[str, Any]:
    done = run_engram(*args, "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = orjson.loads(done.stdout)
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_graph_query_and_a_dry_run_are_one_object_on_every_face(
    data_dir: Path, tmp_path: Path, anyio_backend: str
) -> None:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        _fill(store)
        answer = store.graph_query(QUESTION, project="acme")
        report = store.consolidate("acme", dry_run=True)
        with TestClient(create_app(store), base_url=BASE_URL) as client:
            http_answer = client.get("/graph/query", params={"q": QUESTION, "project": "acme"})
            http_report = client.post("/consolidate", json={"project": "acme", "dry_run": True})
    assert http_answer.status_code == 200 and http_report.status_code == 200
    # Something to compare: a connected answer, a merge and an archive planned.
    assert answer.connected and [len(t.sources) for t in answer.triples] == [1, 1]
    assert [s.sync_id for s in report.merges[0].sources] == ["obs-login-a", "obs-login-b"]
    assert "obs-trivia" in {a.memory.sync_id for a in report.archives}

    cli_answer = _cli(data_dir, "graph", "query", QUESTION, "--project", "acme")
    cli_report = _cli(data_dir, "consolidate", "--project", "acme", "--dry-run")
    workdir = tmp_path / "acme"  # a plain directory: its project is acme
    workdir.mkdir()
    async with engram_mcp(data_dir, workdir, "--tools", "all") as session:
        mcp_answer = (await call(session, "mem_graph_query", question=QUESTION))["data"]
        mcp_report = (await call(session, "mem_consolidate", dry_run=True))["data"]

    for faces, built in ((
        [http_answer.json(), cli_answer, mcp_answer], answer.to_dict()), (
        [http_report.json(), cli_report, mcp_report], report.to_dict()),
    ):  # fmt: skip
        for face in faces:
            assert _same(face) == _same(built)
            assert list(face) == [*(["text"] if "text" in face else []), *built]  # one order
    assert mcp_answer["text"].startswith("What connects auth middleware and session store:")


@pytest.mark.parametrize(
    ("method", "path", "model"),
    [("get", "/graph/query", GraphAnswer), ("post", "/consolidate", ConsolidationReport)],
)
def test_the_schema_documents_the_library_structs(
    store: Store, method: str, path: str, model: type[msgspec.Struct]
) -> None:
    """/schema describes these answers with the library's own Structs: no wire copy to drift."""
    with TestClient(create_app(store), base_url=BASE_URL) as client:
        doc = client.get("/schema/openapi.json").json()
    answer = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]
    assert answer["schema"] == {"$ref": f"#/components/schemas/{model.__name__}"}
    declared = doc["components"]["schemas"][model.__name__]
    fields = [f.name for f in msgspec.structs.fields(model)]
    assert list(declared["properties"]) == fields and sorted(declared["required"]) == sorted(fields)
