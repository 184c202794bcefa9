"""The dashboard's memory graph (issue 20): a memory's page lists its relations (what it
supersedes, what contests it, pending review, waiting for a memory not arrived); a project's
graph tab draws its entities and links as inline SVG, names escaped; both only for viewers who
may read the project."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from litestar.testing import TestClient

from engram.record import build_record, relation_key
from tests.cloud import records as rec


def relation(project: str, source: str, target: str, kind: str, status: str = "judged", **extra):
    key = relation_key(project, source, target)
    hlc = rec.next_hlc()
    payload = {
        "sync_id": key, "source_id": source, "target_id": target, "relation": kind,
        "judgment_status": status, "project": project, "created_at": "2026-11-21 10:05:00",
        "updated_at": "2026-11-21 10:05:00", **extra,
    }  # fmt: skip
    return build_record(
        mid=secrets.token_hex(16), hlc=hlc, origin=hlc[-16:], entity="relation", key=key,
        op="upsert", project=project, scope="project", payload=payload,
    )  # fmt: skip


def world(seed: Callable[..., None]) -> None:
    seed(
        [
            rec.session("s-1", project="acme"),
            rec.observation("o-old", project="acme", title="Sessions in Redis",
                            content="The session store runs on Redis."),
            rec.observation("o-new", project="acme", title="Sessions in <b>PostgreSQL</b>",
                            content="The auth middleware reads tokens from the session store. "
                                    "The session store runs on PostgreSQL."),
            rec.observation("o-3", project="acme", title="Cookie",
                            content="The session cookie is HttpOnly."),
            relation("acme", "o-new", "o-old", "supersedes", reason="moved off Redis"),
            relation("acme", "o-3", "o-old", "conflicts_with", status="pending"),
            relation("acme", "o-3", "o-not-here-yet", "related"),
            rec.session("s-9", project="secret"),
            rec.observation("o-s", project="secret", session_id="s-9", title="Secret",
                            content="The billing service calls the payment gateway."),
        ],
        contributor="alice",
    )  # fmt: skip


def test_a_memory_page_lists_its_relations(seed, admin: TestClient) -> None:
    world(seed)
    page = admin.get("/dashboard/observations/acme/s-1/o-old").text
    assert 'data-testid="needs-review"' in page
    assert "superseded by" in page and "Sessions in &lt;b&gt;PostgreSQL&lt;/b&gt;" in page
    assert "moved off Redis" in page and "contested by" in page and "pending review" in page
    assert 'href="/dashboard/observations/acme/s-1/o-new"' in page
    newer = admin.get("/dashboard/observations/acme/s-1/o-new").text
    assert "supersedes" in newer and 'data-testid="needs-review"' not in newer
    waiting = admin.get("/dashboard/observations/acme/s-1/o-3").text
    assert "o-not-here-yet" in waiting and "waiting" in waiting


def test_the_project_graph_tab(seed, admin: TestClient) -> None:
    world(seed)
    page = admin.get("/dashboard/projects/acme/graph")
    assert page.status_code == 200
    html = page.text
    svg = html[html.index("<svg viewBox") : html.index("</svg>")]
    assert 'data-testid="project-graph"' in svg and "<script" not in svg and "style=" not in svg
    assert "session store" in html and "runs_on" in html and "PostgreSQL" in html
    assert "auth middleware" in html
    assert 'href="/dashboard/observations/acme/s-1/o-new"' in html  # the triples' sources
    fragment = admin.get("/dashboard/projects/acme/graph", headers={"HX-Request": "true"}).text
    assert "<html" not in fragment and 'data-testid="project-graph"' in fragment
    assert 'aria-current="page">Graph</a>' in html


def test_hostile_names_are_escaped_in_the_svg(seed, admin: TestClient) -> None:
    seed(
        [
            rec.session("s-1", project="acme"),
            rec.observation("o-x", project="acme", title="x",
                            content='The `<script>alert(1)</script>` handler calls the "><svg onload=x> service.'),
        ]
    )  # fmt: skip
    html = admin.get("/dashboard/projects/acme/graph").text
    assert "<script>alert" not in html and "onload=x>" not in html


def test_graph_pages_follow_grants(seed, make_user, logged_in) -> None:
    world(seed)
    token = make_user("ann", projects=["acme"])
    client = logged_in(token)
    assert client.get("/dashboard/projects/acme/graph").status_code == 200
    assert client.get("/dashboard/projects/secret/graph").status_code in (403, 404)
    assert "payment gateway" not in client.get("/dashboard/projects/secret/graph").text


def test_a_merged_memory_page_counts_its_relations_as_links(seed, admin: TestClient) -> None:
    """Consolidation's supersession is a relation (one relation model): the merged memory's page
    shows it as active although its source was archived, and its computed importance counts it
    as a link, as every client does (engram/store/links.py); a deleted memory orphans."""
    import re

    seed(
        [
            rec.session("s-1", project="acme"),
            rec.observation("o-merged", title="Pool size, merged", content="pool size 20"),
            rec.observation("o-twin", title="Pool size, twin", content="pool size 20"),
            rec.observation("o-old", title="Old pool note", content="pool",
                            deleted_at="2026-11-21 11:00:00", delete_reason="archived",
                            superseded_by="o-merged"),
            rec.observation("o-gone", title="Gone", content="x",
                            deleted_at="2026-11-21 11:00:00"),
            rec.observation("o-peer", title="Peer", content="pool metrics"),
            relation("acme", "o-merged", "o-old", "supersedes", reason="merged by consolidation"),
            relation("acme", "o-merged", "o-gone", "related"),
            relation("acme", "o-peer", "o-merged", "related"),
        ]
    )  # fmt: skip

    def importance(page: str) -> float:
        found = re.search(r'observation-importance">(\d\.\d\d)', page)
        assert found is not None
        return float(found.group(1))

    merged = admin.get("/dashboard/observations/acme/s-1/o-merged").text
    items = re.findall(r'data-testid="relation">(.*?)</li>', merged, flags=re.S)
    assert len(items) == 3
    old = next(i for i in items if "Old pool note" in i)
    gone = next(i for i in items if "Gone" in i)
    assert "supersedes" in old and "orphaned" not in old and "merged by consolidation" in old
    assert "orphaned" in gone
    twin = admin.get("/dashboard/observations/acme/s-1/o-twin").text
    # Two links (the orphaned relation is none): 2 × 0.20 / 3 more than the same memory alone.
    assert abs(importance(merged) - importance(twin) - 0.1333) <= 0.011
