"""The admin pages: pausing and resuming a project (and seeing the refused pushes in the audit
log, filtered), managed users, tokens shown once, revocation and grants — with their bad-input
cases."""

from __future__ import annotations

import re
from collections.abc import Callable

from litestar.testing import TestClient
from sqlalchemy import Engine, text

from tests.cloud import records as rec
from tests.support.dashboard import LEGACY_TOKEN, SESSION_COOKIE, login, post_form


def _push(client: TestClient, project: str = "acme", created_by: str = "alice") -> int:
    records = [rec.session("s-1", project=project), rec.observation(project=project)]
    return client.post(
        "/sync/mutations/push",
        json=rec.push_body(records, created_by=created_by),
        headers={"Authorization": f"Bearer {LEGACY_TOKEN}"},
    ).status_code


def _control(engine: Engine, project: str) -> tuple[bool, str | None, str | None] | None:
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT sync_enabled, paused_reason, updated_by FROM cloud_project_controls WHERE project = :p"
            ),
            {"p": project},
        ).first()
    return None if row is None else (row[0], row[1], row[2])


def test_pause_then_see_refused_pushes_then_resume(admin: TestClient, engine: Engine) -> None:
    assert _push(admin) == 200
    paused = post_form(
        admin,
        "/dashboard/admin/projects/ACME/sync",
        {"enabled": "false", "reason": "  db migration  "},
    )
    assert paused.status_code == 303
    assert paused.headers["location"] == "/dashboard/admin/projects?done=paused"
    assert _control(engine, "acme") == (False, "db migration", "admin")
    page = admin.get("/dashboard/admin/projects?done=paused").text
    assert "Sync paused" in page and "db migration" in page
    assert 'data-testid="paused-badge"' in admin.get("/dashboard/projects/acme").text

    assert _push(admin, created_by="carol") == 409
    assert _push(admin, created_by="dave") == 409
    assert _push(admin, project="widgets") == 200  # other projects still sync

    log = admin.get("/dashboard/admin/audit-log/list?outcome=rejected_project_paused").text
    rows = re.findall(r'<tr data-testid="audit-row" data-outcome="([^"]+)">(.*?)</tr>', log, re.S)
    assert len(rows) == 2 and all(o == "rejected_project_paused" for o, _ in rows)
    assert "dave" in rows[0][1] and "carol" in rows[1][1]  # newest first
    assert "sync-paused" in rows[0][1]
    assert "carol" in admin.get("/dashboard/admin").text  # the overview lists recent refusals

    resumed = post_form(
        admin, "/dashboard/admin/projects/acme/sync", {"enabled": "true", "reason": "ignored"}
    )
    assert resumed.headers["location"] == "/dashboard/admin/projects?done=resumed"
    assert _control(engine, "acme") == (True, None, "admin")
    assert _push(admin) == 200


def test_audit_log_filters(admin: TestClient, engine: Engine) -> None:
    _push(admin, created_by="alice")
    _push(admin, project="widgets", created_by="bob")
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE cloud_sync_audit_log SET occurred_at = '2026-01-15 12:00:00+00' WHERE contributor = 'bob'"
            )
        )

    def contributors(query: str) -> list[str]:
        html = admin.get(f"/dashboard/admin/audit-log/list?{query}").text
        return re.findall(r"<td>(alice|bob)</td>", html)

    assert contributors("") == ["alice", "bob"]
    assert contributors("contributor=bob") == ["bob"]
    assert contributors("project=widgets") == ["bob"]
    assert contributors("project=WIDGETS") == ["bob"]  # names are normalized
    assert contributors("outcome=accepted") == ["alice", "bob"]
    assert contributors("outcome=rejected_forbidden") == []
    assert contributors("from=2026-01-15&to=2026-01-15") == ["bob"]
    assert contributors("from=2026-01-16") == ["alice"]
    assert contributors("to=2026-01-14") == []
    assert contributors("from=2026-01-15T12:00:00Z&to=2026-01-15T12:00:01Z") == ["bob"]
    for bad in ("from=yesterday", "to=2026-13-01", "from=15/01/2026"):
        page = admin.get(f"/dashboard/admin/audit-log?{bad}")
        assert page.status_code == 400 and "invalid_time_format" in page.text, bad
    # The shell forwards its filters to the list and keeps them in the form.
    shell = admin.get("/dashboard/admin/audit-log?contributor=bob&outcome=accepted").text
    assert 'name="contributor" value="bob"' in shell and 'value="accepted" selected' in shell


