"""Fixtures of the cloud server tests: a real PostgreSQL cluster (tests/support/postgres.py), the
server's settings in authenticated mode, the app under litestar's TestClient, and helpers to
mint managed users and tokens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine

from engram_cloud.app import create_app
from engram_cloud.db import create_db_engine
from engram_cloud.principals import CLI_ACTOR, create_principal, grant, issue_token
from engram_cloud.settings import Settings, parse_allowlist
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
