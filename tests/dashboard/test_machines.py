"""The machines page in both vocabularies: our clients' sync state and the first seed's workers'
hardware (IPs, RAM, GPU), the derived status (online, unhealthy, offline), hostile field values
shown as text, and the same who-sees-what rule as the JSON API."""

from __future__ import annotations

import re
from collections.abc import Callable

from litestar.testing import TestClient
from sqlalchemy import Engine, text

from tests.support.dashboard import LEGACY_TOKEN

SEED = {"tailscale_ip": "100.64.0.5", "local_ip": "192.168.1.50", "ram_gb": 8, "gpu_type": "Orin"}


def beat(client: TestClient, token: str, **body: object) -> None:
    answer = client.post(
        "/api/v1/workers/heartbeat", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200, answer.text


def rows(html: str) -> dict[str, str]:
    found = re.findall(r'<tr data-testid="machine-row">(.*?)</tr>', html, re.S)
    return {re.search(r'data-testid="machine-host"[^>]*>([^ <]+)', r).group(1): r for r in found}


def test_seed_workers_and_our_clients_side_by_side(admin: TestClient, engine: Engine) -> None:
    beat(admin, LEGACY_TOKEN, hostname="edge-nano-01", **SEED)
    beat(admin, LEGACY_TOKEN, hostname="quiet-nano", **{**SEED, "local_ip": None})
    beat(admin, LEGACY_TOKEN, origin="a" * 16, hostname="laptop", projects=["acme"], pending=3)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE cloud_workers SET last_seen_at = now() - interval '10 minutes' "
                "WHERE hostname = 'quiet-nano'"
            )
        )
    html = admin.get("/dashboard/machines").text
    found = rows(html)
    assert list(found) == ["edge-nano-01", "laptop", "quiet-nano"]  # online first, then by name
    seed = found["edge-nano-01"]
    for cell in ("100.64.0.5", "192.168.1.50", "8 GB", "Orin", "worker #"):
        assert cell in seed, cell
    assert 'data-kind="seed"' in seed and ">online<" in seed
    ours = found["laptop"]
    assert 'data-kind="engram"' in ours and "a" * 16 in ours and ">3<" in ours
    assert 'data-testid="machine-ram">-<' in ours  # never reported: shown as unknown
    quiet = found["quiet-nano"]
    assert ">unhealthy<" in quiet and 'data-testid="machine-local-ip">-<' in quiet
    assert "unhealthy, for 60 minutes" in html.replace("\n", " ")
    stats = admin.get("/dashboard/stats").text
    assert re.search(r'metric-n">2 / 3<', stats)  # two of three online
    health = admin.get("/dashboard/admin/health").text
    assert ">unhealthy<" in health


def test_hostile_seed_fields_are_text(admin: TestClient) -> None:
    beat(admin, LEGACY_TOKEN, hostname="evil", **{**SEED, "gpu_type": "<script>alert(1)</script>"})
    html = admin.get("/dashboard/machines").text
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_members_see_the_machines_the_api_shows_them(
    admin: TestClient,
    make_user: Callable[..., str],
    logged_in: Callable[[str], TestClient],
) -> None:
    alice = make_user("alice", ["acme", "secret"])
    bob = make_user("bob", ["widgets"])
    carol = make_user("carol", ["acme"])
    beat(admin, alice, hostname="alices-jetson", **SEED)
    beat(admin, bob, hostname="bobs-jetson", **SEED)
    page = logged_in(carol).get("/dashboard/machines").text
    assert list(rows(page)) == ["alices-jetson"]
    assert "secret" not in page.split("<main", 1)[1]  # alice's other project is not named
    api = admin.get("/api/v1/workers", headers={"Authorization": f"Bearer {carol}"}).json()
    assert [w["hostname"] for w in api] == ["alices-jetson"]
