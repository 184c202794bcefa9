"""Autosync: the background loop that keeps enrolled projects in sync with the cloud server while
``engram serve`` or ``engram mcp`` runs (``ENGRAM_CLOUD_AUTOSYNC=1``).

Two daemon threads share one store connection of their own (never the host's, so a local write
never waits for the loop's lock, and never for the network):

* the **pusher** wakes when a local write commits (the store's write listener sets an event:
  it never blocks) or when the journal grew through another process (checked every
  ``watch`` interval), waits ``debounce`` so a burst becomes one request, and pushes every
  pending row of the enrolled projects (:mod:`engram.sync.cloud.sync`). It also sends the
  heartbeat to the server's workers API.
* the **puller** long-polls ``GET /sync/mutations/pull?wait=…``: the server answers as soon as
  a teammate's push commits, so their memories appear here within a second.

Only the holder of the lease in ``sync_state`` syncs, so two local processes on one data
directory never sync at once; a holder that dies lets the lease expire (``lease`` seconds) and
another process takes over. Failures back off exponentially with jitter (docs/cloud-sync.md, "Autosync"), each
direction on its own, and are reported as a phase and a reason code (``auth_required``,
``policy_forbidden``, ``paused``, ``transport_failed`` …) in ``sync_state`` — which
``GET /sync/status`` and ``engram cloud status`` read.

A project the server refuses is not a failing loop: a 403 leaves its pushes and pulls alone, a
pause its pushes, for a wait that grows from minutes to an hour
(:mod:`engram.sync.cloud.refusals`), while other projects go on. The wait ends at once when
``engram sync --cloud`` gets through, when the project is enrolled again, or when the cloud
configuration changes — the loop re-reads ``cloud.json`` and picks up a new token.

Timings have environment overrides so tests run in seconds: ``ENGRAM_AUTOSYNC_DEBOUNCE_MS``,
``ENGRAM_AUTOSYNC_POLL_S``, ``ENGRAM_AUTOSYNC_WATCH_MS``, ``ENGRAM_AUTOSYNC_LEASE_S``,
``ENGRAM_AUTOSYNC_BACKOFF_BASE_MS``, ``ENGRAM_AUTOSYNC_BACKOFF_MAX_MS``,
``ENGRAM_AUTOSYNC_HEARTBEAT_S``, ``ENGRAM_AUTOSYNC_RESCAN_S``,
``ENGRAM_AUTOSYNC_REFUSED_BASE_S``, ``ENGRAM_AUTOSYNC_REFUSED_MAX_S``.

Size: over 500 lines on purpose: one loop's state machine (push, pull, lease, backoff,
heartbeat); refusals and status already live in refusals.py and status.py.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram import __version__, settings
from engram.errors import EngramError
from engram.sync.cloud import refusals, state
from engram.sync.cloud.client import (
    POLICY_FORBIDDEN,
    CloudClient,
    CloudError,
)
from engram.sync.cloud.config import CloudConfig, CloudConfigError, load_cloud_config
from engram.sync.cloud.sync import CloudSync
from engram.terminal import for_terminal
from engram.times import iso

if TYPE_CHECKING:
    from engram.settings import Config
    from engram.store import Store

ENABLE_ENV = "ENGRAM_CLOUD_AUTOSYNC"
#: While healthy, ``last_sync_at`` is written to the database at most this often (seconds).
PERSIST_HEALTHY_EVERY = 5.0
INTERNAL_ERROR = "internal_error"

# Phases (docs/cloud-sync.md, "Autosync"): idle, pushing, pulling, healthy, push_failed, pull_failed, backoff,
# disabled.
IDLE, PUSHING, PULLING, HEALTHY = "idle", "pushing", "pulling", "healthy"
PUSH_FAILED, PULL_FAILED, BACKOFF, DISABLED = "push_failed", "pull_failed", "backoff", "disabled"


def _env_number(env: Mapping[str, str], name: str, default: float, scale: float = 1.0) -> float:
    raw = settings.raw(name, env)
    if not raw:
        return default
    try:
        value = float(raw) * scale
    except ValueError:
        raise CloudConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < 0:
        raise CloudConfigError(f"{name} must not be negative, got {raw!r}")
    return value


@dataclass(frozen=True, slots=True)
class Timings:
    """The loop's timings, in seconds (defaults from docs/cloud-sync.md, "Autosync")."""

    debounce: float = 0.5
    poll: float = 25.0  # long-poll wait per pull (the server caps it at 30 s)
    watch: float = 1.0  # how often the journal is checked for writes of other processes
    lease: float = 60.0
    backoff_base: float = 1.0
    backoff_max: float = 300.0
    heartbeat: float = 60.0
    rescan: float = 60.0  # full pending scan (else only rows newer than the last clean push)
    max_failures: int = 10
    refused_base: float = refusals.DEFAULT_BASE_S  # first wait after a 403 / pause
    refused_max: float = refusals.DEFAULT_MAX_S

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Timings:
        env = os.environ if env is None else env
        d = cls()
        return cls(
            debounce=_env_number(env, "ENGRAM_AUTOSYNC_DEBOUNCE_MS", d.debounce, 0.001),
            poll=min(_env_number(env, "ENGRAM_AUTOSYNC_POLL_S", d.poll), 30.0),
            watch=max(_env_number(env, "ENGRAM_AUTOSYNC_WATCH_MS", d.watch, 0.001), 0.01),
            lease=max(_env_number(env, "ENGRAM_AUTOSYNC_LEASE_S", d.lease), 1.0),
            backoff_base=_env_number(env, "ENGRAM_AUTOSYNC_BACKOFF_BASE_MS", d.backoff_base, 0.001),
            backoff_max=_env_number(env, "ENGRAM_AUTOSYNC_BACKOFF_MAX_MS", d.backoff_max, 0.001),
            heartbeat=_env_number(env, "ENGRAM_AUTOSYNC_HEARTBEAT_S", d.heartbeat),
            rescan=_env_number(env, "ENGRAM_AUTOSYNC_RESCAN_S", d.rescan),
            refused_base=_env_number(env, "ENGRAM_AUTOSYNC_REFUSED_BASE_S", d.refused_base),
            refused_max=_env_number(env, "ENGRAM_AUTOSYNC_REFUSED_MAX_S", d.refused_max),
        )

    @property
    def refusal_backoff(self) -> refusals.Backoff:
        return refusals.Backoff(self.refused_base, max(self.refused_base, self.refused_max))


