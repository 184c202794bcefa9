"""The TUI's door to the store, against real databases: the "active" flag, paging, sync
targets, superseded searches, and how long calls have waited on another process's lock."""

from __future__ import annotations

import threading

import pytest

from engram.errors import NotFoundError, StoreUnavailableError
from engram.settings import Config
from engram.store import Store
from engram.tui.gateway import SEARCH_CAP, SEARCH_PAGE, Gateway, Stale, SyncTarget
from tests.support import wait_until
from tests.tui.helpers import Seeded, database_locked, release, seed_many


@pytest.fixture
def gateway(seeded: Seeded):
    opened = Gateway(Config(data_dir=seeded.data_dir))
    yield opened
    opened.close()


def test_rows_carry_whether_their_session_is_open(seeded: Seeded, gateway: Gateway) -> None:
    rows = gateway.recent(None, 0, 50)
    active = {r.observation.title: r.active for r in rows}
    assert active["Retry with backoff"] is True  # s-acme-2 is still open
    assert active["Fixed login timeout"] is False  # s-acme-1 ended
    assert gateway.count_recent("zeta") == 1
    assert [r.observation.title for r in gateway.recent("acme", 2, 2)] == [
        "Deploy runbook",
        "Session cookie must be HttpOnly",
    ]


def test_session_detail_pages_and_counts(seeded: Seeded, gateway: Gateway) -> None:
    session, observations, prompts = gateway.session("s-acme-1")
    assert (session.summary, observations, prompts) == ("Auth rework", 4, 1)
    titles = [r.observation.title for r in gateway.session_observations("s-acme-1", 1, 2)]
    assert titles == ["Chose PostgreSQL for the cloud server", "Session cookie must be HttpOnly"]
    assert [p.content for p in gateway.session_prompts("s-acme-1", 0, 10)] == [
        "why does login time out on the VPN?"
    ]
    assert gateway.session_prompts("s-acme-1", 1, 10) == []
    with pytest.raises(NotFoundError):
        gateway.session("s-missing")


def test_sync_targets_git_and_cloud(
    seeded: Seeded, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.sync.cloud.config import save_cloud_config, target_for
    from engram.sync.cloud.state import enroll

    for name in ("ENGRAM_CLOUD_SERVER", "ENGRAM_CLOUD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert gateway.sync_targets() == []
    # A git directory this replica exported to (what `engram sync` records).
    pending = seeded.store.journal.pending("git:/src/acme/.engram")
    seeded.store.journal.mark_delivered("git:/src/acme/.engram", [e.seq for e in pending[:5]])
    assert gateway.sync_targets() == [SyncTarget("git", "/src/acme/.engram")]
    # A configured cloud server: what autosync still has to push for the enrolled projects.
    config = save_cloud_config(seeded.data_dir, "http://127.0.0.1:9")
    assert gateway.sync_targets()[0] == SyncTarget("cloud", "http://127.0.0.1:9")
    enroll(seeded.store, "zeta")
    zeta = seeded.store.journal.count_pending(target_for(config.server_url), projects=["zeta"])
    assert zeta > 0
    assert gateway.sync_targets()[0] == SyncTarget("cloud", "http://127.0.0.1:9", zeta, ("zeta",))


def test_a_search_superseded_by_a_newer_keystroke_is_dropped(
    seeded: Seeded, gateway: Gateway
) -> None:
    first = gateway.next_search()
    second = gateway.next_search()
    with pytest.raises(Stale):
        gateway.search(first, "login", None)
    result = gateway.search(second, "login", None)
    assert result.generation == second == gateway.current_search
    assert result.rows[0].observation.title == "Fixed login timeout"


def test_a_running_search_is_interrupted_by_a_newer_keystroke(data_dir) -> None:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        seed_many(store, 3000)
    gateway = Gateway(Config(data_dir=data_dir))
    try:
        first = gateway.search(gateway.next_search(), "bulk memory", None)
        assert (len(first.rows), first.more) == (SEARCH_PAGE, True)
        assert len(gateway.search_more("bulk memory", None, 10_000)) == SEARCH_CAP
        # Hold the search's statement (SQLite's progress handler runs inside it) until the
        # newer keystroke has been claimed, so the interrupt always lands mid-query however
        # fast or slow the machine is.
        running = threading.Event()
        keystroke = threading.Event()

        def hold() -> int:
            running.set()
            keystroke.wait(10)
            return 0

        connection = gateway._search_connection().db.conn
        connection.set_progress_handler(hold, 1000)
        generation = gateway.next_search()
        outcome: list[object] = []

        def run() -> None:
            try:
                outcome.append(gateway.search(generation, "bulk memory body", None))
            except Stale as exc:
                outcome.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert running.wait(10), "the search never started"
        gateway.next_search()  # a newer keystroke while the query runs
        keystroke.set()
        worker.join(10)
        connection.set_progress_handler(None, 0)
        assert len(outcome) == 1 and isinstance(outcome[0], Stale), outcome
        # The connection is fine afterwards.
        assert gateway.search(gateway.next_search(), "bulk", None).rows
    finally:
        gateway.close()


@pytest.mark.slow
def test_waiting_for_reports_calls_blocked_by_another_process(seeded: Seeded) -> None:
    gateway = Gateway(Config(data_dir=seeded.data_dir, busy_timeout_ms=8000))
    try:
        gateway.count_recent(None)  # opened
        assert gateway.waiting_for() == 0
        with database_locked(seeded.store.path) as holder:
            done: list[object] = []
            writer = threading.Thread(
                target=lambda: done.append(gateway.delete(seeded.ids["retry"]))
            )
            writer.start()
            wait_until(lambda: gateway.waiting_for() >= 0.5, timeout=5, every=0.01)
            release(holder)
            writer.join()
        assert gateway.waiting_for() == 0
        assert done[0].title == "Retry with backoff"
    finally:
        gateway.close()


def test_a_write_that_times_out_changes_nothing(seeded: Seeded) -> None:
    gateway = Gateway(Config(data_dir=seeded.data_dir, busy_timeout_ms=300))
    try:
        with (
            database_locked(seeded.store.path),
            pytest.raises(StoreUnavailableError, match="locked by another process"),
        ):
            gateway.update(seeded.ids["retry"], title="changed")
        assert seeded.store.get_observation(seeded.ids["retry"]).title == "Retry with backoff"
    finally:
        gateway.close()


def test_a_closed_gateway_refuses_calls(seeded: Seeded) -> None:
    gateway = Gateway(Config(data_dir=seeded.data_dir))
    gateway.close()
    with pytest.raises(RuntimeError, match="closing"):
        gateway.count_recent(None)
