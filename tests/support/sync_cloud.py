"""Fixtures of the cloud client tests: a real ``engram cloud serve`` process on a free port over a
fresh migrated PostgreSQL database (tests/support/postgres.py), local stores in their own data
directories, and a small fault-injecting HTTP proxy in front of the real server.

Nothing is mocked: the server, the database, the HTTP traffic and the stores are real; the proxy
is a real network hop that forwards every byte and can answer 500, stall, or drop connections
when a test asks it to.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from engram.settings import Config
from engram.store import Store
from engram.sync.cloud import state as cloud_state
from engram.sync.cloud.autosync import Autosync
from engram.sync.cloud.config import CloudConfig, normalize_server_url, save_cloud_config
from tests.support import REPO, engram_env, free_port, wait_for_port, wait_until
from tests.support.postgres import (  # noqa: F401  (pytest finds fixtures by name)
    fixture_cloud_db_url,
    fixture_cloud_template,
    fixture_postgres_cluster,
    fixture_postgres_url,
)
from tests.sync.cloud.proxy import FaultProxy

TOKEN = "cloud-client-tests-shared-token-0123456789"
JWT_SECRET = "cloud-client-tests-jwt-secret-abcdefghijklmnopqrstuvwxyz"


@dataclass
class CloudServer:
    """A running ``engram cloud serve`` (stop, kill and start it again on the same port)."""

    db_url: str
    port: int
    workdir: Path
    allowed: str = "*"
    insecure: bool = False
    process: subprocess.Popen | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str | None:
        return None if self.insecure else TOKEN

    def env(self) -> dict[str, str]:
        extra = {
            "ENGRAM_DATABASE_URL": self.db_url,
            "ENGRAM_CLOUD_ALLOWED_PROJECTS": self.allowed,
            "ENGRAM_CLOUD_DB_POOL_SIZE": "4",
        }
        if self.insecure:
            extra["ENGRAM_CLOUD_INSECURE_NO_AUTH"] = "1"
        else:
            extra.update(ENGRAM_CLOUD_TOKEN=TOKEN, ENGRAM_JWT_SECRET=JWT_SECRET)
        return engram_env(self.workdir / "server-home", extra)

    def start(self) -> None:
        log = self.workdir / f"cloud-server-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "engram",
                    "cloud",
                    "serve",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "warning",
                ],
                cwd=REPO,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for_port(self.port, timeout=30)
        except TimeoutError:
            self.process.kill()
            self.process.wait()
            raise RuntimeError(
                f"engram cloud serve did not start:\n{log.read_text()[-3000:]}"
            ) from None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> None:
        self.stop()
        self.start()

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``engram cloud admin …`` against this server's database."""
        result = subprocess.run(
            [sys.executable, "-m", "engram", "cloud", "admin", *args],
            cwd=REPO,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return result

    def mids(self, project: str | None = None) -> list[str]:
        """Every mid in the server's log (duplicates would show twice)."""
        import psycopg

        dsn = self.db_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn) as conn:
            if project is None:
                rows = conn.execute("SELECT mid FROM cloud_mutations ORDER BY seq").fetchall()
            else:
                rows = conn.execute(
                    "SELECT mid FROM cloud_mutations WHERE project = %s ORDER BY seq", (project,)
                ).fetchall()
        return [r[0] for r in rows]


@pytest.fixture
def make_server(cloud_db_url: str, tmp_path: Path) -> Iterator[Callable[..., CloudServer]]:
    servers: list[CloudServer] = []

    def make(*, allowed: str = "*", insecure: bool = False, start: bool = True) -> CloudServer:
        server = CloudServer(cloud_db_url, free_port(), tmp_path, allowed, insecure)
        servers.append(server)
        if start:
            server.start()
        return server

    yield make
    for server in servers:
        server.stop(signal.SIGKILL)


@pytest.fixture
def server(make_server: Callable[..., CloudServer]) -> CloudServer:
    return make_server()


@pytest.fixture(scope="module")
def shared_server(
    postgres_cluster, cloud_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CloudServer]:
    """One server for a whole module (tests give their projects unique names): starting a
    server costs seconds, and most service tests only need one that works."""
    name = postgres_cluster.create_database(template=cloud_template)
    server = CloudServer(
        postgres_cluster.url(name), free_port(), tmp_path_factory.mktemp("shared-server")
    )
    server.start()
    yield server
    server.stop(signal.SIGKILL)
    postgres_cluster.drop_database(name)


@pytest.fixture
def project(request: pytest.FixtureRequest) -> str:
    """A project name of this test's own (for tests that share a server)."""
    return "p-" + request.node.name.removeprefix("test_").replace("_", "-")[:40]