def backoff_delay(
    failures: int, base: float, ceiling: float, rand: Callable[[], float] = random.random
) -> float:
    """docs/cloud-sync.md, "Autosync": ``base`` doubled per failure after the first (saturating at
    ``ceiling``), plus jitter uniform in ±25 %, capped at ``ceiling``, at least ``base / 2``."""
    if failures <= 0:
        return base
    delay = base
    for _ in range(failures - 1):
        delay = min(delay * 2, ceiling)
        if delay >= ceiling:
            break
    jitter = (rand() * 2 - 1) * delay / 4
    return max(min(delay + jitter, ceiling), base / 2)


def _say(message: str) -> None:
    # stderr only: for `engram mcp`, stdout is the protocol channel. Messages can quote the
    # server, so they are escaped for the terminal `engram serve` runs in.
    sys.stderr.write(f"[autosync] {for_terminal(message)}\n")
    sys.stderr.flush()


class _Direction:
    """Failure bookkeeping of one direction (push or pull)."""

    def __init__(self) -> None:
        self.failures = 0
        self.retry_at = 0.0  # time.monotonic() before which this direction waits
        self.backoff_until: str | None = None  # the same, as a wall-clock time for status
        self.error: CloudError | None = None


class Autosync:
    """The loop for one store and one server. ``start()`` / ``stop()``; ``notify_dirty`` is the
    store write listener."""

    def __init__(
        self,
        db_path: Path,
        app_config: Config,
        cloud: CloudConfig,
        timings: Timings | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.db_path = db_path
        self.app_config = app_config
        self.env = env  # where the configuration came from, to notice when it changes
        self.cloud = cloud.require()
        self.target = cloud.target
        self.timings = timings or Timings.from_env()
        self.owner = f"autosync-{os.getpid()}-{secrets.token_hex(4)}"
        self.phase = IDLE
        self.last_sync_at: str | None = None
        self.last_push_at: str | None = None
        self.last_pull_at: str | None = None
        #: Passes each thread made: a push cycle looked at every enrolled project (pushing what
        #: it may), a pull cycle got an answer to its long-poll (or a refusal). Each is written
        #: by its own thread only. They show a loop that is alive but sends nothing (every
        #: project refused, say) and let a caller wait for "N more passes" instead of a time.
        self.push_cycles = 0
        self.pull_cycles = 0
        self._dirty = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        #: Held while the configuration is swapped and while a pull's answer is recorded: an
        #: answer to a request sent with the old token never lands after the swap.
        self._config_lock = threading.Lock()
        self._push = _Direction()
        self._pull = _Direction()
        self._lease_until = 0.0  # monotonic: renew before this
        self._holds_lease = False
        self._store: Store | None = None
        self._threads: list[threading.Thread] = []
        self._running = 0
        self._scan_from = 0
        self._scan_enrolled: tuple[str, ...] = ()
        self._next_rescan = 0.0
        self._next_heartbeat = 0.0
        self._journal_top = -1
        self._clients: dict[str, CloudClient] = {}  # one per thread
        self._client_config: dict[str, CloudConfig] = {}  # the config each client was made for
        self._config_stamp = self._stamp()
        self._said_restart = False
        self._persisted: str | None = None  # the phase last written to sync_state
        self._persist_after = 0.0
        self.last_heartbeat_error: str | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def notify_dirty(self) -> None:
        """Called after every committed local write: set a flag and return (never blocks)."""
        self._dirty.set()

    @property
    def running(self) -> bool:
        return self._running > 0 and not self._stopping.is_set()

    @property
    def holds_lease(self) -> bool:
        return self._holds_lease and time.monotonic() < self._lease_until

    def start(self) -> None:
        from engram.store import Store

        if self._threads:
            return  # re-entrant start is a no-op
        self._store = Store.open(self.db_path, config=self.app_config)
        self._dirty.set()  # push any backlog left from before
        for name, body in (("push", self._push_loop), ("pull", self._pull_loop)):
            thread = threading.Thread(
                target=self._guard, args=(body,), name=f"engram-autosync-{name}"
            )
            thread.daemon = True
            self._threads.append(thread)
        self._running = len(self._threads)
        for thread in self._threads:
            thread.start()
        _say(f"started: {self.cloud.server_url} (owner {self.owner})")

    def stop(self, timeout: float = 3.0) -> None:
        """Stop the loop. The pusher finishes its request; a long-poll in flight cannot be
        interrupted, so the puller is not waited for: it is a daemon thread that exits (and
        closes the loop's store) when its request returns, applying nothing more."""
        if not self._threads or self._stopping.is_set():
            return
        self._stopping.set()
        self._dirty.set()
        pusher, puller = self._threads
        pusher.join(timeout)
        puller.join(0.2)
        store = self._store
        if store is not None:
            with contextlib.suppress(Exception):
                state.release_lease(store, self.target, self.owner)
        self._holds_lease = False
        _say("stopped")

    def _guard(self, body: Callable[[], None]) -> None:
        try:
            body()
        finally:
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last:
                for client in self._clients.values():
                    client.close()
                if self._store is not None:
                    with contextlib.suppress(Exception):
                        state.release_lease(self._store, self.target, self.owner)
                    self._store.close()

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopping; whether to go on."""
        return not self._stopping.wait(max(0.0, seconds))

    # --- lease --------------------------------------------------------------------------------

    def _lease(self) -> bool:
        """Hold (or renew) the lease; renewed when half its time is gone."""
        with self._lock:
            now = time.monotonic()
            if self._holds_lease and now < self._lease_until - self.timings.lease / 2:
                return True
            assert self._store is not None
            held = state.acquire_lease(self._store, self.target, self.owner, self.timings.lease)
            if held and not self._holds_lease:
                _say(f"holding the sync lease of {self.target}")
            self._holds_lease = held
            self._lease_until = now + self.timings.lease if held else 0.0
            return held

    # --- the pusher ---------------------------------------------------------------------------

    def _journal_grew(self) -> bool:
        assert self._store is not None
        top = state.journal_top(self._store)
        grew = top != self._journal_top
        self._journal_top = top
        return grew

    def _push_loop(self) -> None:
        pending = True  # push what was left from before at start-up
        while not self._stopping.is_set():
            woke = self._dirty.wait(self.timings.watch)
            if self._stopping.is_set():
                return
            try:
                if woke or self._journal_grew():
                    pending = True
                    if woke and self.timings.debounce and not self._sleep(self.timings.debounce):
                        return
                    self._dirty.clear()
                self._check_config()
                now = time.monotonic()
                if pending and now >= self._push.retry_at and self._lease():
                    pending = not self._push_cycle()
                    self.push_cycles += 1
                self._maybe_heartbeat()
            except Exception as exc:  # a bug must not kill the loop: report it, back off
                if self._stopping.is_set():
                    return
                self._internal_error(self._push, PUSH_FAILED, exc)
                pending = True

    def _push_cycle(self) -> bool:
        """Push every enrolled project's pending rows; whether everything went out."""
        store = self._store
        assert store is not None
        enrolled = tuple(state.enrolled_projects(store))
        now = time.monotonic()
        if enrolled != self._scan_enrolled or now >= self._next_rescan:
            self._scan_from, self._scan_enrolled = 0, enrolled
            self._next_rescan = now + self.timings.rescan
        if not enrolled:
            return True
        top = state.journal_top(store)
        complete = True
        self._set_phase(PUSHING)
        try:
            with CloudSync(
                store,
                self.cloud,
                client=self._client("push"),
                backoff=self.timings.refusal_backoff,
            ) as sync:
                for project in enrolled:
                    if refusals.waiting(store, self.target, project, "push") is not None:
                        complete = False  # refused by the server: left alone for a while
                        continue
                    report = sync.push_project(project, after_seq=self._scan_from)
                    if report.error is not None:
                        complete = False
                        _say(
                            f"push of {project} blocked: {report.error['error']} (next try "
                            f"at {report.error.get('retry_at')})"
                        )
                    if report.unconfirmed:
                        complete = False
                    if report.sent:
                        self.last_push_at = iso(state.utc_now(), milliseconds=True)
        except CloudError as exc:
            self._failed(self._push, PUSH_FAILED, exc)
            return False
        if complete:
            self._scan_from = top
        self._succeeded(self._push)
        return complete

    def _client(self, name: str) -> CloudClient:
        """The thread's HTTP client (kept open: its connections are reused), made anew when the
        configuration changed (a new token)."""
        current = self._clients.get(name)
        if current is not None and self._client_config.get(name) is not self.cloud:
            current.close()
            current = None
        if current is None:
            current = self._clients[name] = CloudClient(self.cloud)
            self._client_config[name] = self.cloud
        return current

    # --- configuration changes ----------------------------------------------------------------

    def _stamp(self) -> tuple[object, ...]:
        """What identifies the configuration on disk and in the environment right now."""
        path = self.cloud.path
        try:
            info = path.stat() if path is not None else None
        except OSError:
            info = None
        stat = (info.st_mtime_ns, info.st_size, info.st_ino) if info is not None else None
        return (
            stat,
            settings.raw("ENGRAM_CLOUD_SERVER", self.env),
            settings.raw("ENGRAM_CLOUD_TOKEN", self.env),
        )

    def _check_config(self) -> None:
        """A changed ``cloud.json`` (``engram cloud config``): use the new token, and ask the
        server again at once about every project it refused."""
        stamp = self._stamp()
        if stamp == self._config_stamp:
            return
        self._config_stamp = stamp
        try:
            fresh = load_cloud_config(self.app_config.data_dir, self.env)
            fresh.require()
        except (CloudConfigError, EngramError) as exc:
            _say(f"the cloud configuration changed but cannot be used ({exc}); keeping the old")
            return
        if fresh.target != self.target:
            if not self._said_restart:
                _say(f"the cloud server is now {fresh.server_url}: restart to sync with it")
                self._said_restart = True
            return
        store = self._store
        assert store is not None
        with self._config_lock:
            self.cloud = fresh
            cleared = refusals.clear(store, self.target)
            self._push.retry_at = self._pull.retry_at = 0.0
        self._dirty.set()
        _say(
            "the cloud configuration changed: using it"
            + (f"; asking again about {cleared} refused project(s)" if cleared else "")
        )

    def _maybe_heartbeat(self) -> None:
        now = time.monotonic()
        if now < self._next_heartbeat or not self.holds_lease:
            return
        self._next_heartbeat = now + self.timings.heartbeat
        store = self._store
        assert store is not None
        projects = state.enrolled_projects(store)
        body = {
            "origin": store.origin,
            "hostname": socket.gethostname() or "unknown",
            "version": __version__,
            "projects": projects,
            "pending": store.journal.count_pending(self.target, projects=projects),
            "quarantined": len(store.journal.quarantined(self.target)),
            "last_push_at": self.last_push_at,
            "last_pull_at": self.last_pull_at,
            "push_cycles": self.push_cycles,
            "pull_cycles": self.pull_cycles,
        }
        try:
            self._client("push").heartbeat(body)
            self.last_heartbeat_error = None
        except CloudError as exc:
            # Heartbeats are informative only: a failure is a note, never a sync failure.
            self.last_heartbeat_error = str(exc)

    # --- the puller ---------------------------------------------------------------------------

    def _pull_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                wait = self._pull.retry_at - time.monotonic()
                if wait > 0:
                    if not self._sleep(wait):
                        return
                    continue
                if not self._lease():
                    if not self._sleep(min(self.timings.lease / 4, 5.0)):
                        return
                    continue
                projects = self._pull_projects()
                if not projects:
                    if not self._sleep(self.timings.watch):
                        return
                    continue
                self._pull_cycle(projects)
                self.pull_cycles += 1
            except Exception as exc:  # a bug must not kill the loop: report it, back off
                if self._stopping.is_set():
                    return
                self._internal_error(self._pull, PULL_FAILED, exc)

    def _pull_projects(self) -> list[str]:
        store = self._store
        assert store is not None
        return [
            p
            for p in state.enrolled_projects(store)
            if refusals.waiting(store, self.target, p, "pull") is None
        ]

    def _pull_cycle(self, projects: list[str]) -> None:
        store = self._store
        assert store is not None

        def on_page(count: int) -> None:
            if count:
                self._set_phase(PULLING)

        config = self.cloud
        try:
            with CloudSync(store, config, client=self._client("pull")) as sync:
                reports = sync.pull(
                    projects,
                    wait=self.timings.poll,
                    max_pages=20,
                    on_page=on_page,
                    cancelled=self._stopping.is_set,
                )
        except CloudError as exc:
            with self._config_lock:
                if self.cloud is not config:
                    # The configuration changed while the long-poll was out: its refusal or
                    # failure concerns the old token; the next pull asks with the new one.
                    return
                if exc.reason_code == POLICY_FORBIDDEN:
                    self._forbidden_pull(projects, exc)
                    return
                self._failed(self._pull, PULL_FAILED, exc)
            return
        if self._stopping.is_set():
            return
        self.last_pull_at = iso(state.utc_now(), milliseconds=True)
        if any(r.dead for r in reports.values()):
            _say(f"{sum(r.dead for r in reports.values())} pulled record(s) could not be applied")
        self._succeeded(self._pull)

    def _forbidden_pull(self, projects: list[str], exc: CloudError) -> None:
        """A 403 names the forbidden projects: leave them alone for a growing while (pushes
        too), pull the others."""
        store = self._store
        assert store is not None
        named = [p for p in exc.projects if p in projects] or (
            projects if len(projects) == 1 else []
        )
        if not named:
            self._failed(self._pull, PULL_FAILED, exc)
            return
        for project in named:
            refusal = refusals.note(
                store,
                self.target,
                project,
                POLICY_FORBIDDEN,
                str(exc),
                self.timings.refusal_backoff,
            )
        _say(
            f"pull refused for {', '.join(named)}: {exc} (next try at {iso(refusal.until, milliseconds=True)})"
        )

    # --- status bookkeeping -------------------------------------------------------------------

    def _set_phase(self, phase: str) -> None:
        self.phase = phase

    def _failed(self, direction: _Direction, phase: str, exc: CloudError) -> None:
        store = self._store
        assert store is not None
        first = direction.failures == 0 or (
            direction.error is not None and direction.error.reason_code != exc.reason_code
        )
        direction.failures += 1
        direction.error = exc
        delay = backoff_delay(
            direction.failures, self.timings.backoff_base, self.timings.backoff_max
        )
        direction.retry_at = time.monotonic() + delay
        direction.backoff_until = iso(state.utc_now() + timedelta(seconds=delay), milliseconds=True)
        failures = max(self._push.failures, self._pull.failures)
        self.phase = BACKOFF if failures >= self.timings.max_failures else phase
        if first:
            _say(f"{phase.replace('_', ' ')} ({exc.reason_code}): {exc}")
        self._persisted = self.phase
        state.write_state(
            store,
            self.target,
            lifecycle=self.phase,
            consecutive_failures=failures,
            backoff_until=direction.backoff_until,
            last_error=str(exc),
            reason_code=exc.reason_code,
            reason_message=str(exc),
        )

    def _internal_error(self, direction: _Direction, phase: str, exc: Exception) -> None:
        """Anything but a cloud failure: the local store refusing (locked, read-only) is said in
        one line; a bug also gets its traceback. Either way the loop backs off and goes on."""
        if isinstance(exc, EngramError):
            error = CloudError(INTERNAL_ERROR, f"local store problem in the sync loop: {exc}")
        else:
            import traceback

            traceback.print_exc(file=sys.stderr)
            error = CloudError(INTERNAL_ERROR, f"internal error in the sync loop: {exc!r}")
        with contextlib.suppress(Exception):
            self._failed(direction, phase, error)
        # without a store write (failed above), still wait before retrying
        direction.retry_at = max(direction.retry_at, time.monotonic() + self.timings.backoff_base)
        self._sleep(min(self.timings.backoff_base, 1.0))

    def _succeeded(self, direction: _Direction) -> None:
        store = self._store
        assert store is not None
        recovered = direction.failures > 0
        direction.failures = 0
        direction.error = None
        direction.retry_at = 0.0
        direction.backoff_until = None
        other = self._pull if direction is self._push else self._push
        self.last_sync_at = iso(state.utc_now(), milliseconds=True)
        if other.failures:
            self.phase = PULL_FAILED if other is self._pull else PUSH_FAILED
            state.write_state(
                store,
                self.target,
                consecutive_failures=other.failures,
                last_sync_at=self.last_sync_at,
            )
            return
        self.phase = HEALTHY
        if recovered:
            _say("recovered: in sync again")
        now = time.monotonic()
        if not recovered and self._persisted == HEALTHY and now < self._persist_after:
            return  # healthy and said so recently: no write per cycle (snapshot() is live)
        self._persisted, self._persist_after = HEALTHY, now + PERSIST_HEALTHY_EVERY
        state.write_state(
            store,
            self.target,
            lifecycle=HEALTHY,
            consecutive_failures=0,
            backoff_until=None,
            last_error=None,
            reason_code=None,
            reason_message=None,
            last_sync_at=self.last_sync_at,
        )

    def snapshot(self) -> dict[str, Any]:
        """The live state of this process's loop."""
        errors = [d.error for d in (self._push, self._pull) if d.error is not None]
        until = [d.backoff_until for d in (self._push, self._pull) if d.backoff_until]
        return {
            "running": self.running,
            "owner": self.owner,
            "holds_lease": self.holds_lease,
            "phase": self.phase if self.running else DISABLED,
            "consecutive_failures": max(self._push.failures, self._pull.failures),
            "backoff_until": max(until) if until else None,
            "last_error": str(errors[-1]) if errors else None,
            "reason_code": errors[-1].reason_code if errors else None,
            "last_sync_at": self.last_sync_at,
            "last_push_at": self.last_push_at,
            "last_pull_at": self.last_pull_at,
            "push_cycles": self.push_cycles,
            "pull_cycles": self.pull_cycles,
        }


# --- wiring into the long-lived processes -----------------------------------------------------


def autosync_from_env(store: Store, env: Mapping[str, str] | None = None) -> Autosync | None:
    """The loop for ``store`` when ``ENGRAM_CLOUD_AUTOSYNC=1`` and the cloud is configured, with
    its write listener attached; else None (an ``[autosync] ERROR`` line says why when it was
    asked for but cannot run — the process goes on without it)."""
    env = os.environ if env is None else env
    if settings.raw(ENABLE_ENV, env) != "1":
        return None
    try:
        cloud = load_cloud_config(store.config.data_dir, env)
        if not cloud.configured:
            _say(
                "ERROR: ENGRAM_CLOUD_AUTOSYNC=1 but no cloud server is configured (set "
                "ENGRAM_CLOUD_SERVER or run 'engram cloud config --server URL'); "
                "autosync is off"
            )
            return None
        cloud.require()
        timings = Timings.from_env(env)
    except CloudConfigError as exc:
        _say(f"ERROR: {exc}; autosync is off")
        return None
    if not cloud.token:
        _say("no token configured (ENGRAM_CLOUD_TOKEN): fine for an insecure local server only")
    manager = Autosync(store.path, store.config, cloud, timings, env)
    store.add_write_listener(manager.notify_dirty)
    return manager


class AutosyncService:
    """``engram serve``'s background service (``start``/``stop`` around the app's life)."""

    def __init__(self, manager: Autosync) -> None:
        self.manager = manager

    async def start(self) -> None:
        self.manager.start()

    async def stop(self) -> None:
        import anyio

        await anyio.to_thread.run_sync(self.manager.stop)


@contextlib.asynccontextmanager
async def autosync_running(manager: Autosync) -> AsyncIterator[Autosync]:
    """``engram mcp``'s background service: the loop runs while the client is connected."""
    service = AutosyncService(manager)
    await service.start()
    try:
        yield manager
    finally:
        await service.stop()
