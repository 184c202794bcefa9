"""The tools' generated schemas (engram/mcp/schemas.py): ``schemas.json`` says exactly what
building the tools says, a server listed from it answers ``tools/list`` byte for byte as one
that builds every tool at start-up, its tools validate and run like built ones, and an
out-of-date file is never listed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engram.mcp import schemas
from engram.mcp.server import ALL_TOOLS, SEED_ALIASES, build_server, every_tool
from engram.settings import Config
from engram.store import Store

pytestmark = pytest.mark.anyio
EVERY = list(ALL_TOOLS + SEED_ALIASES)


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(config=Config(data_dir=tmp_path / "data")) as opened:
        yield opened


def test_the_file_is_what_building_the_tools_gives(store: Store) -> None:
    stored = orjson.loads(schemas.SCHEMAS_FILE.read_bytes())
    assert stored == schemas.generate(every_tool(store)), (
        "engram/mcp/schemas.json is out of date: run `python -m engram.mcp.schemas`"
    )


def dumped(tools: list) -> bytes:
    return orjson.dumps(
        [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    )


@pytest.mark.parametrize("full", [False, True])
async def test_listed_from_the_file_as_when_every_tool_is_built(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full: bool
) -> None:
    listed = build_server(store, tools=EVERY, cwd=str(tmp_path), full=full)
    assert all(isinstance(t, schemas.DeferredTool) for t in listed._tool_manager.list_tools())
    monkeypatch.setattr(schemas, "load", lambda: {})
    built = build_server(store, tools=EVERY, cwd=str(tmp_path), full=full)
    assert not any(isinstance(t, schemas.DeferredTool) for t in built._tool_manager.list_tools())
    assert dumped(await listed.list_tools()) == dumped(await built.list_tools())


async def test_a_listed_tool_validates_and_runs_as_a_built_one(
    store: Store, tmp_path: Path
) -> None:
    server = build_server(store, cwd=str(tmp_path))
    bad = await server.call_tool("mem_save", {"title": "t", "content": 5})
    assert bad.is_error
    assert orjson.loads(bad.content[0].text)["error_code"] == "invalid_arguments"
    saved = await server.call_tool("mem_save", {"title": "Deferred", "content": "built on call"})
    assert not saved.is_error, saved.content[0].text
    merged = await server.call_tool("mem_merge_projects", {"from": "nope", "to": "x"})
    assert merged.is_error  # (its explicit model, `from` by alias, built on call as well)
    assert "nope" in orjson.loads(merged.content[0].text)["error"]


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"source": "0", "tools": {}}', b"[]"])
def test_a_missing_broken_or_stale_file_lists_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    path = tmp_path / "schemas.json"
    if content:
        path.write_bytes(content)
    monkeypatch.setattr(schemas, "SCHEMAS_FILE", path)
    assert schemas.load() == {}


def test_an_entry_of_another_shape_is_built_at_start_up(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = orjson.loads(schemas.SCHEMAS_FILE.read_bytes())
    stored["tools"]["mem_save"] = {"input": "not a schema"}
    path = tmp_path / "schemas.json"
    path.write_bytes(orjson.dumps(stored))
    monkeypatch.setattr(schemas, "SCHEMAS_FILE", path)
    assert "mem_save" not in schemas.load() and "mem_search" in schemas.load()
    server = build_server(store, cwd=str(tmp_path))
    tools = {t.name: t for t in server._tool_manager.list_tools()}
    assert not isinstance(tools["mem_save"], schemas.DeferredTool)
    assert isinstance(tools["mem_search"], schemas.DeferredTool)


def test_a_file_written_for_other_code_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = orjson.loads(schemas.SCHEMAS_FILE.read_bytes())
    stored["source"] = "f" * 64  # (what an edit of the tools' modules leaves it as)
    path = tmp_path / "schemas.json"
    path.write_bytes(orjson.dumps(stored))
    monkeypatch.setattr(schemas, "SCHEMAS_FILE", path)
    assert schemas.load() == {}