@pytest.fixture
def proxy(server: CloudServer) -> Iterator[FaultProxy]:
    with FaultProxy(server.port) as running:
        yield running


def cloud_config(url: str, token: str | None = TOKEN) -> CloudConfig:
    return CloudConfig(
        server_url=normalize_server_url(url),
        token=token,
        server_source="cloud.json",
        token_source="cloud.json" if token else None,
    )


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[[str], Store]]:
    """``open_store(name)`` → a store in its own data directory ``tmp_path/name``."""
    stores: list[Store] = []

    def make(name: str) -> Store:
        store = Store.open(config=Config(data_dir=tmp_path / name))
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


def wait_cycles(loop: Autosync, *, push: int = 0, pull: int = 0, timeout: float = 20.0) -> None:
    """Wait until the autosync ``loop``'s pusher finished ``push`` more cycles and its puller
    ``pull`` more, each cycle looking at every enrolled project. The cycle under way now counts
    as one: two are the least that include a whole cycle begun after this call. What proves
    "nothing happened" without sleeping."""
    pushed, pulled = loop.push_cycles + push, loop.pull_cycles + pull
    wait_until(lambda: loop.push_cycles >= pushed and loop.pull_cycles >= pulled, timeout)


def canonical(store: Store, project: str = "acme") -> bytes:
    return store.canonical_export(projects=[project], include_personal=False)


def configure(store: Store, server: CloudServer) -> CloudConfig:
    """Write the store's cloud.json for ``server`` (what ``engram cloud config`` does)."""
    return save_cloud_config(store.config.data_dir, server.url, server.token)


def enroll(*stores: Store, project: str = "acme") -> None:
    for store in stores:
        cloud_state.enroll(store, project)


#: Timings that make the loop react in milliseconds (tests only).
FAST = {
    "ENGRAM_AUTOSYNC_DEBOUNCE_MS": "20",
    "ENGRAM_AUTOSYNC_POLL_S": "5",
    "ENGRAM_AUTOSYNC_WATCH_MS": "100",
    "ENGRAM_AUTOSYNC_LEASE_S": "3",
    "ENGRAM_AUTOSYNC_BACKOFF_BASE_MS": "100",
    "ENGRAM_AUTOSYNC_BACKOFF_MAX_MS": "500",
    "ENGRAM_AUTOSYNC_HEARTBEAT_S": "1",
    "ENGRAM_AUTOSYNC_REFUSED_BASE_S": "1",
    "ENGRAM_AUTOSYNC_REFUSED_MAX_S": "2",
}


def autosync_env(url: str, token: str | None = TOKEN, **extra: str) -> dict[str, str]:
    env = {"ENGRAM_CLOUD_AUTOSYNC": "1", "ENGRAM_CLOUD_SERVER": url, **FAST, **extra}
    if token:
        env["ENGRAM_CLOUD_TOKEN"] = token
    return env


@dataclass
class LocalServe:
    """A real ``engram serve`` process (the local HTTP API) with its own data directory."""

    process: subprocess.Popen
    port: int
    data_dir: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def save(self, title: str, content: str, project: str = "acme", **extra: object) -> dict:
        body = {"title": title, "content": content, "type": "note", "project": project, **extra}
        answer = httpx.post(f"{self.url}/observations", json=body, timeout=10)
        assert answer.status_code in (200, 201), answer.text
        return answer.json()

    def search(self, query: str, project: str = "acme") -> list[dict]:
        answer = httpx.get(
            f"{self.url}/search", params={"q": query, "project": project}, timeout=10
        )
        assert answer.status_code == 200, answer.text
        data = answer.json()
        return data if isinstance(data, list) else data.get("results", [])

    def sync_status(self, project: str = "acme") -> dict:
        return httpx.get(f"{self.url}/sync/status", params={"project": project}, timeout=10).json()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def start_serve(tmp_path: Path) -> Iterator[Callable[..., LocalServe]]:
    """``start_serve(data_dir, env)`` → a running ``engram serve`` on a free port."""
    running: list[LocalServe] = []

    def start(data_dir: Path, env: dict[str, str] | None = None) -> LocalServe:
        port = free_port()
        log = tmp_path / f"serve-{port}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "engram", "serve", "--port", str(port)],
                cwd=REPO,
                env=engram_env(data_dir, env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        serve = LocalServe(process, port, data_dir, log)
        running.append(serve)
        try:
            wait_for_port(port, timeout=30)
        except TimeoutError:
            serve.stop(signal.SIGKILL)
            raise RuntimeError(f"engram serve did not start:\n{serve.output()[-3000:]}") from None
        return serve

    yield start
    for serve in running:
        serve.stop(signal.SIGKILL)
