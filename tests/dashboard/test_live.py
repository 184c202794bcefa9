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
