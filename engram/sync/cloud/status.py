"""The cloud-sync status of one project, as ``GET /sync/status`` and ``engram cloud status``
report it (docs/cloud-sync.md, "What can go wrong, and what status says"), plus the pending and quarantined counts.

:func:`sync_status` lays a :class:`StatusSource`'s per-project snapshot over fixed defaults, so
every caller gets the same fields. :class:`CloudStatus` is the real source: it reads the cloud
configuration, the persisted sync state (written by whichever process holds the autosync lease,
or by an explicit ``engram sync --cloud``) and, when this process runs the autosync loop, its
live phase. Exactly one reason code explains what is wrong, in this order: configuration,
enrollment, the project refused by the server (paused, forbidden), the server or the network
(auth, transport), records the server rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from engram.times import iso

if TYPE_CHECKING:
    from engram.store import Store
    from engram.sync.cloud.autosync import Autosync

CLOUD_NOT_CONFIGURED = "cloud_not_configured"
CLOUD_CONFIG_ERROR = "cloud_config_error"
PROJECT_REQUIRED = "project_required"
QUARANTINED = "quarantined"
#: A project the server refused, or one not enrolled, has its own phase whatever the loop's.
PROJECT_PHASES = {
    "paused": "paused",
    "policy_forbidden": "refused",
    "blocked_unenrolled": "disabled",
}


class StatusSource(Protocol):
    """What a configured cloud client provides: its snapshot for one project, with any of the
    keys of :func:`sync_status` (``phase``, ``last_error``, ``consecutive_failures``,
    ``backoff_until``, ``last_sync_at``, ``reason_code``, ``reason_message``,
    ``deferred_count``, ``dead_count``, ``upgrade``, ``pending_count``,
    ``quarantined_count``). A source may also offer ``configured(store) -> bool``."""

    def status(self, store: Store, project: str) -> Mapping[str, Any]: ...


def _defaults(project: str) -> dict[str, Any]:
    return {
        "project": project,
        "enabled": False,
        "phase": "disabled",
        "last_error": None,
        "consecutive_failures": 0,
        "backoff_until": None,
        "last_sync_at": None,
        "reason_code": None,
        "reason_message": None,
        "deferred_count": 0,
        "dead_count": 0,
        "pending_count": 0,
        "quarantined_count": 0,
        "inbound_quarantined_count": 0,
        "upgrade": {"stage": None, "reason_code": None, "reason_message": None},
        #: The passes of the autosync loop running in this process ({"push": n, "pull": n}),
        #: whether or not it holds the lease this very moment (it lapses between renewals while
        #: a long poll waits): a loop that is alive but sends nothing (every project refused,
        #: say) still counts up.
        "loop_cycles": None,
    }


def not_configured_message() -> str:
    return (
        "cloud sync is not configured: no cloud server is set for this machine, so memories "
        "stay local (git sync still works); run 'engram cloud config --server URL'"
    )


def sync_status(
    store: Store, project: str, *, source: StatusSource | None = None
) -> dict[str, Any]:
    """The status fields of docs/cloud-sync.md, "What can go wrong, and what status says" for ``project`` ('' when none could be resolved).

    Without a (configured) ``source`` the cloud is not configured — that takes precedence; with
    one but no project the caller must name one (each project has its own cursor and
    enrollment).
    """
    status = _defaults(project)
    configured = getattr(source, "configured", None)
    if source is None or (configured is not None and not configured(store)):
        status.update(reason_code=CLOUD_NOT_CONFIGURED, reason_message=not_configured_message())
        return status
    if not project:
        status.update(
            reason_code=PROJECT_REQUIRED,
            reason_message="cloud sync status is per project: pass ?project=<name>",
        )
        return status
    snapshot = dict(source.status(store, project))
    upgrade = {**status["upgrade"], **dict(snapshot.pop("upgrade", None) or {})}
    status.update(enabled=True, phase="idle")
    status.update(snapshot, upgrade=upgrade)
    return status


class CloudStatus:
    """The status source of a configured machine; ``manager`` is this process's autosync loop,
    if it runs one."""

    def __init__(self, manager: Autosync | None = None, env: Mapping[str, str] | None = None):
        self.manager = manager
        self.env = env

    def configured(self, store: Store) -> bool:
        from engram.sync.cloud.config import CloudConfigError, load_cloud_config

        try:
            return load_cloud_config(store.config.data_dir, self.env).configured
        except CloudConfigError:
            return True  # configured, but wrongly: status() names the problem

    def status(self, store: Store, project: str) -> dict[str, Any]:
        return project_status(store, project, manager=self.manager, env=self.env)


def project_status(
    store: Store,
    project: str,
    *,
    manager: Autosync | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Everything known locally about ``project``'s cloud sync (no network)."""
    from engram.sync.cloud import refusals, state
    from engram.sync.cloud.config import CloudConfigError, load_cloud_config
    from engram.sync.cloud.sync import BLOCKED_UNENROLLED

    status = _defaults(project)
    status.pop("project")
    try:
        cloud = load_cloud_config(store.config.data_dir, env)
        problem = cloud.problem()
    except CloudConfigError as exc:
        return {**status, "reason_code": CLOUD_CONFIG_ERROR, "reason_message": str(exc)}
    if not cloud.configured:
        return {
            **status,
            "reason_code": CLOUD_NOT_CONFIGURED,
            "reason_message": not_configured_message(),
        }
    target = cloud.target
    enrolled = state.is_enrolled(store, project)
    persisted = state.read_state(store, target)
    row = state.project_row(store, target, project) or {}
    quarantined = state.quarantined_rows(store, target, project)
    live = manager.snapshot() if manager is not None else None
    # Only the loop holding the lease knows this project's live state.
    leading = live if live is not None and live["running"] and live["holds_lease"] else None
    refusal = refusals.active(store, target, project)
    status.update(
        enabled=enrolled,
        phase=(leading["phase"] if leading is not None else persisted.get("lifecycle")) or "idle",
        last_error=persisted.get("last_error"),
        consecutive_failures=int(persisted.get("consecutive_failures") or 0),
        backoff_until=persisted.get("backoff_until"),
        last_sync_at=persisted.get("last_sync_at"),
        dead_count=int(row.get("dead_count") or 0),
        pending_count=store.journal.count_pending(target, projects=[project]) if enrolled else 0,
        quarantined_count=len(quarantined),
        inbound_quarantined_count=sum(store.quarantine_counts([project])["inbound"].values()),
        upgrade={
            "stage": row.get("upgrade_stage"),
            "reason_code": row.get("upgrade_reason_code"),
            "reason_message": row.get("upgrade_reason_message"),
        },
        server=cloud.server_url,
        cursor=int(row.get("last_pulled_seq") or 0),
        last_push_at=row.get("last_push_at"),
        last_pull_at=row.get("last_pull_at"),
        autosync=_autosync_state(store, target, live),
        loop_cycles={"push": live["push_cycles"], "pull": live["pull_cycles"]}
        if live is not None and live["running"]
        else None,
        refusal=None
        if refusal is None
        else {
            "reason_code": refusal.reason_code,
            "stops": list(refusal.directions),
            "until": iso(refusal.until, milliseconds=True),
            "count": refusal.count,
            "message": refusals.describe(refusal, project),
        },
    )
    if leading is not None:
        for name in ("consecutive_failures", "backoff_until", "last_sync_at"):
            status[name] = leading[name] or status[name]
    reason: tuple[str | None, str | None] = (None, None)
    if problem:
        reason = (CLOUD_CONFIG_ERROR, problem)
    elif not enrolled:
        reason = (
            BLOCKED_UNENROLLED,
            f'project "{project}" is not enrolled for cloud sync: run '
            f"'engram cloud enroll {project}'",
        )
    elif row.get("reason_code"):
        reason = (row["reason_code"], row.get("reason_message"))
    elif persisted.get("reason_code"):
        reason = (persisted["reason_code"], persisted.get("reason_message"))
    elif quarantined:
        first = quarantined[0]
        reason = (
            QUARANTINED,
            f"{len(quarantined)} record(s) of {project} were rejected by the server and are kept "
            f"aside (first: {first['error_code']}: {first['error']}); fix the cause, then run "
            "'engram cloud repair'",
        )
    status["reason_code"], status["reason_message"] = reason
    if reason[0] in PROJECT_PHASES:
        # The loop may be healthy for the server while this project is stopped: the project's
        # own phase, never "healthy" beside reason_code "paused".
        status["phase"] = PROJECT_PHASES[reason[0]]
    return status


def lease_pid(owner: str | None) -> int | None:
    """The process id in an autosync lease owner (``autosync-<pid>-<random>``)."""
    parts = (owner or "").split("-")
    if len(parts) >= 3 and parts[0] == "autosync" and parts[1].isdigit():
        return int(parts[1])
    return None


def _autosync_state(store: Store, target: str, live: Mapping[str, Any] | None) -> str:
    """``running`` (this process syncs), ``standby`` (another process holds the lease here),
    ``elsewhere`` (another process syncs), or ``off``."""
    from engram.sync.cloud import state

    holder = state.lease_holder(store, target)
    if live is not None and live["running"]:
        return "running" if live["holds_lease"] else "standby"
    return "elsewhere" if holder else "off"