def test_pause_bad_input(admin: TestClient, engine: Engine) -> None:
    for data in ({"enabled": "maybe"}, {}, {"enabled": "false", "reason": "x" * 501}):
        answer = post_form(admin, "/dashboard/admin/projects/acme/sync", data)
        assert answer.status_code == 400, data
    assert (
        post_form(admin, "/dashboard/admin/projects/acme/other", {"enabled": "false"}).status_code
        == 404
    )
    assert (
        post_form(admin, "/dashboard/admin/projects/%20/sync", {"enabled": "false"}).status_code
        == 404
    )
    assert _control(engine, "acme") is None  # nothing written
    # Without the CSRF field, refused.
    assert (
        admin.post("/dashboard/admin/projects/acme/sync", data={"enabled": "false"}).status_code
        == 403
    )
    # htmx gets HX-Redirect instead of a 303.
    answer = post_form(
        admin,
        "/dashboard/admin/projects/org%2Frepo/sync",
        {"enabled": "false"},
        headers={"HX-Request": "true"},
    )
    assert (
        answer.status_code == 200
        and answer.headers["hx-redirect"] == "/dashboard/admin/projects?done=paused"
    )
    assert _control(engine, "org/repo") == (False, None, "admin")
    form = admin.get(
        "/dashboard/admin/projects/org%2Frepo/sync/form", headers={"HX-Request": "true"}
    ).text
    assert 'action="/dashboard/admin/projects/org%2Frepo/sync"' in form and "Resume" in form


def test_users_tokens_and_grants(
    admin: TestClient,
    make_client: Callable[..., TestClient],
    seed: Callable[..., None],
    engine: Engine,
) -> None:
    seed(
        [
            rec.session("s-1", project="acme"),
            rec.observation("o-1", project="acme", title="Acme memory"),
        ]
    )
    created = post_form(
        admin,
        "/dashboard/admin/users",
        {
            "username": "carol",
            "display_name": "Carol C",
            "email": "c@example.com",
            "role": "member",
            "kind": "human",
        },
    )
    assert created.status_code == 303
    user_url = created.headers["location"].split("?")[0]
    assert re.fullmatch(r"/dashboard/admin/users/\d+", user_url)
    assert "User created" in admin.get(created.headers["location"]).text

    # Bad input: the form comes back with the error and what was typed.
    duplicate = post_form(
        admin, "/dashboard/admin/users", {"username": "carol", "display_name": "Other"}
    )
    assert duplicate.status_code == 409 and "already exists" in duplicate.text
    assert 'name="display_name" maxlength="200" value="Other"' in duplicate.text
    invalid = post_form(admin, "/dashboard/admin/users", {"username": "bad name!"})
    assert invalid.status_code == 400 and "username must be" in invalid.text
    bad_role = post_form(admin, "/dashboard/admin/users", {"username": "dan", "role": "god"})
    assert bad_role.status_code == 400 and "role must be" in bad_role.text

    # A token, shown on the answer of its creation only.
    issued = post_form(admin, f"{user_url}/tokens", {"name": "laptop"})
    assert issued.status_code == 200
    raw = re.search(r'data-testid="raw-token">(egt_[A-Za-z0-9_-]+)<', issued.text).group(1)
    assert issued.headers["cache-control"] == "no-store"
    later = admin.get(user_url).text
    assert raw not in later and raw[:12] in later and "laptop" in later

    carol = make_client()
    assert login(carol, raw).status_code == 303
    assert "No memories yet" in carol.get("/dashboard/browser").text  # no grant yet
    granted = post_form(admin, f"{user_url}/grants", {"project": "ACME"})
    assert granted.status_code == 303 and "done=granted" in granted.headers["location"]
    assert "Acme memory" in carol.get("/dashboard/browser").text
    assert post_form(admin, f"{user_url}/grants", {"project": "  "}).status_code == 400
    removed = post_form(admin, f"{user_url}/grants/acme/revoke")
    assert removed.status_code == 303
    assert "Acme memory" not in carol.get("/dashboard/browser").text
    assert post_form(admin, f"{user_url}/grants/acme/revoke").status_code == 404

    disabled = post_form(admin, f"{user_url}/disable")
    assert disabled.status_code == 303
    assert carol.get("/dashboard/", follow_redirects=False).status_code == 303
    post_form(admin, f"{user_url}/enable")
    assert login(carol, raw).status_code == 303

    with engine.connect() as conn:
        token_id = conn.execute(text("SELECT id FROM cloud_principal_tokens")).scalar_one()
    revoked = post_form(
        admin, f"/dashboard/admin/tokens/{token_id}/revoke", {"reason": "lost laptop"}
    )
    assert revoked.status_code == 303 and revoked.headers["location"] == f"{user_url}?done=revoked"
    assert carol.get("/dashboard/", follow_redirects=False).status_code == 303
    assert "revoked" in admin.get(user_url).text
    assert post_form(admin, "/dashboard/admin/tokens/999/revoke").status_code == 404
    assert post_form(admin, "/dashboard/admin/users/999/tokens").status_code == 404
    assert post_form(admin, "/dashboard/admin/users/999/disable").status_code == 404
    assert SESSION_COOKIE in admin.cookies


