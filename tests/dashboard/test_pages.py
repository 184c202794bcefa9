"""Every dashboard page through litestar's test client: full pages and htmx fragments, empty
states, memory content shown as text whatever it holds, unknown ids, pagination (clamping, filters
kept in links), PostgreSQL full-text search, static files and security headers."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine, text

from engram_cloud.api.workers import record_heartbeat
from engram_cloud.dashboard.plugin import SECURITY_HEADERS
from engram_cloud.dashboard.queries import common as common_q
from engram_cloud.dashboard.queries import overview as overview_q
from engram_cloud.dashboard.render import STATIC_DIR
from tests.cloud import records as rec
from tests.support.dashboard import LEGACY_TOKEN, is_fragment, links
from tests.support.postgres import PostgresCluster

HX = {"HX-Request": "true"}


@pytest.fixture
def team(seed: Callable[..., None]) -> None:
    """Two projects, three people, structured memories, prompts."""
    seed(
        [
            rec.session("s-1", project="acme", directory="/src/acme"),
            rec.observation(
                "o-pool",
                project="acme",
                title="Login timeouts from the connection pool",
                content=(
                    "**What**: raised the pool size\n**Why**: logins queued\n"
                    "**Where**: cloud/db.py\n**Learned**: check pool exhaustion first"
                ),
                type="bugfix",
                topic_key="bug/login-timeout",
            ),
            rec.observation(
                "o-cache",
                project="acme",
                title="Cache decision",
                content="Use Redis",
                type="decision",
            ),
            rec.prompt("p-1", project="acme", content="why is login slow?"),
        ],
        contributor="alice",
    )
    seed(
        [
            rec.session("s-2", project="widgets", directory="/src/widgets"),
            rec.observation(
                "o-w",
                project="widgets",
                session_id="s-2",
                title="Widget colours",
                content="Blue wins",
                type="discovery",
            ),
        ],
        contributor="bob",
    )


PAGES = {
    "/dashboard/": "Welcome",
    "/dashboard/stats": "memories",
    "/dashboard/activity": "Login timeouts",
    "/dashboard/browser": "Login timeouts",
    "/dashboard/browser/observations?project=acme": "Cache decision",
    "/dashboard/browser/sessions": "s-1",
    "/dashboard/browser/sessions/s-2": "s-2",
    "/dashboard/browser/prompts": "why is login slow?",
    "/dashboard/projects": "widgets",
    "/dashboard/projects/list": "widgets",
    "/dashboard/projects/acme": "Newest memories",
    "/dashboard/projects/acme/observations": "Login timeouts",
    "/dashboard/projects/acme/sessions": "s-1",
    "/dashboard/projects/acme/prompts": "why is login slow?",
    "/dashboard/contributors": "alice",
    "/dashboard/contributors/list": "bob",
    "/dashboard/contributors/alice": "Login timeouts",
    "/dashboard/sessions/acme/s-1": "/src/acme",
    "/dashboard/observations/acme/s-1/o-pool": "check pool exhaustion first",
    "/dashboard/prompts/acme/s-1/p-1": "why is login slow?",
    "/dashboard/machines": "Machines",
    "/dashboard/admin": "Project sync",
    "/dashboard/admin/health": "schema is current",
    "/dashboard/admin/projects": "widgets",
    "/dashboard/admin/projects/acme/sync/form": "Pause",
    "/dashboard/admin/audit-log": "Sync audit log",
    "/dashboard/admin/audit-log/list": "No audit rows",
    "/dashboard/admin/users": "New user",
    "/dashboard/admin/users/list": "No managed users",
}

FRAGMENTS = [
    "/dashboard/activity",
    "/dashboard/browser",
    "/dashboard/browser/observations",
    "/dashboard/browser/sessions",
    "/dashboard/browser/prompts",
    "/dashboard/projects/list",
    "/dashboard/projects/acme/sessions",
    "/dashboard/contributors/list",
    "/dashboard/admin/projects",
    "/dashboard/admin/projects/acme/sync/form",
    "/dashboard/admin/audit-log/list",
    "/dashboard/admin/users/list",
]


def test_every_page_renders(team: None, admin: TestClient) -> None:
    for path, expected in PAGES.items():
        page = admin.get(path)
        assert page.status_code == 200, (path, page.text[:500])
        assert not is_fragment(page.text), path
        assert expected in page.text, path
        assert page.headers["cache-control"] == "no-store"
        assert "HX-Request" in page.headers["vary"]
        for name, value in SECURITY_HEADERS.items():
            assert page.headers[name] == value
        assert re.fullmatch(r"app;dur=\d+\.\d+", page.headers["server-timing"])


def test_htmx_requests_get_fragments(team: None, admin: TestClient) -> None:
    for path in FRAGMENTS:
        full = admin.get(path)
        part = admin.get(path, headers=HX)
        assert part.status_code == 200, path
        assert is_fragment(part.text) and not is_fragment(full.text), path
        assert len(part.text) < len(full.text)
    # htmx restoring history after a cache miss needs the whole page.
    restore = admin.get("/dashboard/browser", headers={**HX, "HX-History-Restore-Request": "true"})
    assert not is_fragment(restore.text)


def test_empty_states(admin: TestClient) -> None:
    for path, sentence in (
        ("/dashboard/", "No projects yet"),
        ("/dashboard/browser", "No memories yet"),
        ("/dashboard/browser?q=anything", "No memories match"),
        ("/dashboard/browser/sessions", "No sessions yet"),
        ("/dashboard/browser/prompts", "No prompts yet"),
        ("/dashboard/projects", "No projects yet"),
        ("/dashboard/contributors", "No contributors yet"),
        ("/dashboard/activity", "No memories have been pushed"),
        ("/dashboard/machines", "No machines yet"),
        ("/dashboard/admin/users", "No managed users yet"),
    ):
        page = admin.get(path)
        assert page.status_code == 200 and sentence in page.text, path
        assert 'data-testid="empty"' in page.text


def test_memory_content_is_shown_as_text(seed: Callable[..., None], admin: TestClient) -> None:
    hostile_title = "<script>alert('title')</script> {{ 7*7 }}"
    hostile = (
        "**What**: <script>alert(1)</script><img src=x onerror=alert(2)>\n"
        "**Why**: {{ 7*7 }} {% raw %}{{ config }}{% endraw %} ${7*7} <!-- comment -->\n"
        '**Where**: <a href="javascript:alert(3)">click</a>'
    )
    seed(
        [
            rec.session("s-<b>", project="acme"),
            rec.observation(
                "o-x",
                session_id="s-<b>",
                project="acme",
                title=hostile_title,
                content=hostile,
                type="<i>x</i>",
            ),
            rec.prompt(
                "p-x",
                session_id="s-<b>",
                project="acme",
                content="<script>alert('prompt')</script>",
            ),
        ],
        contributor="<svg onload=alert(4)>",
    )
    pages = [
        admin.get("/dashboard/browser").text,
        admin.get("/dashboard/browser?q=alert").text,
        admin.get("/dashboard/activity").text,
        admin.get("/dashboard/observations/acme/s-%3Cb%3E/o-x").text,
        admin.get("/dashboard/sessions/acme/s-%3Cb%3E").text,
        admin.get("/dashboard/prompts/acme/s-%3Cb%3E/p-x").text,
        admin.get("/dashboard/contributors").text,
        admin.get("/dashboard/stats").text,
        admin.get("/dashboard/browser/prompts").text,
    ]
    for html in pages:
        assert "<script>alert" not in html and "<img src=x" not in html
        # The stats page draws charts as <svg class="chart">: no other <svg> may appear.
        assert re.sub(r'<svg class="chart"', "", html).count("<svg") == 0
        assert "<i>x</i>" not in html and "<b>" not in html
        assert 'href="javascript' not in html
        main = html.split("<main", 1)[1]
        assert not re.search(r"\b49\b", main)  # {{ 7*7 }} was never evaluated
    detail = pages[3]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in detail
    assert "{{ 7*7 }} {% raw %}{{ config }}{% endraw %} ${7*7} &lt;!-- comment --&gt;" in detail
    assert "&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt; {{ 7*7 }}" in detail
    assert "&lt;svg onload=alert(4)&gt;" in detail


def test_content_blocks_and_times(team: None, admin: TestClient) -> None:
    page = admin.get("/dashboard/observations/acme/s-1/o-pool").text
    for label in ("what", "why", "where", "learned"):
        assert f'class="block block-{label}"' in page
    assert re.search(r"<h3>What</h3>\s*<div class=\"block-text\">raised the pool size</div>", page)
    # Relative and absolute, with the machine-readable time.
    assert '<time datetime="2026-11-21T10:00:00Z" title="21 Nov 2026 10:00 UTC">' in page
    assert '<span class="abs">21 Nov 2026 10:00 UTC</span>' in page
    # The list preview flattens the blocks.
    browser = admin.get("/dashboard/browser?project=acme").text
    assert "What: raised the pool size • Why: logins queued" in browser
    # Related: same session or same topic.
    assert "Cache decision" in page


def test_times_in_the_configured_zone(
    team: None,
    make_client: Callable[..., TestClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENGRAM_TIMEZONE", "Europe/Madrid")
    client = make_client(insecure=True, token=None, admin_token=None, jwt_secret=None)
    page = client.get("/dashboard/observations/acme/s-1/o-pool").text
    assert '<span class="abs">21 Nov 2026 11:00 CET</span>' in page
    assert 'datetime="2026-11-21T10:00:00Z"' in page  # the machine-readable time stays UTC
    monkeypatch.setenv("ENGRAM_TIMEZONE", "Mars/Olympus")  # unknown: logged, UTC used
    client = make_client(insecure=True, token=None, admin_token=None, jwt_secret=None)
    assert "21 Nov 2026 10:00 UTC" in client.get("/dashboard/observations/acme/s-1/o-pool").text


def test_unknown_ids_get_a_404_page(team: None, admin: TestClient) -> None:
    for path in (
        "/dashboard/observations/acme/s-1/nope",
        "/dashboard/observations/acme/other-session/o-pool",
        "/dashboard/observations/acme/s-1",
        "/dashboard/observations/acme/s-1/o-pool/extra",
        "/dashboard/prompts/acme/s-1/nope",
        "/dashboard/sessions/acme/nope",
        "/dashboard/sessions/acme/" + "x" * 200,
        "/dashboard/projects/nope",
        "/dashboard/projects/acme/nope",
        "/dashboard/contributors/nobody",
        "/dashboard/admin/users/999",
        "/dashboard/admin/users/nobody",
        "/dashboard/nope",
        "/dashboard/browser/nope",
    ):
        page = admin.get(path)
        assert page.status_code == 404, path
        assert 'data-testid="error"' in page.text and "Not found" in page.text, path
        assert not is_fragment(page.text)
        part = admin.get(path, headers=HX)
        assert part.status_code == 404 and is_fragment(part.text), path
    # Outside the dashboard the API keeps its JSON 404.
    assert admin.get("/nope").json()["error_code"] == "not_found"


def test_names_with_slashes_and_spaces_have_pages(
    seed: Callable[..., None], admin: TestClient
) -> None:
    seed(
        [
            rec.session("s 1/2", project="org/repo x"),
            rec.observation("o/1", session_id="s 1/2", project="org/repo x", title="Slashes"),
        ]
    )
    browser = admin.get("/dashboard/browser").text
    [href] = links(browser, r"/dashboard/observations/.*")
    assert href == "/dashboard/observations/org%2Frepo%20x/s%201%2F2/o%2F1"
    assert "Slashes" in admin.get(href).text
    assert admin.get("/dashboard/projects/org%2Frepo%20x").status_code == 200
    assert admin.get("/dashboard/sessions/org%2Frepo%20x/s%201%2F2").status_code == 200


def _many(seed: Callable[..., None], n: int, **kw: object) -> None:
    records = [rec.session("s-1", project="acme")]
    for i in range(n):
        records.append(
            rec.observation(
                f"o-{i:03d}",
                project="acme",
                title=f"Note {i:03d}",
                content=f"routine deploy number {i}",
                type="decision" if i % 2 else "discovery",
                created_at=f"2026-11-{1 + i // 24:02d} {i % 24:02d}:00:00",
                **kw,
            )
        )
    seed(records)


def _query(href: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(href).query)


def test_pagination(seed: Callable[..., None], admin: TestClient) -> None:
    _many(seed, 30)
    first = admin.get("/dashboard/browser/observations?pageSize=10").text
    assert "1–10 of 30" in first and first.count('data-testid="observation"') == 10
    assert "Note 029" in first  # newest first
    third = admin.get("/dashboard/browser/observations?pageSize=10&page=3").text
    assert "21–30 of 30" in third and "Note 000" in third
    # Out of range pages clamp; sizes clamp to 10..100.
    assert "21–30 of 30" in admin.get("/dashboard/browser/observations?pageSize=10&page=999").text
    assert "1–10 of 30" in admin.get("/dashboard/browser/observations?pageSize=10&page=-4").text
    assert "1–10 of 30" in admin.get("/dashboard/browser/observations?pageSize=3").text
    assert "1–30 of 30" in admin.get("/dashboard/browser/observations?pageSize=5000").text
    for bad in ("page=abc", "pageSize=ten", "page=1e9", "page=99999999999"):
        page = admin.get(f"/dashboard/browser/observations?{bad}")
        assert page.status_code == 400 and "must be a whole number" in page.text, bad
    # Links keep every filter.
    html = admin.get(
        "/dashboard/browser/observations?q=deploy&type=decision&project=acme&pageSize=10"
    ).text
    assert "1–10 of 15" in html
    pager = links(html, r"/dashboard/browser/observations\?(.*&)?page=\d+(&.*)?")
    assert pager
    for href in pager:
        query = _query(href)
        assert (
            query["q"] == ["deploy"]
            and query["type"] == ["decision"]
            and query["project"] == ["acme"]
        )
        assert query["pageSize"] == ["10"]
    assert 'hx-push-url="true"' in html and 'hx-target="#results"' in html


def test_page_strip(seed: Callable[..., None], admin: TestClient) -> None:
    _many(seed, 100)
    html = admin.get("/dashboard/browser/observations?pageSize=10&page=5").text
    strip = re.findall(r'<span class="current" aria-current="page">(\d+)</span>', html)
    assert strip[0] == "5"
    numbers = [
        int(_query(h)["page"][0])
        for h in links(html, r"/dashboard/browser/observations\?(.*&)?page=\d+(&.*)?")
    ]
    assert sorted(set(numbers)) == [1, 4, 6, 10]  # 1 … 4 [5] 6 … 10 (prev/next are 4 and 6)
    assert '<span class="gap">…</span>' in html


def test_search_is_postgres_full_text(team: None, admin: TestClient) -> None:
    def hits(q: str) -> str:
        return admin.get("/dashboard/browser/observations", params={"q": q}).text

    assert "Login timeouts from the connection pool" in hits("exhausted pools")  # stemming
    assert "0 results" not in hits("POOL")
    assert "No memories match" in hits("imeou")  # a substring is not a word (LIKE would match)
    assert "No memories match" in hits("pool -exhaustion")  # web-search syntax: exclusion
    assert "Login timeouts" in hits('"check pool"')
    for hostile in ("a & | ! ( :* '", "'; DROP TABLE cloud_observations; --", "%_%", "\\", "<>"):
        page = admin.get("/dashboard/browser/observations", params={"q": hostile})
        assert page.status_code == 200, hostile
    assert admin.get("/dashboard/browser", params={"q": "x" * 501}).status_code == 400
    # Prompts are searched the same way; sessions by id or words.
    assert "why is login slow?" in admin.get("/dashboard/browser/prompts?q=logins").text
    assert "s-2" in admin.get("/dashboard/browser/sessions?q=widgets").text
    assert "s-2" not in admin.get("/dashboard/browser/sessions?q=acme").text


def test_type_filter_and_pills(team: None, admin: TestClient) -> None:
    html = admin.get("/dashboard/browser").text
    for kind in ("bugfix", "decision", "discovery"):
        assert f'name="type" value="{kind}"' in html
    only = admin.get("/dashboard/browser?type=decision").text
    assert "Cache decision" in only and "Login timeouts" not in only
    assert 'value="decision" checked' in only


def test_projects_list_counts_and_pause_badge(
    team: None, admin: TestClient, engine: Engine
) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO cloud_project_controls (project, sync_enabled, paused_reason) VALUES ('widgets', false, 'audit')"
            )
        )
    html = admin.get("/dashboard/projects").text
    row = re.search(r'<a href="/dashboard/projects/widgets">widgets</a>.*?</tr>', html, re.S)
    assert row and "Paused" in row.group(0)
    acme = re.search(r'<a href="/dashboard/projects/acme">acme</a>(.*?)</tr>', html, re.S)
    assert acme
    assert [int(n) for n in re.findall(r'class="num">(\d+)<', acme.group(1))] == [2, 1, 1, 1]
    assert "Active" in acme.group(1)
    detail = admin.get("/dashboard/projects/widgets").text
    assert 'data-testid="paused-badge"' in detail and "audit" in detail
    assert "widgets" not in admin.get("/dashboard/projects?q=acm").text.split("<main")[1]


def test_machines_online_and_offline(admin: TestClient, engine: Engine) -> None:
    from engram_cloud.auth import LEGACY_PRINCIPAL

    with engine.begin() as conn:
        for origin, host in (("a" * 16, "laptop"), ("b" * 16, "old-box")):
            record_heartbeat(
                conn,
                {
                    "origin": origin,
                    "hostname": host,
                    "version": "0.1.0",
                    "projects": ["acme"],
                    "pending": 3,
                    "quarantined": 1,
                    "last_push_at": None,
                    "last_pull_at": None,
                },
                LEGACY_PRINCIPAL,
            )
        conn.execute(
            text(
                "UPDATE cloud_workers SET last_seen_at = now() - interval '2 hours' WHERE hostname = 'old-box'"
            )
        )
    html = admin.get("/dashboard/machines").text
    rows = re.findall(r'<tr data-testid="machine-row">(.*?)</tr>', html, re.S)
    assert len(rows) == 2
    assert "online" in rows[0] and "laptop" in rows[0]
    assert "offline" in rows[1] and "old-box" in rows[1] and "2 h ago" in rows[1]


def test_static_files(client: TestClient) -> None:
    script = client.get("/dashboard/static/htmx.min.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    recorded = (STATIC_DIR / "htmx.min.js.sha256").read_text().split()[0]
    assert hashlib.sha256(script.content).hexdigest() == recorded
    assert "2.0.11" in (STATIC_DIR / "htmx.VERSION").read_text()
    css = client.get("/dashboard/static/dashboard.css")
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]
    assert "max-age" in css.headers["cache-control"]
    assert client.get("/dashboard/static/../app.py").status_code == 404
    assert client.get("/dashboard/static/nope.js").status_code == 404


def test_public_routes(client: TestClient) -> None:
    assert client.get("/dashboard/health").json() == {"status": "ok", "subsystem": "dashboard"}
    root = client.get("/", follow_redirects=False)
    assert root.status_code == 302 and root.headers["location"] == "/dashboard/"
    # The bearer API is not behind the dashboard's CSRF check.
    assert (
        client.get(
            "/api/v1/whoami", headers={"Authorization": f"Bearer {LEGACY_TOKEN}"}
        ).status_code
        == 200
    )


def test_no_inline_script_or_style(team: None, admin: TestClient) -> None:
    """The Content-Security-Policy forbids inline code: no page may rely on it."""
    for path in PAGES:
        html = admin.get(path).text
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), path
        assert "<style" not in html and " style=" not in html, path
        assert not re.search(r"\son[a-z]+=", html), path


def test_database_down_and_unexpected_errors_get_pages(
    admin: TestClient, postgres_cluster: PostgresCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    postgres_cluster.stop()
    try:
        page = admin.get("/dashboard/stats")
    finally:
        postgres_cluster.start()
    assert page.status_code == 503 and "Database unavailable" in page.text
    assert page.headers["retry-after"] == "5"
    assert admin.get("/dashboard/stats").status_code == 200  # back once the database is

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(overview_q, "stats", broken)  # a bug cannot be produced any other way
    page = admin.get("/dashboard/stats")
    assert page.status_code == 500 and "Something went wrong" in page.text
    assert "a bug" not in page.text  # internals stay in the log


def test_counts_stop_at_the_cap(
    seed: Callable[..., None], admin: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _many(seed, 30)
    monkeypatch.setattr(
        common_q, "COUNT_CAP", 20
    )  # the real cap is 5,000: too many rows for a test
    monkeypatch.setattr(common_q, "SEARCH_WINDOW", 5)
    html = admin.get("/dashboard/browser/observations?pageSize=10&page=99").text
    assert "11–20 of 20+" in html and "Note 010" in html  # clamped to the last counted page
    assert "Showing the first 20; narrow the list" in html
    search = admin.get("/dashboard/browser/observations?q=routine+deploy").text
    assert "1–5 of 5+" in search
    assert search.count('data-testid="observation"') == 5


def test_a_memory_page_shows_its_earlier_versions(
    seed: Callable[..., None], admin: TestClient
) -> None:
    """Issue 17 item 11: the memory page lists the versions the mutation log holds before the
    current one, newest first, with who wrote them (server side: from the log)."""
    base = dict(key="o-auth", title="Auth model", updated_at="2026-11-21 10:00:00")
    seed([rec.session("s-1")], contributor="alice")
    seed([rec.observation(**base, content="**What**: JWT")], contributor="alice")
    seed([rec.observation(**{**base, "updated_at": "2026-11-21 11:00:00"},
                          content="**What**: JWT with refresh")], contributor="bob")  # fmt: skip
    seed([rec.observation(key="o-auth", title="Auth", content="**What**: sessions in Redis",
                          updated_at="2026-11-21 12:00:00")], contributor="carol")  # fmt: skip
    page = admin.get("/dashboard/observations/acme/s-1/o-auth").text
    assert "sessions in Redis" in page.split('data-testid="observation-history"')[0]
    versions = page.split('data-testid="observation-version"')[1:]
    assert len(versions) == 2
    assert "JWT with refresh" in versions[0] and "bob" in versions[0]
    assert "JWT" in versions[1] and "alice" in versions[1] and "refresh" not in versions[1]
    assert "Auth model" in versions[0]  # the title it had then
    seed([rec.observation(key="o-once", content="only one version")])
    once = admin.get("/dashboard/observations/acme/s-1/o-once").text
    assert "only one version" in once and 'data-testid="observation-history"' not in once


def test_a_memory_page_shows_importance_pin_archive_and_merge(
    seed: Callable[..., None], admin: TestClient
) -> None:
    """Issue 21: the dashboard shows what the team decided about a memory (pin, importance set
    by hand, validity) and where consolidation put it (archived, merged into which memory)."""
    seed(
        [
            rec.session("s-1", project="acme", directory="/src/acme"),
            rec.observation(
                "o-rule",
                title="Always rebase",
                content="never merge main in",
                pinned=True,
                importance_override=0.9,
                valid_from="2026-01-01 00:00:00",
            ),
            rec.observation("o-merged", title="Login timeouts, merged", content="pool size"),
            rec.observation(
                "o-old",
                title="Old login note",
                content="pool",
                deleted_at="2026-11-21 11:00:00",
                delete_reason="archived",
                superseded_by="o-merged",
            ),
        ]
    )
    rule = admin.get("/dashboard/observations/acme/s-1/o-rule").text
    assert 'data-testid="observation-pinned"' in rule
    assert re.search(r'observation-importance">0\.90 <span class="muted">\(set by hand\)', rule)
    assert "Valid</dt>" in rule
    old = admin.get("/dashboard/observations/acme/s-1/o-old").text
    assert "This memory was archived" in old
    assert 'href="/dashboard/observations/acme/s-1/o-merged"' in old
    merged = admin.get("/dashboard/observations/acme/s-1/o-merged").text
    assert "Merged from" in merged and "Old login note" in merged
    assert re.search(r'observation-importance">0\.\d\d <span class="muted">\(computed\)', merged)
    listing = admin.get("/dashboard/browser?project=acme").text
    assert listing.count('data-testid="pinned"') == 1
