"""A real ``engram hub`` process answering the seed's example requests over HTTP."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx

from engram.settings import Config
from engram.store import Store
from tests.support import REPO, engram_env, free_port, run_engram, wait_for_port
from tests.support.hub import SAMPLE, TOKEN, fill


def start_hub(data_dir: Path, port: int, env: dict[str, str]) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "engram", "hub", "--port", str(port)],
        cwd=REPO,
        env=engram_env(data_dir, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port)
    except TimeoutError:
        process.kill()
        raise AssertionError(f"engram hub did not start: {process.communicate()[1]}") from None
    return process


def test_the_seeds_examples_against_a_real_hub(data_dir: Path) -> None:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        fill(store, SAMPLE)
    port = free_port()
    process = start_hub(data_dir, port, {"ENGRAM_API_TOKEN": TOKEN})
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            assert http.get("/health").json()["status"] == "online"
            assert http.post("/search", json={"query": "memory"}).status_code == 401
            auth = {"Authorization": f"Bearer {TOKEN}"}
            body = http.post(
                "/search", json={"query": "tailscale.*mesh|headscale"}, headers=auth
            ).json()
            assert "Headscale" in body["results"] and body["elapsed_ms"] >= 0
            tagged = http.post(
                "/search",
                json={"tags": ["edge"], "date_from": "2026-03-01", "date_to": "2026-03-31"},
                headers=auth,
            )
            assert tagged.status_code == 200 and "Edge deploy" in tagged.json()["results"]
            assert http.get("/status", headers=auth).json()["service"] == "engram-hub"
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "listening on http://127.0.0.1:" in err and "engram hub: stopped" in err
    assert "ENGRAM_API_TOKEN is not set" not in err


def test_without_a_token_the_hub_warns_and_a_taken_port_is_one_line(data_dir: Path) -> None:
    port = free_port()
    process = start_hub(data_dir, port, {})
    try:
        taken = run_engram("hub", "--port", str(port), data_dir=data_dir)
        assert taken.returncode == 1
        assert f"port {port} on 127.0.0.1 is already in use" in taken.stderr
        assert "Traceback" not in taken.stderr
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "ENGRAM_API_TOKEN is not set" in err


def test_a_bad_port_is_a_clear_error(data_dir: Path) -> None:
    result = run_engram("hub", data_dir=data_dir, env={"ENGRAM_HUB_PORT": "eighty"})
    assert result.returncode == 1 and "ENGRAM_HUB_PORT must be an integer" in result.stderr
    result = run_engram("hub", "--port", "70000", data_dir=data_dir)
    assert result.returncode == 1 and "between 0 and 65535" in result.stderr
