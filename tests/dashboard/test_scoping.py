"""Every page and count shows only the projects the logged-in principal may see (grants for
managed users, the server allowlist for everyone); admin pages refuse members."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine

from engram_cloud.api.workers import record_heartbeat
from engram_cloud.auth import LEGACY_PRINCIPAL
from engram_cloud.principals import CLI_ACTOR, grant, revoke_grant
from tests.cloud import records as rec
from tests.support.dashboard import ADMIN_TOKEN, LEGACY_TOKEN, login, post_form


@pytest.fixture
def two_teams(seed: Callable[..., None], engine: Engine) -> None:
    seed(
        [
            rec.session("s-a", project="acme"),
            rec.observation(
                "o-a",
                project="acme",
                session_id="s-a",
                title="Acme pool fix",
                content="pool sizing",
            ),
            rec.prompt("p-a", project="acme", session_id="s-a", content="acme prompt"),
        ],
        contributor="alice",
    )
    seed(
        [
            rec.session("s-s", project="secret"),
            rec.observation(
                "o-s",
                project="secret",
                session_id="s-s",
                title="Secret pool plan",
                content="pool sizing in secret",
            ),
            rec.observation(
                "o-s2", project="secret", session_id="s-s", title="Secret two", content="more"
            ),
            rec.prompt("p-s", project="secret", session_id="s-s", content="secret prompt"),
        ],
        contributor="bob",
    )
    with engine.begin() as conn:
        for origin, host, projects in (
            ("1" * 16, "acme-laptop", ["acme", "secret"]),
            ("2" * 16, "secret-box", ["secret"]),
        ):
            record_heartbeat(
                conn,
                {
                    "origin": origin,
                    "hostname": host,
                    "version": "1",
                    "projects": projects,
                    "pending": 0,
                    "quarantined": 0,
                    "last_push_at": None,
                    "last_pull_at": None,
                },
                LEGACY_PRINCIPAL,
            )


def _main(html: str) -> str:
    return html.split("<main", 1)[1]


def test_a_member_sees_only_granted_projects(
    two_teams: None, make_user: Callable[..., str], logged_in: Callable[[str], TestClient]
) -> None:
    mia = logged_in(make_user("mia", ["acme"]))
    for path in (
        "/dashboard/",
        "/dashboard/browser",
        "/dashboard/browser?q=pool",
        "/dashboard/browser/sessions",
        "/dashboard/browser/prompts",
        "/dashboard/browser/prompts?q=prompt",
        "/dashboard/projects",
        "/dashboard/contributors",
        "/dashboard/activity",
        "/dashboard/activity?q=pool",
        "/dashboard/stats",
        "/dashboard/machines",
        "/dashboard/contributors/alice",
    ):
        page = mia.get(path)
        assert page.status_code == 200, path
        main = _main(page.text)
        assert "secret" not in main.lower() and "Secret" not in main, path
        assert "bob" not in main, path
    assert "Acme pool fix" in mia.get("/dashboard/browser?q=pool").text
    assert "1–1 of 1" in mia.get("/dashboard/browser?q=pool").text
    stats = _main(mia.get("/dashboard/stats").text)
    figures = dict(
        (label, int(n)) for n, label in re.findall(r'metric-n">(\d+)</span><span>([a-z ]+)<', stats)
    )
    assert figures["projects"] == 1 and figures["memories"] == 1 and figures["contributors"] == 1
    assert figures["sessions"] == 1 and figures["prompts"] == 1
    machines = _main(mia.get("/dashboard/machines").text)
    assert "acme-laptop" in machines and "secret-box" not in machines


def test_a_member_cannot_open_other_projects(
    two_teams: None, make_user: Callable[..., str], logged_in: Callable[[str], TestClient]
) -> None:
    mia = logged_in(make_user("mia", ["acme"]))
    for path in (
        "/dashboard/projects/secret",
        "/dashboard/projects/secret/observations",
        "/dashboard/sessions/secret/s-s",
        "/dashboard/observations/secret/s-s/o-s",
        "/dashboard/prompts/secret/s-s/p-s",
        "/dashboard/browser?project=secret",
        "/dashboard/browser/sessions?project=secret",
        "/dashboard/activity?project=secret",
        "/dashboard/projects/does-not-exist",  # unknown or forbidden: no difference to see
    ):
        page = mia.get(path)
        assert page.status_code == 403, path
        assert "You do not have access to project" in page.text
    assert mia.get("/dashboard/contributors/bob").status_code == 404


def test_grants_apply_at_the_next_click(
    two_teams: None,
    make_user: Callable[..., str],
    logged_in: Callable[[str], TestClient],
    engine: Engine,
) -> None:
    nobody = logged_in(make_user("neo"))
    assert "No memories yet" in nobody.get("/dashboard/browser").text
    with engine.begin() as conn:
        grant(conn, CLI_ACTOR, "neo", "secret")
    assert "Secret pool plan" in nobody.get("/dashboard/browser").text
    with engine.begin() as conn:
        revoke_grant(conn, CLI_ACTOR, "neo", "secret")
        grant(conn, CLI_ACTOR, "neo", "*")
    page = nobody.get("/dashboard/projects").text
    assert "acme" in page and "secret" in page


def test_the_allowlist_bounds_everybody(
    two_teams: None, make_client: Callable[..., TestClient]
) -> None:
    client = make_client(allowed_projects=frozenset({"acme"}))
    login(client, ADMIN_TOKEN)
    assert "Secret" not in _main(client.get("/dashboard/browser").text)
    assert client.get("/dashboard/projects/secret").status_code == 403
    admin_controls = client.get("/dashboard/admin/projects").text
    assert 'data-project="acme"' in admin_controls and 'data-project="secret"' not in admin_controls


ADMIN_GETS = [
    "/dashboard/admin",
    "/dashboard/admin/health",
    "/dashboard/admin/projects",
    "/dashboard/admin/projects/acme/sync/form",
    "/dashboard/admin/audit-log",
    "/dashboard/admin/audit-log/list",
    "/dashboard/admin/users",
    "/dashboard/admin/users/list",
    "/dashboard/admin/users/1",
]
ADMIN_POSTS = [
    ("/dashboard/admin/projects/acme/sync", {"enabled": "false"}),
    ("/dashboard/admin/users", {"username": "evil"}),
    ("/dashboard/admin/users/1/disable", {}),
    ("/dashboard/admin/users/1/enable", {}),
    ("/dashboard/admin/users/1/tokens", {"name": "x"}),
    ("/dashboard/admin/tokens/1/revoke", {}),
    ("/dashboard/admin/users/1/grants", {"project": "secret"}),
    ("/dashboard/admin/users/1/grants/acme/revoke", {}),
]


@pytest.mark.parametrize("token", ["member", "legacy"])
def test_members_get_403_on_admin_pages(
    token: str,
    make_user: Callable[..., str],
    logged_in: Callable[[str], TestClient],
    engine: Engine,
) -> None:
    raw = make_user("mia", ["acme"]) if token == "member" else LEGACY_TOKEN
    client = logged_in(raw)
    for path in ADMIN_GETS:
        page = client.get(path)
        assert page.status_code == 403, path
        assert "This page is for admins" in page.text
    for path, data in ADMIN_POSTS:
        assert post_form(client, path, data).status_code == 403, path
    assert "Admin</a>" not in client.get("/dashboard/").text
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM cloud_project_controls").scalar_one() == 0
        users = conn.exec_driver_sql("SELECT count(*) FROM cloud_principals").scalar_one()
    assert users == (1 if token == "member" else 0)  # nobody was created


def test_a_managed_admin_may_administer(
    make_user: Callable[..., str], logged_in: Callable[[str], TestClient]
) -> None:
    root = logged_in(make_user("root", role="admin"))
    for path in ADMIN_GETS:
        assert root.get(path).status_code == 200, path
