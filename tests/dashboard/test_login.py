"""Logging in and out of the dashboard: the session cookie, CSRF on the forms, safe ``next``
redirects, expired/forged/stale sessions, the login rate limit (state in PostgreSQL) and
insecure mode."""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import quote

import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine, text

from engram_cloud.auth import LEGACY_PRINCIPAL
from engram_cloud.dashboard import auth as dashboard_auth
from engram_cloud.principals import CLI_ACTOR, revoke_token, set_enabled
from tests.support.dashboard import (
    ADMIN_TOKEN,
    JWT_SECRET,
    LEGACY_TOKEN,
    SESSION_COOKIE,
    csrf_token,
    login,
    post_form,
)

PROTECTED = [
    "/dashboard/",
    "/dashboard/stats",
    "/dashboard/activity",
    "/dashboard/browser",
    "/dashboard/browser/observations?q=x&page=2",
    "/dashboard/browser/sessions",
    "/dashboard/browser/sessions/s-1",
    "/dashboard/browser/prompts",
    "/dashboard/projects",
    "/dashboard/projects/list",
    "/dashboard/projects/acme",
    "/dashboard/projects/acme/sessions",
    "/dashboard/contributors",
    "/dashboard/contributors/list",
    "/dashboard/contributors/alice",
    "/dashboard/sessions/acme/s-1",
    "/dashboard/observations/acme/s-1/o-1",
    "/dashboard/prompts/acme/s-1/p-1",
    "/dashboard/machines",
    "/dashboard/admin",
    "/dashboard/admin/projects",
    "/dashboard/admin/audit-log",
    "/dashboard/admin/users",
]


@pytest.mark.parametrize("path", PROTECTED)
def test_a_protected_page_without_a_session_goes_to_login(client: TestClient, path: str) -> None:
    answer = client.get(path, follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/dashboard/login?next=" + quote(path, safe="") or (
        path == "/dashboard/" and answer.headers["location"] == "/dashboard/login"
    )
    # htmx gets a full-page redirect instead of a login form swapped into a fragment.
    fragment = client.get(path, headers={"HX-Request": "true"}, follow_redirects=False)
    assert fragment.status_code == 200
    assert fragment.headers["hx-redirect"].startswith("/dashboard/login")


def test_login_page_and_cookie(client: TestClient) -> None:
    page = client.get("/dashboard/login?next=/dashboard/browser")
    assert page.status_code == 200
    assert 'name="_csrf_token"' in page.text and 'value="/dashboard/browser"' in page.text
    assert 'type="password"' in page.text
    answer = login(client, LEGACY_TOKEN, "/dashboard/browser?q=pool")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/dashboard/browser?q=pool"
    cookie = next(
        c for c in answer.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE + "=")
    )
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "max-age", "samesite"} <= attributes
    assert "Path=/dashboard" in cookie and "Max-Age=28800" in cookie
    assert "SameSite=lax" in cookie or "SameSite=Lax" in cookie
    assert "secure" not in attributes  # plain http here
    assert LEGACY_TOKEN not in cookie
    home = client.get("/dashboard/")
    assert home.status_code == 200 and "team token" in home.text
    # Already logged in: the login page sends you on.
    again = client.get("/dashboard/login?next=/dashboard/stats", follow_redirects=False)
    assert again.status_code == 303 and again.headers["location"] == "/dashboard/stats"


def test_cookie_is_secure_behind_an_https_proxy(client: TestClient) -> None:
    answer = post_form(
        client,
        "/dashboard/login",
        {"token": LEGACY_TOKEN},
        headers={"X-Forwarded-Proto": "https"},
    )
    assert "secure" in answer.headers["set-cookie"].lower()


def test_login_errors(client: TestClient) -> None:
    blank = login(client, "   ")
    assert blank.status_code == 400 and "token is required" in blank.text
    wrong = login(client, "not-the-token")
    assert wrong.status_code == 401 and "invalid token" in wrong.text
    spaced = login(client, "two words")
    assert spaced.status_code == 401
    huge = post_form(client, "/dashboard/login", {"token": "x" * 20_000})
    assert huge.status_code == 413 and "too large" in huge.text.lower()
    assert SESSION_COOKIE not in client.cookies


