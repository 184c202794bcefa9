"""The live feed's machine events, read from a real database: a heartbeat in the first seed's
shape carries its fields, and a machine whose silence crosses a status threshold is announced
(``machine_status``) though nothing was written — to the same subscribers who may see it."""

from __future__ import annotations

from sqlalchemy import Engine, text

from engram_cloud import fleet
from engram_cloud.auth import LEGACY_PRINCIPAL
from engram_cloud.fleet import Liveness
from engram_cloud.live import LiveFeed

SEED = {"tailscale_ip": "100.64.0.5", "local_ip": None, "ram_gb": 8.0, "gpu_type": "Orin"}


def backdate(engine: Engine, hostname: str, seconds: int) -> None:
    """Make ``hostname`` silent for exactly ``seconds`` now (the threshold is crossed now)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE cloud_workers SET last_seen_at = now() - make_interval(secs => :s) "
                "WHERE hostname = :h"
            ),
            {"s": seconds, "h": hostname},
        )


def test_silence_crossing_a_threshold_is_an_event(engine: Engine) -> None:
    feed = LiveFeed(engine, notifier=None, liveness=Liveness(60, 600))  # type: ignore[arg-type]
    with engine.begin() as conn:
        for name, projects in (("acme-nano", ["acme"]), ("other-nano", ["other"])):
            fleet.record_seed_heartbeat(
                conn, {"hostname": name, **SEED}, LEGACY_PRINCIPAL, projects
            )
    marks = feed._baseline()
    assert feed._changes(marks) == []  # nothing new since the baseline

    fleet_watcher = feed.subscribe(lambda p: p == "acme")
    backdate(engine, "acme-nano", 60)
    backdate(engine, "other-nano", 30)  # not yet unhealthy
    events = feed._changes(marks)
    assert [(e["event"], e["hostname"], e["status"]) for e in events] == [
        ("machine_status", "acme-nano", "unhealthy")
    ]
    assert events[0]["kind"] == "seed" and events[0]["tailscale_ip"] == "100.64.0.5"
    for event in events:
        feed.publish(event)
    shown = fleet_watcher.queue.get_nowait()
    assert shown["status"] == "unhealthy" and "owner" not in shown
    assert feed._changes(marks) == []  # announced once

    backdate(engine, "acme-nano", 600)
    backdate(engine, "other-nano", 60)
    events = feed._changes(marks)
    assert sorted((e["hostname"], e["status"]) for e in events) == [
        ("acme-nano", "offline"),
        ("other-nano", "unhealthy"),
    ]
    for event in events:
        feed.publish(event)
    assert fleet_watcher.queue.get_nowait()["hostname"] == "acme-nano"
    assert fleet_watcher.queue.empty()  # other's machine is not this subscriber's to see

    # A heartbeat brings it back: a heartbeat event, online.
    with engine.begin() as conn:
        fleet.record_seed_heartbeat(
            conn, {"hostname": "acme-nano", **SEED}, LEGACY_PRINCIPAL, ["acme"]
        )
    [event] = feed._changes(marks)
    assert (event["event"], event["status"], event["ram_gb"]) == ("heartbeat", "online", 8.0)
