"""A project the server refuses is left alone for a growing while (issue 13, "autosync retry
storm"): a 403 stops its pushes and pulls, a pause its pushes only; ``engram cloud status``
says so; ``engram sync --cloud`` and a configuration change ask again at once. Against a real
``engram cloud serve`` with managed users; the loop runs in this process (its state is read
directly), the commands as real ``engram`` processes on the same data directory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import orjson
import psycopg

from engram.store import Store
from engram.sync.cloud import refusals
from engram.sync.cloud import state as cloud_state
from engram.sync.cloud.autosync import Timings
from engram.sync.cloud.config import save_cloud_config
from tests.support import free_port, run_engram
from tests.support.sync_cloud import CloudServer, enroll, wait_cycles, wait_until
from tests.sync.cloud.proxy import FaultProxy
from tests.sync.cloud.test_autosync import FAST, autosync

#: A refused project waits a minute here (two, four… in production): long enough that any retry
#: during a test is the loop ignoring its backoff.
PATIENT = replace(FAST, poll=1, refused_base=60, refused_max=600)


def user_token(server: CloudServer, name: str, *projects: str) -> str:
    server.admin("create-user", name)
    if projects:
        server.admin("grant", name, *projects)
    return orjson.loads(server.admin("issue-token", name, "--json").stdout)["raw_token"]


def refused_pushes(server: CloudServer, project: str) -> int:
    with psycopg.connect(server.db_url.replace("+psycopg", "")) as conn:
        row = conn.execute(
            """SELECT count(*) FROM cloud_sync_audit_log
               WHERE outcome = 'rejected_forbidden' AND project = %s""",
            (project,),
        ).fetchone()
    return int(row[0]) if row else 0


def cli(home: Path, *args: str):
    return run_engram(*args, data_dir=home, env={"ENGRAM_PORT": str(free_port())})


def test_backoff_doubles_up_to_its_ceiling() -> None:
    backoff = refusals.Backoff(120, 3600)
    waits = [backoff.delay(n) for n in range(1, 9)]
    for wait, expected in zip(waits, (120, 240, 480, 960, 1920, 3600, 3600, 3600), strict=True):
        assert expected <= wait <= expected * 1.1
    assert Timings.from_env({}).refusal_backoff == refusals.Backoff(120, 3600)
    env = {"ENGRAM_AUTOSYNC_REFUSED_BASE_S": "5", "ENGRAM_AUTOSYNC_REFUSED_MAX_S": "50"}
    assert Timings.from_env(env).refusal_backoff == refusals.Backoff(5, 50)


def test_a_forbidden_project_is_left_alone_until_sync_or_a_grant_says_otherwise(
    make_server: Callable[..., CloudServer], open_store: Callable[[str], Store], tmp_path: Path
) -> None:
    server = make_server(allowed="acme,widgets")
    bob = user_token(server, "bob", "acme")
    store = open_store("bob")
    home = store.config.data_dir
    enroll(store, project="acme")
    enroll(store, project="widgets")
    config = save_cloud_config(home, server.url, bob)
    store.add_observation(title="Acme note", content="allowed", project="acme")
    store.add_observation(title="Widget note", content="not granted", project="widgets")
    with autosync(store, config, PATIENT) as loop:
        target = loop.target
        refusal = wait_until(lambda: refusals.active(store, target, "widgets"))
        assert refusal.reason_code == "policy_forbidden" and refusal.stops("pull")
        wait_until(lambda: len(server.mids("acme")) == 2)  # the other project goes on
        # The push and the pull that were under way come back; later pulls leave it out.
        wait_cycles(loop, push=1, pull=1)
        settled = refusals.active(store, target, "widgets")
        before = refused_pushes(server, "widgets")
        assert settled.count <= 2 and before <= 1  # at most once per direction
        for i in range(3):  # local writes and several loop cycles later…
            store.add_observation(title=f"Widget {i}", content="still refused", project="widgets")
            wait_cycles(loop, push=2)  # a whole push cycle after the write skipped it
        wait_cycles(loop, pull=2)  # and pulls (poll: 1 s) went on without it
        # …nobody asked the server again: the old loop retried every poll (25 s) forever, each
        # push writing an audit row.
        assert refusals.active(store, target, "widgets") == settled
        assert refused_pushes(server, "widgets") == before
        status = orjson.loads(cli(home, "cloud", "status", "--project", "widgets", "--json").stdout)
        assert status["sync"]["refusal"]["stops"] == ["push", "pull"]
        human = cli(home, "cloud", "status", "--project", "widgets", "--offline").stdout
        assert "Server refusal: the server refused pushes and pulls of 'widgets'" in human
        assert "'engram sync --cloud --project widgets' retries now" in human

        # engram sync --cloud tries at once, whatever the wait: refused again, the wait grows.
        again = cli(home, "sync", "--cloud", "--project", "widgets")
        assert again.returncode == 1 and "policy_forbidden" in again.stderr
        assert refused_pushes(server, "widgets") == before + 1
        second = refusals.active(store, target, "widgets")
        assert second.count == settled.count + 1 and second.until > settled.until

        # The admin grants the project; the user's next explicit sync gets through and the loop
        # takes the project back at once (pushes and pulls).
        server.admin("grant", "bob", "widgets")
        pushed = cli(home, "sync", "--cloud", "--project", "widgets")
        assert pushed.returncode == 0, pushed.stderr
        assert refusals.active(store, target, "widgets") is None
        assert cloud_state.project_row(store, target, "widgets")["reason_code"] is None
        teammate = user_token(server, "carol", "widgets")
        other = open_store("carol")
        enroll(other, project="widgets")
        with autosync(other, save_cloud_config(other.config.data_dir, server.url, teammate)):
            other.add_observation(title="From Carol", content="zebracorn", project="widgets")
            wait_until(lambda: store.search("zebracorn", project="widgets"), timeout=20)


def test_a_new_token_in_cloud_config_ends_the_wait(
    make_server: Callable[..., CloudServer], open_store: Callable[[str], Store]
) -> None:
    server = make_server(allowed="acme,widgets")
    store = open_store("dave")
    home = store.config.data_dir
    enroll(store, project="widgets")
    config = save_cloud_config(home, server.url, user_token(server, "dave", "acme"))
    store.add_observation(title="Widget note", content="needs the right token", project="widgets")
    with autosync(store, config, PATIENT) as loop:
        wait_until(lambda: refusals.active(store, loop.target, "widgets"))
        new = user_token(server, "dave2", "widgets")
        changed = cli(home, "cloud", "config", "--server", server.url, "--token", new)
        assert changed.returncode == 0, changed.stderr
        wait_until(lambda: len(server.mids("widgets")) == 2, timeout=20)  # session + memory
        assert refusals.active(store, loop.target, "widgets") is None


def test_a_refusal_of_the_old_token_arriving_after_a_new_one_is_set_is_ignored(
    make_server: Callable[..., CloudServer], open_store: Callable[[str], Store]
) -> None:
    server = make_server(allowed="acme,widgets")
    store = open_store("erin")
    home = store.config.data_dir
    enroll(store, project="widgets")
    with FaultProxy(server.port) as proxy:
        proxy.hold("/sync/mutations/pull")
        config = save_cloud_config(home, proxy.url, user_token(server, "erin", "acme"))
        with autosync(store, config, PATIENT) as loop:
            # A pull asked with the old token is out when the new token is set.
            wait_until(lambda: proxy.in_flight("/sync/mutations/pull"))
            new = user_token(server, "erin2", "widgets")
            save_cloud_config(home, proxy.url, new)
            wait_until(lambda: loop.cloud.token == new)
            proxy.release()  # its 403 arrives now: it says nothing about the new token
            wait_until(lambda: proxy.requests["/sync/mutations/pull"] >= 2)
            assert refusals.active(store, loop.target, "widgets") is None


def test_a_pause_backs_off_pushes_only(
    make_server: Callable[..., CloudServer], open_store: Callable[[str], Store]
) -> None:
    server = make_server(allowed="acme")
    a, b = open_store("a"), open_store("b")
    enroll(a, b)
    config_a = save_cloud_config(a.config.data_dir, server.url, server.token)
    config_b = save_cloud_config(b.config.data_dir, server.url, server.token)
    b.add_observation(title="Before", content="already on the server", project="acme")
    with autosync(b, config_b):
        wait_until(lambda: len(server.mids("acme")) == 2)
    server.admin("pause", "acme")
    with autosync(a, config_a, PATIENT) as loop:
        a.add_observation(title="Paused", content="waits for the resume", project="acme")
        refusal = wait_until(lambda: refusals.active(a, loop.target, "acme"))
        assert refusal.reason_code == "paused" and refusal.directions == ("push",)
        # Pulls of the paused project go on: B's memory arrives.
        wait_until(lambda: a.search("already on the server", project="acme"), timeout=20)
        server.admin("resume", "acme")
        wait_cycles(loop, push=3)  # whole push cycles after the resume
        live = loop.snapshot()  # the passes show in the loop's live state
        assert live["push_cycles"] >= 3 and live["pull_cycles"] >= 1
        assert len(server.mids("acme")) == 2  # still waiting: the loop does not poll the pause
        resumed = cli(a.config.data_dir, "sync", "--cloud", "--project", "acme")
        assert resumed.returncode == 0, resumed.stderr
        assert len(server.mids("acme")) == 4
        assert refusals.active(a, loop.target, "acme") is None
