"""Saves without a project go to the server's project (issue 17 item 1), as the MCP server's
do: never to project "" (which no project list, context or sync shows). ``GET /project/current``
lists the projects a request may name, as MCP's ``mem_current_project`` does."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from engram.http.app import create_app
from engram.store import Store
from tests.support.http import BASE_URL


def git_repo(path: Path, remote: str | None = None) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    if remote:
        subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    return path


@pytest.fixture
def in_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "checkout", "git@example.com:team/acme-web.git")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("ENGRAM_PROJECT", raising=False)
    return repo


@pytest.fixture
def app_client(store: Store, in_repo: Path) -> Iterator[TestClient]:
    with TestClient(create_app(store), base_url=BASE_URL) as client:
        yield client


def test_saves_without_a_project_go_to_the_servers(app_client: TestClient, store: Store) -> None:
    saved = app_client.post("/observations", json={"title": "Pool", "content": "30"}).json()
    assert saved["observation"]["project"] == "acme-web"
    passive = {"content": "## Key Learnings:\n1. Always raise the pool before a long deploy"}
    assert app_client.post("/observations/passive", json=passive).json()["saved"] == 1
    assert app_client.post("/prompts", json={"content": "why?"}).json()["prompt"]["project"] == (
        "acme-web"
    )
    assert app_client.post("/sessions", json={"id": "s-web"}).status_code == 201
    assert store.get_session("s-web").project == "acme-web"
    assert store.project_names() == ["acme-web"]
    assert "Pool" in app_client.get("/context", params={"project": "acme-web"}).json()["context"]


def test_a_named_session_or_project_still_decides(app_client: TestClient, store: Store) -> None:
    store.create_session("s-other", "billing", "/src/billing")
    joined = app_client.post(
        "/observations", json={"title": "Invoice", "content": "x", "session_id": "s-other"}
    ).json()
    assert joined["observation"]["project"] == "billing"  # the session's project
    named = app_client.post(
        "/observations", json={"title": "Named", "content": "y", "project": "Docs"}
    ).json()
    assert named["observation"]["project"] == "docs"


def test_current_project_lists_the_projects_a_request_may_name(
    app_client: TestClient, store: Store
) -> None:
    store.add_observation(title="t", content="c", project="billing")
    current = app_client.get("/project/current").json()
    assert current["project"] == "acme-web" and current["project_source"] == "git_remote"
    assert current["available_projects"] == ["acme-web", "billing"]


def test_a_folder_of_several_repositories_refuses_saves_without_a_project(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mono = tmp_path / "mono"
    git_repo(mono / "api")
    git_repo(mono / "web")
    monkeypatch.chdir(mono)
    monkeypatch.delenv("ENGRAM_PROJECT", raising=False)
    with TestClient(create_app(store), base_url=BASE_URL) as client:
        refused = client.post("/observations", json={"title": "t", "content": "c"})
        assert refused.status_code == 400
        body = refused.json()
        assert body["error_code"] == "ambiguous_project"
        assert body["available_projects"] == ["api", "web"]
        assert store.stats().total_observations == 0  # nothing written
        named = client.post("/observations", json={"title": "t", "content": "c", "project": "api"})
        assert named.status_code == 201
        assert client.get("/project/current").json()["available_projects"] == ["api", "web"]
