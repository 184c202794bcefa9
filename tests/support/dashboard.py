"""Fixtures of the dashboard tests: a real PostgreSQL database per test (tests/support/postgres.py),
the cloud app under litestar's TestClient, seeding through the server's own push path, managed
users, and a helper that logs a client in through the login form (CSRF cookie included)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine

from engram_cloud import sync_log
from engram_cloud.principals import CLI_ACTOR, create_principal, grant, issue_token
from engram_cloud.settings import Settings, parse_allowlist

# The app fixtures are the cloud package's; they use this package's ``settings`` below.
from tests.support.cloud import (  # noqa: F401  (pytest finds fixtures by name)
    fixture_client,
    fixture_engine,
    fixture_make_client,
)
from tests.support.postgres import (  # noqa: F401  (pytest finds fixtures by name)
    fixture_cloud_db_url,
    fixture_cloud_template,
    fixture_postgres_cluster,
    fixture_postgres_url,
)

LEGACY_TOKEN = "dashboard-legacy-token-0123456789abcdef"
ADMIN_TOKEN = "dashboard-admin-token-0123456789abcdef"
JWT_SECRET = "dashboard-jwt-secret-for-tests-0123456789abcdefgh"
CSRF_COOKIE = "engram_dashboard_csrf"
SESSION_COOKIE = "engram_dashboard_token"


@pytest.fixture(autouse=True)
def utc_display(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages show times in UTC unless a test sets ENGRAM_TIMEZONE itself."""
    monkeypatch.delenv("ENGRAM_TIMEZONE", raising=False)


@pytest.fixture
def settings(cloud_db_url: str) -> Settings:
    return Settings(
        database_url=cloud_db_url,
        allowed_projects=parse_allowlist("*"),
        token=LEGACY_TOKEN,
        admin_token=ADMIN_TOKEN,
        jwt_secret=JWT_SECRET,
        pool_size=3,
    )


def csrf_token(client: TestClient) -> str:
    """The CSRF token of the client's cookie jar (fetching the login page sets it)."""
    token = client.cookies.get(CSRF_COOKIE)
    if token is None:
        client.get("/dashboard/login")
        token = client.cookies.get(CSRF_COOKIE)
    assert token, "the dashboard did not set its CSRF cookie"
    return token


def post_form(
    client: TestClient, path: str, data: dict[str, str] | None = None, **kw: Any
) -> httpx.Response:
    """POST a dashboard form the way a browser does: urlencoded, with the CSRF field."""
    body = {"_csrf_token": csrf_token(client), **(data or {})}
    return client.post(path, data=body, follow_redirects=False, **kw)


def login(client: TestClient, token: str, next_target: str | None = None) -> httpx.Response:
    data = {"token": token}
    if next_target is not None:
        data["next"] = next_target
    return post_form(client, "/dashboard/login", data)


@pytest.fixture
def logged_in(make_client: Callable[..., TestClient]) -> Callable[[str], TestClient]:
    """``logged_in(token)`` → a new client with a session for ``token``."""

    def make(token: str) -> TestClient:
        client = make_client()
        answer = login(client, token)
        assert answer.status_code == 303, answer.text
        return client

    return make


@pytest.fixture
def admin(logged_in: Callable[[str], TestClient]) -> TestClient:
    return logged_in(ADMIN_TOKEN)


@pytest.fixture
def make_user(engine: Engine, settings: Settings) -> Callable[..., str]:
    """``make_user(name, projects=[...], role="member")`` → a raw managed token."""

    def make(name: str, projects: Sequence[str] = (), role: str = "member") -> str:
        with engine.begin() as conn:
            create_principal(conn, CLI_ACTOR, name, role=role, display_name=name.title())
            for project in projects:
                grant(conn, CLI_ACTOR, name, project)
            raw, _ = issue_token(conn, CLI_ACTOR, settings.token_pepper, name)
        return raw

    return make


@pytest.fixture
def seed(engine: Engine) -> Callable[..., None]:
    """``seed(records, contributor="alice")``: store records through the server's push path
    (mutation log + read model), as a client's push would."""

    def push(records: Sequence[dict[str, Any]], contributor: str = "alice") -> None:
        candidates, rejected = sync_log.prepare(list(records))
        assert not rejected, rejected
        with engine.begin() as conn:
            sync_log.push(conn, candidates, contributor=contributor)

    return push


def is_fragment(html: str) -> bool:
    return "<html" not in html and "<!doctype" not in html.lower()


def links(html: str, pattern: str = r"/dashboard/[^\"']*") -> list[str]:
    """Every href in ``html`` matching ``pattern`` (HTML entities of & decoded)."""
    return [
        href.replace("&amp;", "&")
        for href in re.findall(r'href="([^"]*)"', html)
        if re.fullmatch(pattern, href.replace("&amp;", "&"))
    ]
