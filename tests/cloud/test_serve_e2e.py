"""End to end: real ``engram cloud serve`` processes on free ports, one of them with several
uvicorn workers, sharing one database — a long-poll on one server is woken by a push to the
other (the state lives in PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.cloud import records as rec
from tests.support.cloud import LEGACY_TOKEN, RunningServer, bearer
from tests.support.sync_cloud import wait_until


def events(path: Path) -> list[str]:
    """What the observed server's notifier did (tests/support/observed_cloud.py)."""
    return path.read_text().splitlines() if path.exists() else []


def test_two_servers_one_database(
    serve: Callable[..., RunningServer],
    start_server: Callable[..., str],
    make_user: Callable[..., str],
    tmp_path: Path,
) -> None:
    notes = tmp_path / "first-server-notifier.log"
    first = serve(observe=notes).url
    second = start_server("--workers", "2")
    member = bearer(make_user("alice", ["acme"]))
    legacy = bearer(LEGACY_TOKEN)
    with httpx.Client(timeout=60) as http:
        for base in (first, second):
            assert http.get(f"{base}/health").json() == {"service": "engram-cloud", "status": "ok"}
            assert http.get(f"{base}/health/ready").json()["database"] == "ok"
            assert http.get(f"{base}/api/v1/whoami", headers=member).json()["projects"] == ["acme"]

        answers: list[dict] = []
        waiter = threading.Thread(
            target=lambda: answers.append(
                http.get(
                    f"{first}/sync/mutations/pull",
                    params={"wait": 25, "project": "acme"},
                    headers=member,
                ).json()
            )
        )
        waiter.start()
        # The pull on the first server found nothing and is waiting before anything is pushed.
        wait_until(lambda: "waiting 0" in events(notes), timeout=30)
        record = rec.observation(project="acme")
        pushed = http.post(
            f"{second}/sync/mutations/push", json=rec.push_body([record]), headers=member
        )
        assert pushed.status_code == 200 and pushed.json()["accepted"] == [record["mid"]]
        waiter.join(30)
        assert not waiter.is_alive()
        assert [m["mid"] for m in answers[0]["mutations"]] == [record["mid"]]
        # The first server heard the second server's commit through PostgreSQL.
        wait_until(lambda: "latest 1" in events(notes), timeout=30)

        forbidden = http.post(
            f"{first}/sync/mutations/push",
            json=rec.push_body([rec.observation(project="widgets")]),
            headers=member,
        )
        assert forbidden.status_code == 403
        outside = http.post(
            f"{second}/sync/mutations/push",
            json=rec.push_body([rec.observation(project="elsewhere")]),
            headers=legacy,
        )
        assert outside.status_code == 403  # not in the server allowlist
        retry = http.post(
            f"{first}/sync/mutations/push", json=rec.push_body([record]), headers=legacy
        )
        assert retry.json()["accepted"] == [record["mid"]] and retry.json()["latest_seq"] == 1
        for base in (first, second):
            log = http.get(f"{base}/sync/mutations/pull", headers=legacy).json()
            assert [m["seq"] for m in log["mutations"]] == [1] and log["next"] == 1
