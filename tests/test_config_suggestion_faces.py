"""Every face resolves the project the same way: a committed ``.engram/config.json`` is not
followed until this machine accepted it — through the MCP server (a real process and the SDK's
client) and the HTTP API — and they say that a suggestion is waiting."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
from litestar.testing import TestClient

from engram.bindings import Bindings
from engram.http.app import create_app
from engram.store import Store
from tests.mcp.client import call, engram_mcp
from tests.support.http import BASE_URL


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A clone of ``.../service.git`` whose committed config.json names another project."""
    path = tmp_path / "checkout"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(
        ["git", "-C", str(path), "remote", "add", "origin", "git@example.com:org/service.git"],
        check=True,
    )
    (path / ".engram").mkdir()
    (path / ".engram" / "config.json").write_bytes(orjson.dumps({"project_name": "payroll"}))
    return path


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_mcp_server_keeps_to_the_remote_until_accepted(
    repo: Path, data_dir: Path, anyio_backend: str
) -> None:
    async with engram_mcp(data_dir, repo) as session:
        here = await call(session, "mem_current_project")
        assert (here["project"], here["project_source"]) == ("service", "git_remote")
        assert 'suggests project "payroll"' in here["warning"]
        saved = await call(session, "mem_save", title="Where", content="**What**: here")
        assert saved["project"] == "service"
    Bindings(data_dir).accept_config(repo / ".engram", "payroll")
    async with engram_mcp(data_dir, repo) as session:
        here = await call(session, "mem_current_project")
        assert (here["project"], here["project_source"]) == ("payroll", "config")
    log = (repo.parent / f"mcp-stderr-{repo.name}.log").read_text()
    assert log.count('suggests project "payroll"') == 1  # said once, by the first server


def test_the_http_api_keeps_to_the_remote_until_accepted(
    repo: Path, store: Store, data_dir: Path, monkeypatch
) -> None:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(data_dir))
    monkeypatch.chdir(repo)
    with TestClient(create_app(store), base_url=BASE_URL) as client:
        body = client.get("/project/current").json()
        assert (body["project"], body["project_source"]) == ("service", "git_remote")
        assert "engram sync --accept-config" in body["warning"]
        Bindings(data_dir).accept_config(repo / ".engram", "payroll")
        body = client.get("/project/current").json()
        assert (body["project"], body["project_source"]) == ("payroll", "config")
