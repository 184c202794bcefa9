"""A net under every route of the team server: odd values (huge and negative integers, NUL,
non-ASCII digits, slashes, long strings) in every path parameter and in the query parameters each
route reads never produce a 5xx — they get a 4xx, with the error envelope on the JSON API.

The routes are taken from the application itself, so a route added later is covered without
touching this file (its path parameters at least; name its query parameters below).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from litestar.testing import TestClient

from engram_cloud.app import create_app
from engram_cloud.db import create_db_engine
from engram_cloud.principals import CLI_ACTOR, create_principal, grant, issue_token
from engram_cloud.settings import Settings, parse_allowlist
from tests.cloud import records as rec
from tests.support.cloud import ADMIN_TOKEN, JWT_SECRET, LEGACY_TOKEN, bearer
from tests.support.dashboard import csrf_token, login
from tests.support.postgres import PostgresCluster

ODD = [
    "99999999999999999999",
    "-99999999999999999999",
    "\x00",
    "a\x00b",
    "²",
    "٣",
    "1e999",
    "org/repo",
    "x" * 3000,
]
#: The query parameters each JSON route reads (the dashboard's are in DASHBOARD_QUERY).
API_QUERY = {
    "/sync/mutations/pull": ("since", "since_seq", "limit", "wait", "project"),
    "/sync/push": ("project",),
    "/sync/pull": ("project",),
    "/sync/pull/{chunk_id:str}": ("project",),
    "/admin/audit-log": ("limit", "project", "contributor", "outcome"),
    "/api/v1/workers": ("status",),
    "/api/v1/workers/cleanup": ("minutes",),
}
DASHBOARD_QUERY = ("page", "pageSize", "q", "project", "contributor", "outcome", "type", "from",
                   "to", "next", "done")  # fmt: skip
#: Path tails that make the free-form routes reach their handlers' deepest branch.
PATH_SUFFIXES = ("", "/sync", "/sync/form", "/revoke", "/acme")
# Logging out would leave the shared dashboard client without a session (every later page a
# redirect to the login): it takes no parameters anyway.
SKIPPED = re.compile(r"^/schema|^/dashboard/static/|^/dashboard/logout$")
_PARAM = re.compile(r"\{([a-z_]+):([a-z]+)\}")


def _routes() -> list[tuple[str, str]]:
    app = create_app(
        Settings(
            database_url="postgresql://nobody@localhost/none",
            allowed_projects=parse_allowlist("*"),
            jwt_secret="j" * 8 + "0123456789abcdefghijklmnopqrstuvwxyz",
        )
    )
    found = []
    for route in app.routes:
        if SKIPPED.match(route.path):
            continue
        for method in sorted(getattr(route, "methods", ())):
            if method in ("GET", "POST"):
                found.append((method, route.path))
    return found


ROUTES = _routes()


def _paths(path: str) -> Iterator[str]:
    """``path`` with each odd value in each of its parameters (just ``path`` without any)."""
    params = _PARAM.findall(path)
    if not params:
        yield path
        return
    for value in ODD:
        for suffix in PATH_SUFFIXES if any(kind == "path" for _, kind in params) else ("",):
            concrete = path
            for name, kind in params:
                # A real client percent-encodes what it puts in a path; a slash in a value
                # stays a slash for the ``path`` converters (that is how org/repo arrives).
                encoded = quote(value, safe="/" if kind == "path" else "")
                concrete = concrete.replace(f"{{{name}:{kind}}}", encoded + suffix, 1)
                suffix = ""
            yield concrete


#: A valid value per parameter kind, for the requests that put odd values in the query only.
SANE = {"str": "alice", "int": "1", "path": "org%2Frepo"}


def _sane(path: str) -> str:
    return _PARAM.sub(lambda m: SANE[m.group(2)], path)


def _requests(path: str) -> Iterator[str]:
    """Odd values in the path (no query), then in each query parameter (sane path)."""
    yield from _paths(path)
    names = DASHBOARD_QUERY if path.startswith("/dashboard") else API_QUERY.get(path, ())
    for name in names:
        for value in ODD:
            yield f"{_sane(path)}?{name}={quote(value, safe='')}"


@pytest.fixture(scope="module", name="seeded")
def fixture_seeded(
    postgres_cluster: PostgresCluster, cloud_template: str
) -> Iterator[tuple[TestClient, TestClient]]:
    """One app for the module (the routes are many, a database each would be slow) with
    something in every table: a project named ``org/repo`` with memories, a user ``alice``
    with a token and a grant, a paused project and a machine."""
    name = postgres_cluster.create_database(template=cloud_template)
    settings = Settings(
        database_url=postgres_cluster.url(name),
        allowed_projects=parse_allowlist("*"),
        token=LEGACY_TOKEN,
        admin_token=ADMIN_TOKEN,
        jwt_secret=JWT_SECRET,
        pool_size=3,
    )
    engine = create_db_engine(settings.database_url, pool_size=1)
    with engine.begin() as conn:
        create_principal(conn, CLI_ACTOR, "alice")
        grant(conn, CLI_ACTOR, "alice", "org/repo")
        alice, _ = issue_token(conn, CLI_ACTOR, settings.token_pepper, "alice")
    engine.dispose()
    with (
        TestClient(create_app(settings), timeout=30) as api,
        TestClient(create_app(settings), timeout=30) as dashboard,
    ):
        admin = bearer(ADMIN_TOKEN)
        records = [rec.session(project="org/repo"), rec.observation(project="org/repo")]
        pushed = api.post("/sync/mutations/push", json=rec.push_body(records), headers=admin)
        assert pushed.is_success
        paused = api.post("/admin/projects/paused/sync", json={"enabled": False}, headers=admin)
        assert paused.is_success
        beat = {"origin": "a1b2c3d4e5f60718", "hostname": "laptop", "projects": ["org/repo"]}
        assert api.post("/api/v1/workers/heartbeat", json=beat, headers=bearer(alice)).is_success
        assert login(dashboard, ADMIN_TOKEN).status_code == 303
        yield api, dashboard
    postgres_cluster.drop_database(name)


def _request(client: TestClient, method: str, url: str, **kw: object) -> httpx.Response:
    return client.request(method, url, follow_redirects=False, **kw)


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_no_odd_value_makes_a_5xx(
    seeded: tuple[TestClient, TestClient], method: str, path: str
) -> None:
    api, dashboard = seeded
    on_dashboard = path.startswith("/dashboard")
    client = dashboard if on_dashboard else api
    failures = []
    for url in _requests(path):
        if on_dashboard:
            kw: dict[str, object] = {}
            if method == "POST":
                kw["data"] = {"_csrf_token": csrf_token(dashboard), "project": "acme"}
        else:
            kw = {"headers": bearer(ADMIN_TOKEN)}
            if method == "POST":
                kw["json"] = {}
        answer = _request(client, method, url, **kw)
        if answer.status_code >= 500:
            failures.append(f"{method} {url[:150]!r} → {answer.status_code}")
        elif not on_dashboard and answer.status_code >= 400:
            envelope = answer.json()
            assert {"error_class", "error_code", "error"} <= set(envelope), (url, envelope)
    assert not failures, "\n".join(failures[:30]) + f"\n({len(failures)} in all)"
    if on_dashboard:  # still logged in: the pages above were really rendered
        assert dashboard.get("/dashboard/admin", follow_redirects=False).status_code == 200
