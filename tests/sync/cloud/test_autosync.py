"""The autosync loop against a real server: real ``engram serve`` and ``engram mcp`` processes
see each other's memories through the long-poll, one process per data directory holds the lease,
``/sync/status`` reports the phase and reason, heartbeats reach the server, and local writes
never wait on the network — 1,000 of them while the server answers 500."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import psycopg
import pytest

from engram.store import Store
from engram.sync.cloud import state as cloud_state
from engram.sync.cloud.autosync import Autosync, Timings
from engram.sync.cloud.config import CloudConfig, save_cloud_config
from engram.sync.cloud.status import project_status
from tests.mcp.client import call, engram_mcp
from tests.support import run_engram
from tests.support.sync_cloud import (
    TOKEN,
    CloudServer,
    LocalServe,
    autosync_env,
    canonical,
    cloud_config,
    enroll,
    wait_until,
)
from tests.sync.cloud.proxy import FaultProxy

FAST = Timings(
    debounce=0.02,
    poll=5,
    watch=0.1,
    lease=3,
    backoff_base=0.1,
    backoff_max=0.5,
    heartbeat=1,
    rescan=2,
    refused_base=1,  # a refused project is asked again after 1 s, then 2 s…
    refused_max=2,
)


@contextmanager
def autosync(store: Store, config: CloudConfig, timings: Timings = FAST) -> Iterator[Autosync]:
    """This store's loop, running in this process (its own connection, its own threads)."""
    manager = Autosync(store.path, store.config, config, timings)
    store.add_write_listener(manager.notify_dirty)
    manager.start()
    try:
        yield manager
    finally:
        manager.stop()


def save_on(serve: LocalServe, n: int, word: str) -> None:
    for i in range(n):
        serve.save(f"{word} {i}", f"{word} memory number {i}")


def titled(serve: LocalServe, word: str) -> list[dict]:
    """The memories whose title starts with ``word`` (search ORs its words, so filter)."""
    return [o for o in serve.search(word) if o["title"].startswith(word)]


def no_duplicates(server: CloudServer) -> list[str]:
    mids = server.mids()
    assert not [m for m, n in Counter(mids).items() if n > 1], "a mid stored twice"
    return mids


# --- real processes ---------------------------------------------------------------------------


def test_two_serve_processes_see_each_others_memories(
    server: CloudServer, start_serve: Callable[..., LocalServe], tmp_path: Path
) -> None:
    homes = [tmp_path / "a", tmp_path / "b"]
    for home in homes:
        assert run_engram("cloud", "enroll", "acme", data_dir=home).returncode == 0
    a, b = (start_serve(home, autosync_env(server.url)) for home in homes)
    first = a.save("Pool size", "raised the pool to thirty connections")
    found = wait_until(lambda: b.search("thirty connections"), timeout=15)
    assert found[0]["sync_id"] == first["observation"]["sync_id"]
    b.save("Cache", "redis keys expire after ten minutes")
    wait_until(lambda: a.search("redis keys"), timeout=15)
    save_on(a, 5, "alpha")
    save_on(b, 5, "beta")
    wait_until(lambda: len(titled(b, "alpha")) == 5 and len(titled(a, "beta")) == 5)

    status = wait_until(lambda: (s := a.sync_status())["phase"] == "healthy" and s)
    assert status["enabled"] is True and status["reason_code"] is None
    assert status["pending_count"] == 0 and status["quarantined_count"] == 0
    assert status["last_sync_at"]
    origins = wait_until(lambda: workers(server), timeout=10)
    assert len(origins) == 2  # both machines sent heartbeats
    for serve in (a, b):
        assert serve.stop() == 0
        assert "[autosync] started" in serve.output()
    with Store.open(homes[0] / "engram.db") as sa, Store.open(homes[1] / "engram.db") as sb:
        assert canonical(sa) == canonical(sb)
    no_duplicates(server)


def workers(server: CloudServer) -> list[str]:
    with psycopg.connect(server.db_url.replace("+psycopg", "")) as conn:
        return [r[0] for r in conn.execute("SELECT origin FROM cloud_workers").fetchall()]


def test_one_process_per_data_directory_holds_the_lease(
    server: CloudServer, start_serve: Callable[..., LocalServe], tmp_path: Path
) -> None:
    home = tmp_path / "shared"
    assert run_engram("cloud", "enroll", "acme", data_dir=home).returncode == 0
    env = autosync_env(server.url)
    first, second = start_serve(home, env), start_serve(home, env)
    first.save("From first", "written through the first process")
    second.save("From second", "written through the second process")
    wait_until(lambda: len(server.mids("acme")) == 3)  # the session and both memories
    with Store.open(home / "engram.db") as store:
        owner = cloud_state.lease_holder(store, f"cloud:{server.url}")
    assert owner is not None
    states = {s.sync_status()["phase"] for s in (first, second)}
    assert states <= {"healthy", "idle", "pushing", "pulling"}
    # The holder dies without a word: the other takes over once the lease expires.
    holder, other = (first, second) if str(first.process.pid) in owner else (second, first)
    holder.stop(signal.SIGKILL)
    other.save("After the crash", "the survivor keeps syncing")
    wait_until(lambda: len(server.mids("acme")) == 4, timeout=20)
    with Store.open(home / "engram.db") as store:
        now_owner = cloud_state.lease_holder(store, f"cloud:{server.url}")
    assert now_owner is not None and now_owner != owner
    no_duplicates(server)