def test_login_without_csrf_is_refused(client: TestClient) -> None:
    client.get("/dashboard/login")
    answer = client.post("/dashboard/login", data={"token": LEGACY_TOKEN}, follow_redirects=False)
    assert answer.status_code == 403 and "CSRF" in answer.text
    forged = client.post(
        "/dashboard/login",
        data={"token": LEGACY_TOKEN, "_csrf_token": "0" * 128},
        follow_redirects=False,
    )
    assert forged.status_code == 403
    assert SESSION_COOKIE not in client.cookies


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example",
        "https://evil.example/dashboard/",
        "//evil.example",
        "//evil.example/dashboard",
        "/\\evil.example",
        "\\\\evil.example",
        "javascript:alert(1)",
        "/dashboard/../evil",
        "/dashboard/%2e%2e/evil",
        "/dashboardx",
        "/other",
        "/dashboard/login",
        "/dashboard/\tevil",
        "http:/dashboard/",
        "",
    ],
)
def test_next_only_ever_goes_inside_the_dashboard(client: TestClient, target: str) -> None:
    answer = login(client, LEGACY_TOKEN, target)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/dashboard/"


def test_next_inside_the_dashboard_is_kept(client: TestClient) -> None:
    target = "/dashboard/projects/org%2Frepo?tab=x"
    answer = login(client, LEGACY_TOKEN, target)
    assert answer.headers["location"] == target


def test_logout(client: TestClient) -> None:
    login(client, ADMIN_TOKEN)
    refused = client.post("/dashboard/logout", follow_redirects=False)
    assert refused.status_code == 403  # no CSRF token
    answer = post_form(client, "/dashboard/logout")
    assert answer.status_code == 303 and answer.headers["location"] == "/dashboard/login"
    assert SESSION_COOKIE not in client.cookies
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303


def _with_cookie(client: TestClient, value: str) -> TestClient:
    client.cookies.set(SESSION_COOKIE, value, domain="testserver.local", path="/dashboard")
    return client


