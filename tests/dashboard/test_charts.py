"""The stats page's charts: server-side SVG, scoped to what the viewer may see, labels escaped,
counts right (real PostgreSQL, data pushed through the server's own push path)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from litestar.testing import TestClient
from sqlalchemy import Engine

from engram_cloud.dashboard.charts import memories_per_day, pushes_per_day
from engram_cloud.dashboard.queries.common import Scope
from tests.cloud import records as rec


def day(offset: int) -> str:
    return (datetime.now(UTC) - timedelta(days=offset)).strftime("%Y-%m-%d 10:00:00")


def test_memories_per_day_by_type_and_contributor(engine: Engine, seed: Callable) -> None:
    seed(
        [
            rec.observation(project="c-acme", created_at=day(0), type="bugfix"),
            rec.observation(project="c-acme", created_at=day(0), type="decision"),
            rec.observation(project="c-acme", created_at=day(2), type="bugfix"),
            rec.observation(project="c-acme", created_at=day(200), type="bugfix"),  # too old
            rec.observation(project="c-secret", created_at=day(0), type="secret-type"),
        ],
        contributor="alice",
    )
    seed([rec.observation(project="c-acme", created_at=day(1))], contributor="bob")
    scope = Scope(frozenset({"c-acme"}))
    with engine.connect() as conn:
        by_type = memories_per_day(conn, scope, "type")
        by_person = memories_per_day(conn, scope, "contributor")
        pushed = pushes_per_day(conn, scope)
    assert len(by_type.days) == 90 and by_type.days[-1] == datetime.now(UTC).date()
    assert by_type.counts["bugfix"][-1] == 1 and by_type.counts["decision"][-1] == 1
    assert by_type.counts["bugfix"][-3] == 1
    assert "secret-type" not in by_type.counts  # another project's memory
    assert by_type.total == 4
    assert sum(by_person.counts["alice"]) == 3 and sum(by_person.counts["bob"]) == 1
    assert pushed.counts["mutations pushed"][-1] == 5  # received today, c-acme only


def test_the_stats_page_draws_scoped_escaped_charts(
    make_client: Callable[..., TestClient], make_user: Callable, seed: Callable
) -> None:
    seed(
        [
            rec.observation(project="c-mine", created_at=day(0), type="<b>bold</b>"),
            rec.observation(project="c-theirs", created_at=day(0), type="hidden-kind"),
        ],
        contributor="<script>x</script>",
    )
    client = make_client()
    token = make_user("charlie", ["c-mine"])
    from tests.support.dashboard import login

    assert login(client, token).status_code == 303
    html = client.get("/dashboard/stats").text
    charts = re.findall(r'<svg class="chart".*?</svg>', html, re.S)
    assert len(charts) == 3  # by type, by contributor, pushes (no machines yet)
    joined = "".join(charts)
    assert "&lt;b&gt;bold&lt;/b&gt;" in joined and "<b>" not in joined
    assert "&lt;script&gt;" in joined and "<script>" not in joined
    assert "hidden-kind" not in html
    assert 'style="' not in joined  # the CSP allows no inline style