def test_every_form_needs_its_csrf_token(
    admin: TestClient, engine: Engine, make_user: Callable[..., str]
) -> None:
    make_user("erin", ["acme"])
    with engine.connect() as conn:
        user_id = conn.execute(text("SELECT id FROM cloud_principals")).scalar_one()
        token_id = conn.execute(text("SELECT id FROM cloud_principal_tokens")).scalar_one()
    forms = [
        ("/dashboard/admin/projects/acme/sync", {"enabled": "false"}),
        ("/dashboard/admin/users", {"username": "frank"}),
        (f"/dashboard/admin/users/{user_id}/disable", {}),
        (f"/dashboard/admin/users/{user_id}/enable", {}),
        (f"/dashboard/admin/users/{user_id}/tokens", {"name": "x"}),
        (f"/dashboard/admin/tokens/{token_id}/revoke", {}),
        (f"/dashboard/admin/users/{user_id}/grants", {"project": "widgets"}),
        (f"/dashboard/admin/users/{user_id}/grants/acme/revoke", {}),
        ("/dashboard/logout", {}),
        ("/dashboard/login", {"token": LEGACY_TOKEN}),
    ]
    for path, data in forms:
        for extra in ({}, {"_csrf_token": "f" * 128}):
            answer = admin.post(path, data={**data, **extra}, follow_redirects=False)
            assert answer.status_code == 403 and "CSRF check failed" in answer.text, path
    with engine.connect() as conn:
        state = conn.execute(
            text(
                "SELECT (SELECT count(*) FROM cloud_project_controls), (SELECT count(*) FROM cloud_principals),"
                " (SELECT count(*) FROM cloud_principal_tokens), (SELECT count(*) FROM cloud_project_grants),"
                " (SELECT enabled FROM cloud_principals), (SELECT revoked_at IS NULL FROM cloud_principal_tokens)"
            )
        ).one()
    assert tuple(state) == (0, 1, 1, 1, True, True)  # nothing changed
    assert admin.get("/dashboard/").status_code == 200  # still logged in


def test_audit_log_pager_counts_every_row(admin: TestClient) -> None:
    """Issue 17 item 4: eleven rows and no filter read "1–11 of 11", not "1–11 of 1" (the
    unfiltered count had no FROM and counted one row)."""
    for n in range(11):
        _push(admin, created_by=f"user{n}")

    def pager(query: str) -> list[str]:
        html = admin.get(f"/dashboard/admin/audit-log/list?{query}").text
        return [" ".join(p.split()) for p in re.findall(r"(\d+–\d+ of \d+)", html)]

    assert pager("") == ["1–11 of 11", "1–11 of 11"]
    assert pager("contributor=user3") == ["1–1 of 1", "1–1 of 1"]
    assert pager("pageSize=10&page=2")[0] == "11–11 of 11"
