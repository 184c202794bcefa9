"""A real ``engram serve`` process on a free port: real HTTP, signals, ports, settings."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from engram.settings import Config
from engram.store import Store
from tests.http.test_auth_and_app import EXPECTED_ROUTES, documented_routes
from tests.support import REPO, engram_env, free_port, run_engram, wait_for_port, wait_until
from tests.support.http import TOKEN, Server, start_server


def test_every_route_over_real_http(server: Server) -> None:
    with server.http() as http:
        assert http.get("/health").json()["status"] == "ok"
        assert documented_routes(http.get("/schema").json()) == EXPECTED_ROUTES
        assert http.post("/sessions", json={"id": "s-1", "project": "acme"}).status_code == 201
        oid = http.post(
            "/observations",
            json={"title": "Login fix", "content": "raised the TTL", "session_id": "s-1"},
        ).json()["id"]
        assert (
            http.post(
                "/observations/passive",
                json={
                    "content": "## Key Learnings\n"
                    "1. Always raise the token TTL before a long deploy window"
                },
            ).json()["saved"]
            == 1
        )
        assert http.get("/search", params={"q": "login"}).json()[0]["id"] == oid
        assert http.get(f"/observations/{oid}").json()["title"] == "Login fix"
        assert http.patch(f"/observations/{oid}", json={"type": "bugfix"}).status_code == 200
        assert http.get("/observations", params={"type": "bugfix"}).json()["total"] == 1
        assert http.get("/observations/recent").status_code == 200
        assert http.get("/timeline", params={"observation_id": oid}).status_code == 200
        prompt = http.post("/prompts", json={"content": "why login?", "session_id": "s-1"})
        assert http.get("/prompts/recent").json()[0]["content"] == "why login?"
        assert http.get("/prompts/search", params={"q": "login"}).status_code == 200
        assert "Login fix" in http.get("/context").json()["context"]
        assert http.get("/stats").json()["total_observations"] == 2
        # acme (the session's), and the server's own project for the passive capture, which
        # named neither (issue 17 item 1: never project "")
        here = http.get("/project/current").json()
        assert here["project"] and here["available_projects"] == sorted({"acme", here["project"]})
        names = {p["name"] for p in http.get("/projects").json()["projects"]}
        assert names == {"acme", here["project"]}
        assert http.get("/sync/status").json()["reason_code"] == "cloud_not_configured"
        assert http.post("/topic-keys/suggest", json={"title": "Login"}).status_code == 200
        exported = http.get("/export").json()
        assert http.post("/import", json=exported).json()["skipped"] == 5
        assert http.post("/sessions/s-1/end", json={"summary": "done"}).status_code == 200
        recent = {s["id"]: s for s in http.get("/sessions/recent").json()}
        assert recent["s-1"]["summary"] == "done" and recent["s-1"]["ended_at"]
        assert http.delete(f"/prompts/{prompt.json()['id']}").status_code == 200
        assert http.delete(f"/observations/{oid}", params={"hard": "true"}).status_code == 200
        assert http.delete("/sessions/s-1").status_code == 200
        # Everything of acme was deleted above: merging it now merges nothing, so it is refused
        # like any unknown project (issue 17 item 6); with a memory it moves.
        nothing = http.post("/projects/merge", json={"from": ["acme"], "to": "acme-corp"})
        assert nothing.status_code == 404 and nothing.json()["error_code"] == "unknown_project"
        http.post("/observations", json={"title": "Kept", "content": "x", "project": "acme"})
        merged = http.post("/projects/merge", json={"from": ["acme"], "to": "acme-corp"})
        assert merged.status_code == 200
        migrated = http.post(
            "/projects/migrate", json={"old_project": "acme-corp", "new_project": "acme"}
        )
        assert migrated.status_code == 200
        missing = http.get("/no/such/route")
        assert missing.status_code == 404 and missing.json() == {
            "error": "not found: GET /no/such/route"
        }
    code, err = server.stop()
    assert code == 0 and err.strip().endswith("engram serve: stopped")


def test_concurrent_clients_lose_no_writes(server: Server) -> None:
    acknowledged: list[int] = []
    failures: list[str] = []

    def client(n: int) -> None:
        with server.http() as http:
            for i in range(25):
                response = http.post(
                    "/observations",
                    json={"title": f"c{n} #{i}", "content": f"client {n} write {i}"},
                )
                if response.status_code == 201:
                    acknowledged.append(response.json()["id"])
                else:
                    failures.append(response.text)
                found = http.get("/search", params={"q": f"client {n}"})
                if found.status_code != 200:
                    failures.append(found.text)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and len(set(acknowledged)) == 200
    assert server.stop()[0] == 0
    with Store.open(config=Config(data_dir=server.data_dir)) as store:
        assert store.count_observations() == 200


def test_sigterm_finishes_in_flight_writes_and_loses_none(server: Server) -> None:
    """Writers hammer the server; SIGTERM arrives mid-stream. Every write the server
    acknowledged is stored, and nothing it did not acknowledge is."""
    acknowledged: list[int] = []
    unexpected: list[str] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        with server.http() as http:
            i = 0
            while not stop.is_set():
                try:
                    response = http.post(
                        "/observations",
                        json={"title": f"w{n} #{i}", "content": f"writer {n} item {i}"},
                    )
                except httpx.TransportError:
                    return  # the server is gone: this request was never processed
                if response.status_code != 201:
                    unexpected.append(response.text)
                    return
                acknowledged.append(response.json()["id"])
                i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    wait_until(lambda: len(acknowledged) >= 80, timeout=20, every=0.01)
    code, err = server.stop(signal.SIGTERM)
    stop.set()
    for t in threads:
        t.join()
    assert code == 0, err
    assert unexpected == []
    assert "engram serve: stopped" in err and "Traceback" not in err
    with Store.open(config=Config(data_dir=server.data_dir)) as store:
        assert store.count_observations() == len(acknowledged) >= 80
        assert {store.get_observation(i).id for i in acknowledged} == set(acknowledged)


def test_sigint_stops_cleanly(server: Server) -> None:
    with server.http() as http:
        http.post("/observations", json={"title": "t", "content": "c"}).raise_for_status()
    code, err = server.stop(signal.SIGINT)
    assert code == 0 and "engram serve: stopped" in err and "Traceback" not in err
    assert "warning" not in err  # loopback: nothing to warn about


def test_port_already_taken_is_one_clear_line(server: Server, tmp_path: Path) -> None:
    result = run_engram("serve", "--port", str(server.port), data_dir=tmp_path / "other")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"engram: error: port {server.port} on 127.0.0.1 is already in use: is another "
        "'engram serve' running? Stop it, or pick another port with --port N (or ENGRAM_PORT; "
        "0 picks a free one)"
    ]


def test_port_from_argument_or_environment(data_dir: Path) -> None:
    port = free_port()
    for argv, env in (([str(port)], None), ([], {"ENGRAM_PORT": str(port)})):
        process = subprocess.Popen(
            [sys.executable, "-m", "engram", "serve", *argv],
            cwd=REPO,
            env=engram_env(data_dir, env),
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for_port(port)
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0 and f"http://127.0.0.1:{port}" in err


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["70000"], {}, "port must be between 0 and 65535"),
        (["7001", "--port", "7002"], {}, "two different ports"),
        ([], {"ENGRAM_PORT": "web"}, "ENGRAM_PORT must be an integer"),
        (["--port", "0", "--host", "no-such-host.invalid"], {}, "cannot listen on"),
        (["--port", "0"], {"ENGRAM_DATA_DIR": "{file}"}, "data directory"),
    ],
)
def test_bad_settings_are_one_clear_line(
    args, env, words, data_dir: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    from engram.cli.main import main

    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the data directory should be")
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(data_dir))
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(file=blocker / "sub"))
    assert main(["serve", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("engram: error: ") and words in err and len(err.splitlines()) == 1


def test_a_port_that_is_not_a_number_is_a_usage_error(data_dir: Path) -> None:
    usage = run_engram("serve", "abc", data_dir=data_dir)
    assert usage.returncode == 2 and "invalid int value: 'abc'" in usage.stderr


def test_listening_beyond_loopback_warns(data_dir: Path) -> None:
    running = start_server(data_dir, "--host", "0.0.0.0")
    code, err = running.stop()
    assert code == 0
    assert "warning: listening on 0.0.0.0, not loopback" in err
    assert "set ENGRAM_HTTP_TOKEN" in err


def test_token_from_the_environment(data_dir: Path) -> None:
    running = start_server(data_dir, env={"ENGRAM_HTTP_TOKEN": TOKEN})
    try:
        with running.http() as http:
            oid = http.post("/observations", json={"title": "t", "content": "c"}).json()["id"]
            assert http.delete(f"/observations/{oid}").status_code == 401
            assert http.get("/export").status_code == 401
            auth = {"Authorization": f"Bearer {TOKEN}"}
            assert http.delete(f"/observations/{oid}", headers=auth).status_code == 200
            assert http.get("/export", headers=auth).status_code == 200
    finally:
        running.stop()
