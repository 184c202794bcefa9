"""The dashboard in a real browser: headless Chromium (Debian's, through Playwright with
``executable_path``; nothing downloaded) against a real ``engram cloud serve`` process on a real
PostgreSQL database, fed by real pushes of memories saved in a real local store.

The flows of the issue's "done when": a new member logs in with their token, finds a teammate's
memory by searching, pages through results and opens details, then logs out; an admin pauses a
project and sees the refused push in the audit log. Screenshots of the main pages are kept under
``test-artifacts/dashboard/`` (gitignored).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import sync_playwright
from sqlalchemy import Engine

from engram.store import Store
from engram_cloud.db import create_db_engine
from engram_cloud.principals import CLI_ACTOR, create_principal, grant, issue_token
from engram_cloud.settings import derive_pepper
from tests.cloud import records as rec
from tests.support import REPO, engram_env, free_port, stop_process, wait_for_port
from tests.support.dashboard import ADMIN_TOKEN, JWT_SECRET, LEGACY_TOKEN
from tests.support.postgres import PostgresCluster

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = REPO / "test-artifacts" / "dashboard"
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def database(postgres_cluster: PostgresCluster, cloud_template: str) -> Iterator[str]:
    """One migrated database for this module's server (each test uses its own names)."""
    name = postgres_cluster.create_database(template=cloud_template)
    yield postgres_cluster.url(name)
    postgres_cluster.drop_database(name)


@pytest.fixture(scope="module")
def engine(database: str) -> Iterator[Engine]:
    db = create_db_engine(database, pool_size=2)
    yield db
    db.dispose()


