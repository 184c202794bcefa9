"""Fixtures for the HTTP API: litestar's test client over a private store, and a real
``engram serve`` process on a free port."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from litestar.testing import TestClient

from engram.http.app import create_app
from engram.store import Store
from tests.support import REPO, engram_env, free_port, wait_for_port

TOKEN = "correct-horse-battery-staple"
#: Where local programs reach the API: the app answers only loopback Hosts (TestClient's own
#: default, testserver.local, is a foreign name and gets 421).
BASE_URL = "http://127.0.0.1:7437"


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    """The app without a token (the default): every route open."""
    with TestClient(create_app(store), base_url=BASE_URL) as test_client:
        yield test_client


@pytest.fixture
def guarded(store: Store) -> Iterator[TestClient]:
    """The app with ENGRAM_HTTP_TOKEN set."""
    with TestClient(create_app(store, token=TOKEN), base_url=BASE_URL) as test_client:
        yield test_client


@dataclass
class Server:
    """A running ``engram serve`` process."""

    process: subprocess.Popen
    port: int
    data_dir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def http(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kw)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> tuple[int, str]:
        """Signal the server, wait for it; its exit status and everything it wrote."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            _, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
            raise
        return self.process.returncode, err


def start_server(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "engram", "serve", "--port", str(port), *args],
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
        _, err = process.communicate()
        raise AssertionError(f"engram serve did not start: {err}") from None
    return Server(process, port, data_dir)


@pytest.fixture
def server(data_dir: Path) -> Iterator[Server]:
    running = start_server(data_dir)
    yield running
    if running.process.poll() is None:
        running.stop()
