"""Fixtures of the cloud server tests: a real PostgreSQL cluster (tests/support/postgres.py), the
server's settings in authenticated mode, the app under litestar's TestClient, and helpers to
mint managed users and tokens."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine

from engram_cloud.app import create_app
from engram_cloud.db import create_db_engine
from engram_cloud.principals import CLI_ACTOR, create_principal, grant, issue_token
from engram_cloud.settings import Settings, parse_allowlist
from tests.support import REPO, engram_env, free_port, stop_process, wait_for_port
from tests.support.observed_cloud import command as observed_command
from tests.support.postgres import (  # noqa: F401  (pytest finds fixtures by name)
    fixture_cloud_db_url,
    fixture_cloud_template,
    fixture_postgres_cluster,
    fixture_postgres_url,
)

LEGACY_TOKEN = "legacy-shared-token-for-tests-0123456789"
ADMIN_TOKEN = "legacy-admin-token-for-tests-9876543210"
JWT_SECRET = "jwt-secret-for-tests-0123456789abcdefghijklmnop"


@pytest.fixture
def settings(cloud_db_url: str) -> Settings:
    return Settings(
        database_url=cloud_db_url,
        allowed_projects=parse_allowlist("*"),
        token=LEGACY_TOKEN,
        admin_token=ADMIN_TOKEN,
        jwt_secret=JWT_SECRET,
        pool_size=4,
    )


@pytest.fixture(name="engine")
def fixture_engine(cloud_db_url: str) -> Iterator[Engine]:
    db = create_db_engine(cloud_db_url, pool_size=2)
    yield db
    db.dispose()


@pytest.fixture(name="make_client")
def fixture_make_client(settings: Settings) -> Iterator[Callable[..., TestClient]]:
    """``make_client(**settings_overrides)`` → a started TestClient on a fresh app."""
    clients: list[TestClient] = []

    def make(**overrides: object) -> TestClient:
        client = TestClient(create_app(replace(settings, **overrides)), timeout=30)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture(name="client")
def fixture_client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def make_user(engine: Engine, settings: Settings) -> Callable[..., str]:
    """``make_user(name, projects=[...], role="member")`` → a raw managed token."""

    def make(
        name: str,
        projects: tuple[str, ...] | list[str] = (),
        role: str = "member",
        kind: str = "human",
    ) -> str:
        with engine.begin() as conn:
            create_principal(conn, CLI_ACTOR, name, role=role, kind=kind)
            for project in projects:
                grant(conn, CLI_ACTOR, name, project)
            raw, _ = issue_token(conn, CLI_ACTOR, settings.token_pepper, name)
        return raw

    return make


@dataclass
class RunningServer:
    """A real ``engram cloud serve`` process."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def peak_rss_kib(self) -> int:
        """The process's peak resident memory so far (``VmHWM``), in KiB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM in /proc status")

    def output(self) -> str:
        return Path(self.log).read_text(errors="replace")


@pytest.fixture
def serve(data_dir: Path, cloud_db_url: str) -> Iterator[Callable[..., RunningServer]]:
    """``serve(*args, **env)`` → a running ``engram cloud serve`` on a free port (legacy token
    and JWT secret set, projects acme and widgets allowed unless ``env`` says otherwise)."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(*extra: str, observe: Path | None = None, **env: str) -> RunningServer:
        """``observe``: run through :mod:`tests.support.observed_cloud`, which appends the
        long-poll notifier's events to that file."""
        port = free_port()
        log = data_dir / f"cloud-serve-{port}.log"
        settings = {
            "ENGRAM_DATABASE_URL": cloud_db_url,
            "ENGRAM_JWT_SECRET": JWT_SECRET,
            "ENGRAM_CLOUD_TOKEN": LEGACY_TOKEN,
            "ENGRAM_CLOUD_ALLOWED_PROJECTS": "acme,widgets",
            **env,
        }
        args = ("cloud", "serve", "--port", str(port), "--log-level", "warning", *extra)
        process = subprocess.Popen(
            observed_command(observe, *args)
            if observe
            else [sys.executable, "-m", "engram", *args],
            env=engram_env(data_dir, settings),
            cwd=REPO,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        processes.append(process)
        try:
            wait_for_port(port, timeout=60)
        except TimeoutError:
            process.kill()
            raise AssertionError(f"engram cloud serve did not start:\n{log.read_text()}") from None
        return RunningServer(f"http://127.0.0.1:{port}", process, log)

    yield start
    for process in processes:  # all at once: they shut down side by side
        process.send_signal(signal.SIGTERM)
    for process in processes:
        stop_process(process)


@pytest.fixture
def start_server(serve: Callable[..., RunningServer]) -> Callable[..., str]:
    """``start_server(*args)`` → the URL of a running ``engram cloud serve``."""
    return lambda *extra: serve(*extra).url