@pytest.mark.anyio
async def test_mcp_with_autosync_pushes_and_receives(
    server: CloudServer, start_serve: Callable[..., LocalServe], tmp_path: Path
) -> None:
    mcp_home, serve_home = tmp_path / "mcp-home", tmp_path / "serve-home"
    workdir = tmp_path / "acme"
    workdir.mkdir()
    for home in (mcp_home, serve_home):
        assert run_engram("cloud", "enroll", "acme", data_dir=home).returncode == 0
    b = start_serve(serve_home, autosync_env(server.url))
    async with engram_mcp(mcp_home, workdir, env=autosync_env(server.url)) as session:
        await call(session, "mem_save", title="Agent note", content="saved through the MCP tools")
        wait_until(lambda: b.search("through the MCP"), timeout=15)
        b.save("Human note", "typed into the HTTP API")
        deadline = time.monotonic() + 15
        while True:
            found = await call(session, "mem_search", query="typed HTTP API")
            if "typed into the HTTP API" in str(found):
                break
            assert time.monotonic() < deadline, found
            await anyio.sleep(0.1)  # the MCP client's own tasks run meanwhile
    log = (tmp_path / "mcp-stderr-acme.log").read_text()
    assert "[autosync] started" in log


def test_autosync_asked_for_but_not_configured_starts_without_it(
    start_serve: Callable[..., LocalServe], tmp_path: Path
) -> None:
    serve = start_serve(tmp_path / "home", {"ENGRAM_CLOUD_AUTOSYNC": "1"})
    serve.save("Still works", "the local API runs without the cloud")
    status = serve.sync_status()
    assert status["enabled"] is False and status["reason_code"] == "cloud_not_configured"
    serve.stop()
    assert "[autosync] ERROR: ENGRAM_CLOUD_AUTOSYNC=1 but no cloud server" in serve.output()


# --- faults (in-process loops through a fault-injecting proxy) ---------------------------------