@pytest.fixture(scope="module")
def server(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``engram cloud serve`` process on a free port, shared by the module's tests."""
    port = free_port()
    env = engram_env(
        tmp_path_factory.mktemp("server-data"),
        {
            "ENGRAM_DATABASE_URL": database,
            "ENGRAM_JWT_SECRET": JWT_SECRET,
            "ENGRAM_CLOUD_TOKEN": LEGACY_TOKEN,
            "ENGRAM_CLOUD_ADMIN": ADMIN_TOKEN,
            "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*",
        },
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engram",
            "cloud",
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def make_user(engine: Engine, name: str, projects: list[str], role: str = "member") -> str:
    """A managed user with grants; returns their raw token."""
    pepper = derive_pepper(JWT_SECRET)
    with engine.begin() as conn:
        create_principal(conn, CLI_ACTOR, name, role=role, display_name=name.title())
        for project in projects:
            grant(conn, CLI_ACTOR, name, project)
        raw, _ = issue_token(conn, CLI_ACTOR, pepper, name)
    return raw


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run .ci/run (it installs Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def new_page(chromium: Any) -> Iterator[Callable[[], Any]]:
    """``new_page()`` → a page in a fresh browser context (its own cookies). Console errors
    (a Content-Security-Policy violation, a script error) fail the test."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make() -> Any:
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        return page

    yield make
    for context in contexts:
        context.close()
    # A 4xx page the test opened on purpose is reported by Chromium as a failed resource load.
    real = [e for e in errors if "Failed to load resource" not in e]
    assert not real, real


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def push(base: str, token: str, records: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(
        f"{base}/sync/mutations/push",
        json=rec.push_body(records, created_by="ignored-for-managed"),
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def teammate_memories(store: Store) -> list[dict[str, Any]]:
    """What Bob's agent saved on his machine: one memory worth finding, 60 others, a prompt."""
    store.create_session("bob-s1", "acme", "/home/bob/acme")
    store.add_observation(
        title="Login timeouts came from an exhausted connection pool",
        content=(
            "**What**: raised the database pool from 5 to 20 connections\n"
            "**Why**: login requests queued behind slow report queries and timed out\n"
            "**Where**: cloud/db.py, settings POOL_SIZE\n"
            "**Learned**: watch pool exhaustion before blaming the network"
        ),
        type="bugfix",
        project="acme",
        session_id="bob-s1",
    )
    for n in range(60):
        store.add_observation(
            title=f"Deploy note {n}",
            content=f"**What**: rolled out release {n}\n**Why**: routine deploy number {n}",
            type="decision" if n % 2 else "discovery",
            project="acme",
            session_id="bob-s1",
        )
    store.add_prompt("why do logins time out?", session_id="bob-s1", project="acme")
    return rec.store_records(store)


def log_in(page: Any, base: str, token: str) -> None:
    page.goto(f"{base}/dashboard/")
    page.wait_for_url(re.compile(r"/dashboard/login"))
    page.fill("#token", token)
    page.click("button[type=submit]")


def test_member_finds_a_teammates_memory(
    server: str, engine: Engine, new_page: Callable[[], Any], make_store: Callable[..., Store]
) -> None:
    bob = make_user(engine, "bob", ["acme"])
    alice = make_user(engine, "alice", ["acme"])
    answer = push(server, bob, teammate_memories(make_store("bob")))
    assert answer.status_code == 200 and not answer.json()["rejected"], answer.text

    page = new_page()
    page.goto(f"{server}/dashboard/browser")
    page.wait_for_url(re.compile(r"/dashboard/login\?next="))
    shot(page, "01-login")
    page.fill("#token", "egt_not-a-real-token")
    page.click("button[type=submit]")
    assert "invalid token" in page.inner_text("[data-testid=login-error]")
    page.fill("#token", alice)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/dashboard/browser$"))  # back where she started

    # Browse: 62 memories, 25 per page; pages move with htmx and the URL follows.
    assert page.inner_text("[data-testid=count]").startswith("1–25 of 61")
    shot(page, "02-browser")
    page.click(".pager a.next >> nth=0")
    page.wait_for_url(re.compile(r"page=2"))
    page.wait_for_function(
        "document.querySelector('[data-testid=count]').innerText.startsWith('26–50')"
    )
    shot(page, "03-browser-page-2")

    # Search with PostgreSQL's full-text search: stemmed words, not substrings.
    page.fill("input[name=q]", "exhausting pools")
    page.press("input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"q=exhausting(\+|%20)pools"))
    page.wait_for_selector("text=Login timeouts came from an exhausted connection pool")
    assert page.inner_text("[data-testid=count]").startswith("1–1 of 1")
    shot(page, "04-search")
    page.click("text=Login timeouts came from an exhausted connection pool")
    page.wait_for_url(re.compile(r"/dashboard/observations/acme/bob-s1/"))
    content = page.inner_text("[data-testid=observation-content]")
    for label in ("WHAT", "WHY", "WHERE", "LEARNED"):
        assert label in content.upper()
    assert "watch pool exhaustion" in content
    assert page.inner_text(".facts").count("Bob") == 1  # the contributor, named by the server
    shot(page, "05-observation")

    # The session, the project (counts), the contributor.
    page.click(".crumbs >> text=session")
    page.wait_for_url(re.compile(r"/dashboard/sessions/acme/bob-s1$"))
    shot(page, "06-session")
    page.click("nav.tabs >> text=Projects")
    page.wait_for_selector("[data-testid=project-row]")
    shot(page, "07-projects")
    page.click("[data-testid=project-row] >> text=acme")
    page.wait_for_url(re.compile(r"/dashboard/projects/acme$"))
    assert "61" in page.inner_text(".cards")
    page.click("nav.tabs >> text=Contributors")
    page.wait_for_selector("[data-testid=contributor-row] >> text=Bob")
    page.click("nav.tabs >> text=Stats")
    shot(page, "08-stats")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.goto(f"{server}/dashboard/browser?q=pool")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing overflows
    shot(page, "09-search-on-a-phone")
    page.set_viewport_size({"width": 1280, "height": 900})
    # A member has no admin tab, and the admin pages refuse her.
    assert page.locator("nav.tabs >> text=Admin").count() == 0
    page.goto(f"{server}/dashboard/admin")
    assert page.inner_text("[data-testid=error]").startswith("403")

    page.goto(f"{server}/dashboard/")
    page.click("[data-testid=logout]")
    page.wait_for_url(re.compile(r"/dashboard/login$"))
    page.goto(f"{server}/dashboard/browser")
    page.wait_for_url(re.compile(r"/dashboard/login\?next="))


def test_admin_pauses_a_project_and_sees_the_refused_push(
    server: str, engine: Engine, new_page: Callable[[], Any], make_store: Callable[..., Store]
) -> None:
    bob = make_user(engine, "bob2", ["beta"])
    store = make_store("bob2")
    store.create_session("bob-s1", "beta", "/home/bob/beta")
    store.add_observation(
        title="First", content="before the pause", project="beta", session_id="bob-s1"
    )
    assert push(server, bob, rec.store_records(store)).status_code == 200

    page = new_page()
    log_in(page, server, ADMIN_TOKEN)
    page.wait_for_url(re.compile(r"/dashboard/$"))
    page.click("nav.tabs >> text=Admin")
    page.wait_for_url(re.compile(r"/dashboard/admin$"))
    shot(page, "10-admin")
    page.click("nav.subtabs >> text=Project sync")
    row = page.locator("[data-testid=control-row][data-project=beta]")
    row.locator("input[name=reason]").fill("migrating the database")
    row.locator("button:has-text('Pause')").click()
    page.wait_for_selector("[data-testid=notice]")
    assert "Paused" in page.locator("[data-testid=control-row][data-project=beta]").inner_text()
    shot(page, "11-admin-paused")

    # Bob's machine pushes while the project is paused: refused, and logged.
    store.add_observation(
        title="Second", content="during the pause", project="beta", session_id="bob-s1"
    )
    refused = push(server, bob, rec.store_records(store)[-1:])
    assert refused.status_code == 409 and refused.json()["error_code"] == "sync-paused"

    page.click("nav.subtabs >> text=Audit log")
    page.select_option("select[name=outcome]", "rejected_project_paused")
    page.click("[data-testid=audit-filters] button[type=submit]")
    page.wait_for_url(re.compile(r"outcome=rejected_project_paused"))
    rows = page.locator("[data-testid=audit-row]")
    rows.first.wait_for()
    assert rows.count() == 1
    assert "Bob2" in rows.first.inner_text() and "beta" in rows.first.inner_text()
    shot(page, "12-audit-log")

    page.goto(f"{server}/dashboard/projects/beta")
    assert page.inner_text("[data-testid=paused-badge]") == "Paused"
    assert "migrating the database" in page.inner_text(".alert")

    # Resume, and the next push goes through.
    page.goto(f"{server}/dashboard/admin/projects")
    page.locator("[data-testid=control-row][data-project=beta] button:has-text('Resume')").click()
    page.wait_for_selector("[data-testid=notice]")
    assert push(server, bob, rec.store_records(store)[-1:]).status_code == 200

    # Users: create one, issue a token (shown once), grant a project.
    page.click("nav.subtabs >> text=Users")
    page.fill("[data-testid=new-user] input[name=username]", "carol")
    page.fill("[data-testid=new-user] input[name=display_name]", "Carol")
    page.click("[data-testid=new-user] button[type=submit]")
    page.wait_for_url(re.compile(r"/dashboard/admin/users/\d+\?done=created"))
    page.fill("[data-testid=grant-form] input[name=project]", "beta")
    page.click("[data-testid=grant-form] button")
    page.wait_for_selector("[data-testid=grant] >> text=beta")
    page.click("[data-testid=new-token-form] button")
    raw = page.inner_text("[data-testid=raw-token]").strip()
    assert raw.startswith("egt_")
    shot(page, "13-admin-user-token")
    page.click("[data-testid=logout]")
    page.wait_for_url(re.compile(r"/dashboard/login$"))

    carol = new_page()
    log_in(carol, server, raw)
    carol.wait_for_url(re.compile(r"/dashboard/$"))
    assert "Welcome, Carol" in carol.inner_text("h1")


def test_hostile_memory_content_is_shown_as_text(
    server: str, engine: Engine, new_page: Callable[[], Any], make_store: Callable[..., Store]
) -> None:
    mallory = make_user(engine, "mallory", ["gamma"])
    store = make_store("mallory")
    store.create_session("s-x", "gamma", "/src")
    hostile = (
        '**What**: <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">\n'
        "**Why**: {{ 7*7 }} {% if true %}jinja{% endif %} ${7*7}"
    )
    store.add_observation(
        title="<b>bold</b> <script>window.__pwned=3</script>",
        content=hostile,
        project="gamma",
        session_id="s-x",
    )
    assert push(server, mallory, rec.store_records(store)).status_code == 200

    page = new_page()
    log_in(page, server, LEGACY_TOKEN)
    page.wait_for_url(re.compile(r"/dashboard/$"))
    page.goto(f"{server}/dashboard/browser?project=gamma")
    page.click("[data-testid=observation] a.title")
    page.wait_for_url(re.compile(r"/dashboard/observations/"))
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0 and page.locator("main b").count() == 0
    text = page.inner_text("[data-testid=observation-content]")
    assert '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">' in text
    assert "{{ 7*7 }} {% if true %}jinja{% endif %} ${7*7}" in text
    assert page.inner_text("h1").endswith("<b>bold</b> <script>window.__pwned=3</script>")
    shot(page, "20-hostile-content")


def test_forged_forwarded_headers_neither_dodge_nor_aim_the_login_limit(
    server: str, engine: Engine, new_page: Callable[[], Any]
) -> None:
    """An attacker in a real browser rotates ``X-Forwarded-For`` on every wrong login (to dodge
    the per-address limit) and names a victim's address (to lock the victim out). No proxy is
    configured, so the header is nobody's word: the attacker's own address is limited, and a
    victim connecting from another address logs in. (This runs last in the module: it leaves
    127.0.0.1 locked out of logins on the module's server, and cleans up after itself.)"""
    from engram_cloud.dashboard.auth import MAX_FAILURES_PER_ADDRESS

    with engine.begin() as conn:  # an earlier test of the module logged in wrong once
        conn.exec_driver_sql("DELETE FROM cloud_login_attempts")
    page = new_page()
    try:
        page.goto(f"{server}/dashboard/login")
        seen = []
        # Every other guess names the victim: enough of them to lock the victim out if the
        # header were believed; the others rotate through addresses to dodge the limit.
        for attempt in range(2 * (MAX_FAILURES_PER_ADDRESS + 3)):
            page.context.set_extra_http_headers(
                {"X-Forwarded-For": "127.0.0.2" if attempt % 2 else f"192.0.2.{attempt}"}
            )
            page.fill("#token", f"egt_{attempt:04d}wrong-guess")  # a new prefix each time
            with page.expect_response(re.compile(r"/dashboard/login$")) as answer:
                page.click("button[type=submit]")
            seen.append(answer.value.status)
        assert seen[:MAX_FAILURES_PER_ADDRESS] == [401] * MAX_FAILURES_PER_ADDRESS
        assert set(seen[MAX_FAILURES_PER_ADDRESS:]) == {429}
        assert "Too many failed logins" in page.inner_text("[data-testid=login-error]")
        shot(page, "30-login-rate-limited")
        # Even the right token is refused from the attacker's address…
        page.fill("#token", LEGACY_TOKEN)
        with page.expect_response(re.compile(r"/dashboard/login$")) as answer:
            page.click("button[type=submit]")
        assert answer.value.status == 429
        # …while the address the forged header named is not locked out.
        victim = httpx.Client(
            base_url=server,
            transport=httpx.HTTPTransport(local_address="127.0.0.2"),
            timeout=30,
        )
        with victim:
            victim.get("/dashboard/login")
            logged_in = victim.post(
                "/dashboard/login",
                data={
                    "token": LEGACY_TOKEN,
                    "_csrf_token": victim.cookies["engram_dashboard_csrf"],
                },
                follow_redirects=False,
            )
        assert logged_in.status_code == 303, logged_in.text
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM cloud_login_attempts")
