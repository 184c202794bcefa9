"""The dashboard goes live: headless Chromium keeps a page open while another machine pushes a
memory and sends a heartbeat; both appear without a reload, only for projects the viewer may
see (real ``engram cloud serve``, real pushes over HTTP, the real WebSocket gateway)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import Engine

from tests.cloud import records as rec
from tests.dashboard.test_browser import (  # noqa: F401  (pytest finds fixtures by name)
    chromium,
    database,
    engine,
    log_in,
    make_user,
    new_page,
    push,
    server,
    shot,
)


def heartbeat(base: str, token: str, hostname: str, projects: list[str]) -> None:
    answer = httpx.post(
        f"{base}/api/v1/workers/heartbeat",
        json={
            "origin": "c0ffee00c0ffee00",
            "hostname": hostname,
            "projects": projects,
            "pending": 3,
        },
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


def test_a_pushed_memory_appears_on_an_open_page(
    server: str,  # noqa: F811  (the fixtures imported above)
    engine: Engine,  # noqa: F811
    new_page: Callable[[], Any],  # noqa: F811
) -> None:
    carol = make_user(engine, "carol", ["live-acme"])
    dave = make_user(engine, "dave", ["live-acme", "live-hidden"])
    page = new_page()
    log_in(page, server, carol)
    page.wait_for_url(re.compile(r"/dashboard/$"))
    page.goto(f"{server}/dashboard/activity")
    page.wait_for_selector("[data-testid=live-state][data-state=on]")
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    # Another machine (Dave's) pushes to a project Carol cannot see, then to hers.
    hidden = push(server, dave, [rec.observation(project="live-hidden", title="Secret plan")])
    assert hidden.status_code == 200 and not hidden.json()["rejected"], hidden.text
    shown = push(server, dave, [rec.observation(project="live-acme", title="Appeared live")])
    assert shown.status_code == 200 and not shown.json()["rejected"], shown.text

    page.wait_for_selector("#results [data-testid=activity-row] >> text=Appeared live")
    assert page.evaluate("window.__sameDocument") is True
    assert "Secret plan" not in page.content()
    toast = page.inner_text("[data-testid=live-toast]")
    assert "New memory in live-acme: Appeared live" in toast
    shot(page, "20-live-activity")

    # A heartbeat from a machine syncing her project shows on the machines page, live too.
    page.goto(f"{server}/dashboard/machines")
    page.wait_for_selector("[data-testid=live-state][data-state=on]")
    page.evaluate("window.__sameDocument = true")
    heartbeat(server, dave, "daves-laptop", ["live-acme"])
    page.wait_for_selector("[data-testid=machine-row] >> text=daves-laptop")
    assert page.evaluate("window.__sameDocument") is True


def test_a_seed_workers_heartbeat_appears_on_an_open_machines_page(
    server: str,  # noqa: F811
    engine: Engine,  # noqa: F811
    new_page: Callable[[], Any],  # noqa: F811
) -> None:
    """A worker speaking the first seed's Worker API (hostname, IPs, RAM, GPU) beats while a
    teammate has the machines page open: its row appears with those fields, without a reload;
    a worker filed under a project she cannot see never does."""
    erin = make_user(engine, "erin", ["seed-acme"])
    fleet = make_user(engine, "edge-fleet", ["seed-acme"])
    other = make_user(engine, "other-fleet", ["seed-hidden"])
    page = new_page()
    log_in(page, server, erin)
    page.wait_for_url(re.compile(r"/dashboard/$"))
    page.goto(f"{server}/dashboard/machines")
    page.wait_for_selector("[data-testid=live-state][data-state=on]")
    page.evaluate("window.__sameDocument = true")

    def seed_beat(token: str, hostname: str, tailscale_ip: str) -> None:
        answer = httpx.post(
            f"{server}/api/v1/workers/heartbeat",
            json={
                "hostname": hostname,
                "tailscale_ip": tailscale_ip,
                "local_ip": "192.168.1.50",
                "ram_gb": 8.0,
                "gpu_type": "edge device",
            },
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answer.status_code == 200 and answer.json()["status"] == "accepted", answer.text

    seed_beat(other, "hidden-nano", "100.64.0.9")
    seed_beat(fleet, "edge-nano-01", "100.64.0.5")
    row = page.wait_for_selector("[data-testid=machine-row]:has-text('edge-nano-01')")
    assert page.evaluate("window.__sameDocument") is True
    cells = {
        name: row.query_selector(f"[data-testid=machine-{name}]").inner_text().strip()
        for name in ("tailscale-ip", "local-ip", "ram", "gpu")
    }
    assert cells == {
        "tailscale-ip": "100.64.0.5",
        "local-ip": "192.168.1.50",
        "ram": "8 GB",
        "gpu": "edge device",
    }
    assert row.query_selector("[data-testid=machine-status]").inner_text() == "online"
    assert "hidden-nano" not in page.content()
    shot(page, "21-live-seed-worker")