@pytest.mark.parametrize(
    "mangle",
    [
        lambda v: v[:-2] + ("AA" if not v.endswith("AA") else "BB"),  # signature changed
        lambda v: "e30." + v.split(".")[1],  # other claims, old signature
        lambda v: v.split(".")[0],  # no signature
        lambda v: "garbage",
        lambda v: v + "." + v,
    ],
)
def test_a_forged_cookie_sends_to_login(client: TestClient, mangle: Callable[[str], str]) -> None:
    good = dashboard_auth.mint_session(JWT_SECRET, LEGACY_PRINCIPAL, LEGACY_TOKEN)
    answer = _with_cookie(client, mangle(good)).get("/dashboard/stats", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/dashboard/login?next=%2Fdashboard%2Fstats"
    assert f"{SESSION_COOKIE}=" in answer.headers["set-cookie"]  # the bad cookie is cleared


def test_a_cookie_signed_with_another_secret_is_refused(client: TestClient) -> None:
    other = dashboard_auth.mint_session("x" * 40, LEGACY_PRINCIPAL, LEGACY_TOKEN)
    assert _with_cookie(client, other).get("/dashboard/", follow_redirects=False).status_code == 303


def test_an_expired_cookie_sends_to_login(client: TestClient) -> None:
    long_ago = time.time() - dashboard_auth.SESSION_SECONDS - 5
    old = dashboard_auth.mint_session(JWT_SECRET, LEGACY_PRINCIPAL, LEGACY_TOKEN, now=long_ago)
    answer = _with_cookie(client, old).get("/dashboard/", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/dashboard/login"
    fresh = dashboard_auth.mint_session(JWT_SECRET, LEGACY_PRINCIPAL, LEGACY_TOKEN)
    assert _with_cookie(client, fresh).get("/dashboard/").status_code == 200
    future = dashboard_auth.mint_session(
        JWT_SECRET, LEGACY_PRINCIPAL, LEGACY_TOKEN, now=time.time() + 3600
    )
    assert (
        _with_cookie(client, future).get("/dashboard/", follow_redirects=False).status_code == 303
    )


def test_a_session_dies_with_its_token(
    make_client: Callable[..., TestClient],
    engine: Engine,
    make_user: Callable[..., str],
) -> None:
    # Legacy: the server's token changed since the login.
    first = make_client()
    login(first, LEGACY_TOKEN)
    session = first.cookies[SESSION_COOKIE]
    rotated = make_client(token="a-brand-new-shared-token-0123456789")
    answer = _with_cookie(rotated, session).get("/dashboard/", follow_redirects=False)
    assert answer.status_code == 303
    # Managed: revoked token, disabled user.
    raw = make_user("dana", ["acme"])
    client = make_client()
    assert login(client, raw).status_code == 303
    assert client.get("/dashboard/").status_code == 200
    with engine.begin() as conn:
        set_enabled(conn, CLI_ACTOR, "dana", False)
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303
    with engine.begin() as conn:
        set_enabled(conn, CLI_ACTOR, "dana", True)
    login(client, raw)
    assert client.get("/dashboard/").status_code == 200
    with engine.begin() as conn:
        token_id = conn.execute(text("SELECT id FROM cloud_principal_tokens")).scalar_one()
        revoke_token(conn, CLI_ACTOR, token_id)
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303
    assert login(client, raw).status_code == 401


def test_failed_logins_are_rate_limited_across_servers(
    make_client: Callable[..., TestClient], engine: Engine
) -> None:
    first = make_client()
    for _ in range(dashboard_auth.MAX_FAILURES_PER_TOKEN):
        assert login(first, LEGACY_TOKEN[:12] + "-wrong").status_code == 401
    blocked = login(first, LEGACY_TOKEN[:12] + "-wrong-again")
    assert blocked.status_code == 429
    assert "Too many failed logins" in blocked.text
    assert 1 <= int(blocked.headers["retry-after"]) <= 15 * 60
    # Even the right token (same prefix, same address) waits: guessing gains nothing.
    assert login(first, LEGACY_TOKEN).status_code == 429
    # A second server process shares the counters (they live in PostgreSQL).
    second = make_client()
    assert login(second, LEGACY_TOKEN).status_code == 429
    # Another token (other prefix) from the same address is not blocked yet…
    assert login(second, ADMIN_TOKEN).status_code == 303
    # …until the address itself has failed too often.
    for n in range(dashboard_auth.MAX_FAILURES_PER_ADDRESS):
        login(second, f"prefix-{n:04d}-wrong")
    assert login(second, ADMIN_TOKEN).status_code == 429
    # When the failures are older than the window, logins work again.
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE cloud_login_attempts SET attempted_at = attempted_at - interval '1 hour'")
        )
    assert login(make_client(), LEGACY_TOKEN).status_code == 303


def test_attempt_keys_never_store_the_token(engine: Engine, client: TestClient) -> None:
    login(client, "egt_SECRETPREFIX-and-the-rest")
    with engine.connect() as conn:
        keys = list(conn.execute(text("SELECT key FROM cloud_login_attempts")).scalars())
    assert len(keys) == 2 and not any("SECRET" in key for key in keys)


def test_insecure_mode_needs_no_login(make_client: Callable[..., TestClient]) -> None:
    client = make_client(insecure=True, token=None, admin_token=None, jwt_secret=None)
    assert client.get("/dashboard/").status_code == 200
    assert "Insecure mode" in client.get("/dashboard/").text
    assert client.get("/dashboard/admin").status_code == 200
    answer = client.get("/dashboard/login", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/dashboard/"
    # Forms still need their CSRF token.
    assert (
        client.post("/dashboard/admin/projects/acme/sync", data={"enabled": "false"}).status_code
        == 403
    )
    assert (
        post_form(client, "/dashboard/admin/projects/acme/sync", {"enabled": "false"}).status_code
        == 303
    )
    assert csrf_token(client)