def test_500s_and_timeouts_then_recovery_lose_and_duplicate_nothing(
    shared_server: CloudServer,
    open_store: Callable[[str], Store],
    project: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENGRAM_CLOUD_TIMEOUT_S", "1")
    server = shared_server
    a, b = open_store("a"), open_store("b")
    enroll(a, b, project=project)
    with (
        FaultProxy(server.port) as proxy,
        autosync(a, via_proxy := save_cloud_config(a.config.data_dir, proxy.url, TOKEN)) as loop_a,
        autosync(b, cloud_config(server.url)),
    ):
        # 1. The server answers 500 to every push.
        proxy.set("error", only=("/sync/mutations/push",))
        a.add_observation(title="During 500s", content="written while failing", project=project)
        status = wait_until(
            lambda: (
                (s := project_status(a, project, manager=loop_a))["reason_code"]
                == "transport_failed"
                and s
            )
        )
        assert status["phase"] in ("push_failed", "backoff") and status["consecutive_failures"]
        assert "500" in status["reason_message"]
        # 2. The server commits but the answer is lost. Nothing is acknowledged on a 500; the
        # rows come back through the pull (so the server holds them) and that settles them.
        proxy.set("error_after", only=("/sync/mutations/push",))
        a.add_observation(title="Lost answers", content="committed but unheard", project=project)
        wait_until(lambda: proxy.faults["error_after /sync/mutations/push"] >= 1)
        wait_until(lambda: a.journal.count_pending(via_proxy.target, projects=[project]) == 0)
        # 3. The server stalls past the client's timeout.
        proxy.stall_s = 3
        proxy.set("stall", only=("/sync/mutations/push",))
        a.add_observation(title="Stalled", content="while the server stalls", project=project)
        wait_until(lambda: proxy.faults["stall /sync/mutations/push"] >= 1)
        wait_until(lambda: "no answer" in str(loop_a.snapshot()["last_error"]), timeout=10)
        # 4. Recovery: everything arrives exactly once and B converges.
        proxy.set("pass")
        wait_until(lambda: b.search("while the server stalls", project=project), timeout=20)
        wait_until(lambda: canonical(a, project) == canonical(b, project), timeout=20)
        healthy = wait_until(
            lambda: (s := project_status(a, project, manager=loop_a))["phase"] == "healthy" and s
        )
        assert healthy["reason_code"] is None and healthy["consecutive_failures"] == 0
    no_duplicates(server)
    assert a.journal.count_pending(via_proxy.target, projects=[project]) == 0


def test_a_thousand_writes_while_the_server_fails_do_not_wait(
    shared_server: CloudServer, open_store: Callable[[str], Store], project: str
) -> None:
    server = shared_server
    baseline_store, a = open_store("baseline"), open_store("a")
    enroll(a, project=project)

    def thousand(store: Store, word: str) -> float:
        start = time.perf_counter()
        for i in range(1000):
            store.add_observation(title=f"{word} {i}", content=f"{word} body {i}", project=project)
        return time.perf_counter() - start

    baseline = thousand(baseline_store, "plain")
    with FaultProxy(server.port) as proxy:
        proxy.set("error")
        config = cloud_config(proxy.url)
        with autosync(a, config) as loop:
            # The writes start once the loop has failed (its first request can take longer
            # than the writes on a busy machine), and it is still failing when they end.
            wait_until(lambda: loop.snapshot()["consecutive_failures"] > 0)
            during = thousand(a, "failing")
            assert loop.snapshot()["consecutive_failures"] > 0  # it really failed meanwhile
            # A generous sanity bound only: the loop must not make writes wait for the network.
            assert during < baseline * 4 + 5, (during, baseline)
            proxy.set("pass")
            wait_until(lambda: len(server.mids(project)) == 1001, timeout=60)
    no_duplicates(server)
    assert a.journal.count_pending(config.target, projects=[project]) == 0


def test_server_killed_and_restarted_mid_push(
    server: CloudServer, proxy: FaultProxy, open_store: Callable[[str], Store]
) -> None:
    a, b = open_store("a"), open_store("b")
    enroll(a, b)
    for i in range(2000):
        a.add_observation(title=f"backlog {i}", content=f"backlog memory {i}", project="acme")
    proxy.delay_s = 0.3  # pushes take a while: the server dies while one is in flight
    config = cloud_config(proxy.url)
    with autosync(a, config) as loop:
        wait_until(lambda: len(server.mids("acme")) > 0, every=0.02)
        wait_until(lambda: proxy.in_flight("/sync/mutations/push"), every=0.01)
        server.kill()
        held = len(server.mids("acme"))
        assert 0 < held < 2001  # it died half-way
        wait_until(lambda: loop.snapshot()["reason_code"] == "transport_failed")
        proxy.delay_s = 0
        server.start()
        wait_until(lambda: len(server.mids("acme")) == 2001, timeout=60)
    with autosync(b, cloud_config(server.url)):
        wait_until(lambda: canonical(a) == canonical(b), timeout=60)
    no_duplicates(server)


def test_paused_forbidden_and_unauthorized_loops_report_their_reason(
    make_server: Callable[..., CloudServer], open_store: Callable[[str], Store]
) -> None:
    server = make_server(allowed="acme")
    a, b = open_store("a"), open_store("b")
    enroll(a, b)
    enroll(a, project="widgets")
    from engram.sync.cloud import refusals
    from engram.sync.cloud.config import save_cloud_config

    config = save_cloud_config(a.config.data_dir, server.url, TOKEN)
    server.admin("pause", "acme")
    with autosync(a, config) as loop, autosync(b, config):
        a.add_observation(title="Paused", content="waits for the resume", project="acme")
        a.add_observation(title="Forbidden", content="never allowed", project="widgets")
        wait_until(lambda: project_status(a, "acme", manager=loop)["reason_code"] == "paused")
        wait_until(
            lambda: project_status(a, "widgets", manager=loop)["reason_code"] == "policy_forbidden"
        )
        b.add_observation(title="From B", content="zebracorn", project="acme")
        # B tried to push it and was refused: the server never had it to hand to A.
        wait_until(
            lambda: (
                getattr(refusals.active(b, config.target, "acme"), "reason_code", None) == "paused"
            )
        )
        # A refused project is not a failing loop: pulls go on (acme is still pulled).
        assert loop.snapshot()["consecutive_failures"] == 0
        assert a.search("zebracorn", project="acme") == []  # B's push is paused too
        server.admin("resume", "acme")
        wait_until(lambda: a.search("zebracorn", project="acme"), timeout=20)
        wait_until(lambda: project_status(a, "acme", manager=loop)["reason_code"] is None, 20)
        wait_until(lambda: b.search("waits for the resume", project="acme"), timeout=20)
        assert project_status(a, "widgets", manager=loop)["reason_code"] == "policy_forbidden"
    wrong = CloudConfig(server_url=config.server_url, token="wrong-token")
    with autosync(a, wrong) as loop:
        a.add_observation(title="Unauthorized", content="refused token", project="acme")
        wait_until(lambda: loop.snapshot()["reason_code"] == "auth_required")
    assert project_status(a, "acme")["reason_code"] == "auth_required"
