"""Moving an existing project to the cloud: ``engram cloud upgrade doctor|bootstrap|status|
repair|rollback --project P``.

* **doctor** (read-only): configuration, reachability, authentication and the server's
  permission for the project, enrollment, pending and quarantined rows, rows that never got a
  journal entry. Answers ``ready`` or ``blocked`` with a class and a reason code.
* **bootstrap**: enroll, push everything, pull everything, then verify against the server's log
  that every local mutation of the project is there (a mid the server lacks is un-acknowledged
  and pushed again). Every step is idempotent, so running it again resumes an interrupted one;
  the stage reached (``bootstrap_enrolled``, ``bootstrap_pushed``, ``bootstrap_verified``;
  ``repair_applied``, ``rolled_back``) is kept per (server, project).
* **repair**: journal the rows that never got a mutation, put rejected rows back in the queue
  and push them again.
* **rollback**: unenroll and forget the project's cursor and state for this server. Local
  memories are never touched and no old database copy is restored (that would reuse the clock).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from engram.sync.cloud import state
from engram.sync.cloud.client import (
    AUTH_REQUIRED,
    POLICY_FORBIDDEN,
    CloudClient,
    CloudError,
)
from engram.sync.cloud.config import CloudConfig
from engram.sync.cloud.sync import CloudSync
from engram.sync.progress import ProgressFactory, no_progress

if TYPE_CHECKING:
    from engram.store import Store

VERIFY_FAILED = "verify_failed"
VERIFY_PAGE = 1000


@dataclass(slots=True)
class Check:
    name: str
    ok: bool
    message: str
    reason_code: str | None = None
    error_class: str | None = None  # blocked | policy | repairable


@dataclass(slots=True)
class DoctorReport:
    project: str
    checks: list[Check] = field(default_factory=list)
    pending: int = 0
    quarantined: int = 0
    unjournaled: int = 0

    @property
    def blocking(self) -> Check | None:
        return next((c for c in self.checks if not c.ok and c.error_class != "repairable"), None)

    @property
    def ready(self) -> bool:
        return self.blocking is None

    @property
    def first_problem(self) -> Check | None:
        return self.blocking or next((c for c in self.checks if not c.ok), None)

    def to_dict(self) -> dict[str, Any]:
        problem = self.first_problem
        return {
            "project": self.project,
            "status": "ready" if self.ready else "blocked",
            "class": problem.error_class if problem else "none",
            "reason_code": problem.reason_code if problem else None,
            "message": problem.message if problem else "ready to bootstrap",
            "pending": self.pending,
            "quarantined": self.quarantined,
            "unjournaled": self.unjournaled,
            "checks": [asdict(c) for c in self.checks],
        }


def _reason_class(reason: str) -> str:
    return {AUTH_REQUIRED: "policy", POLICY_FORBIDDEN: "policy"}.get(reason, "blocked")


def doctor(store: Store, project: str, cloud: CloudConfig) -> DoctorReport:
    """Diagnose without changing anything, locally or on the server."""
    report = DoctorReport(project)
    checks = report.checks
    if not cloud.configured:
        checks.append(
            Check(
                "config",
                False,
                "no cloud server configured: run 'engram cloud config --server URL'",
                "cloud_not_configured",
                "blocked",
            )
        )
        return report
    problem = cloud.problem()
    if problem:
        checks.append(Check("config", False, problem, "cloud_config_error", "blocked"))
        return report
    checks.append(Check("config", True, f"server {cloud.server_url}"))
    with CloudClient(cloud) as client:
        try:
            client.health()
            checks.append(Check("reachability", True, "the server answers"))
            who = client.whoami()
            checks.append(Check("auth", True, f"authenticated as {who.get('username') or '?'}"))
            allowed = who.get("projects")
            if allowed == "*" or (isinstance(allowed, list) and project in allowed):
                checks.append(Check("permission", True, f"the server accepts {project}"))
            else:
                checks.append(
                    Check(
                        "permission",
                        False,
                        f"the server does not allow project {project!r} for this token: ask the "
                        "admin to add it (ENGRAM_CLOUD_ALLOWED_PROJECTS or a grant)",
                        POLICY_FORBIDDEN,
                        "policy",
                    )
                )
        except CloudError as exc:
            name = "auth" if exc.reason_code == AUTH_REQUIRED else "reachability"
            checks.append(
                Check(name, False, str(exc), exc.reason_code, _reason_class(exc.reason_code))
            )
    target = cloud.target
    enrolled = state.is_enrolled(store, project)
    checks.append(
        Check(
            "enrollment",
            True,
            "enrolled" if enrolled else "not enrolled yet (bootstrap enrolls it)",
        )
    )
    report.pending = store.journal.count_pending(target, projects=[project])
    report.quarantined = len(state.quarantined_rows(store, target, project))
    report.unjournaled = sum(store.journal_unjournaled(project, dry_run=True).values())
    if report.unjournaled:
        checks.append(
            Check(
                "journal",
                False,
                f"{report.unjournaled} row(s) of {project} have no journal entry and would never "
                "sync: run 'engram cloud upgrade repair --project " + project + "'",
                "unjournaled_rows",
                "repairable",
            )
        )
    if report.quarantined:
        checks.append(
            Check(
                "quarantine",
                False,
                f"{report.quarantined} record(s) were rejected by the server: run "
                f"'engram cloud upgrade repair --project {project}' once the cause is fixed",
                "quarantined",
                "repairable",
            )
        )
    return report


# --- repair -------------------------------------------------------------------------------------


@dataclass(slots=True)
class RepairReport:
    project: str
    dry_run: bool
    journaled: dict[str, int]
    released: int
    pushed: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def repair(
    store: Store,
    project: str,
    cloud: CloudConfig,
    *,
    dry_run: bool = False,
    push: bool = True,
    progress: ProgressFactory = no_progress,
) -> RepairReport:
    """Journal never-journaled rows, release the project's quarantine, push once (when the
    project is enrolled)."""
    target = cloud.target
    if dry_run:
        return RepairReport(
            project,
            True,
            store.journal_unjournaled(project, dry_run=True),
            len(state.quarantined_rows(store, target, project)),
        )
    journaled = store.journal_unjournaled(project)
    released = state.release_quarantined(store, target, project)
    report = RepairReport(project, False, journaled, released)
    if push and state.is_enrolled(store, project):
        with CloudSync(store, cloud, progress=progress) as sync:
            report.pushed = sync.push_project(project).to_dict()
    state.update_project(
        store,
        target,
        project,
        upgrade_stage="repair_applied",
        upgrade_reason_code=None,
        upgrade_reason_message=None,
    )
    return report


# --- bootstrap ----------------------------------------------------------------------------------


@dataclass(slots=True)
class BootstrapReport:
    project: str
    stage: str = "planned"
    newly_enrolled: bool = False
    pushed: dict[str, Any] | None = None
    pulled: dict[str, Any] | None = None
    local_mutations: int = 0
    server_mutations: int = 0
    repushed: int = 0
    missing_on_server: int = 0
    missing_here: int = 0
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stage(
    store: Store,
    target: str,
    project: str,
    stage: str,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    state.update_project(
        store,
        target,
        project,
        upgrade_stage=stage,
        upgrade_reason_code=reason,
        upgrade_reason_message=message,
    )


def server_mids(client: CloudClient, project: str) -> set[str]:
    """Every mid the server's log holds for ``project``."""
    found: set[str] = set()
    since = 0
    while True:
        page = client.pull(since, [project], limit=VERIFY_PAGE)
        found.update(m["mid"] for m in page.mutations if isinstance(m, dict) and "mid" in m)
        since = page.next
        if not page.has_more:
            return found


def bootstrap(
    store: Store,
    project: str,
    cloud: CloudConfig,
    *,
    progress: ProgressFactory = no_progress,
    say: Callable[[str], None] = lambda _: None,
) -> BootstrapReport:
    """Enroll, push, pull, verify. Raises :class:`CloudError` when the server refuses; the
    stage reached is kept, and running it again picks up from there."""
    target = cloud.target
    report = BootstrapReport(project)
    report.newly_enrolled = state.enroll(store, project)
    _stage(store, target, project, "bootstrap_enrolled")
    report.stage = "bootstrap_enrolled"
    say(f"enrolled {project}")
    try:
        with CloudSync(store, cloud, progress=progress) as sync:
            pushed = sync.push_project(project)
            report.pushed = pushed.to_dict()
            if pushed.error:
                raise CloudError(
                    pushed.error["reason_code"], pushed.error["error"], project=project
                )
            _stage(store, target, project, "bootstrap_pushed")
            report.stage = "bootstrap_pushed"
            say(f"pushed {pushed.acknowledged} mutation(s)")
            pulled = sync.pull([project])[project]
            report.pulled = pulled.to_dict()
            say(f"pulled {pulled.received} mutation(s)")
            report.repushed = _verify(store, sync, project, report)
    except CloudError as exc:
        report.error = exc.to_dict()
        _stage(store, target, project, report.stage, exc.reason_code, str(exc))
        raise
    if report.missing_on_server or report.missing_here:
        message = (
            f"verification failed: {report.missing_on_server} local mutation(s) missing on the "
            f"server, {report.missing_here} server mutation(s) missing here; run bootstrap again"
        )
        _stage(store, target, project, report.stage, VERIFY_FAILED, message)
        report.error = {"reason_code": VERIFY_FAILED, "error": message}
        return report
    _stage(store, target, project, "bootstrap_verified")
    report.stage = "bootstrap_verified"
    say(f"verified: {report.local_mutations} local mutation(s) all on the server")
    return report


def _verify(store: Store, sync: CloudSync, project: str, report: BootstrapReport) -> int:
    """Compare local and server mids; re-push what the server lacks (once). Returns how many
    were pushed again."""
    target = sync.target
    repushed = 0
    for attempt in range(2):
        local = state.local_mids(store, target, project, include_personal=sync.include_personal)
        remote = server_mids(sync.client, project)
        missing = {mid: seq for mid, seq in local.items() if mid not in remote}
        report.local_mutations, report.server_mutations = len(local), len(remote)
        report.missing_here = len(remote - state.known_mids(store, remote))
        report.missing_on_server = len(missing)
        if not missing or attempt:
            return repushed
        # The server does not hold rows we believed delivered (e.g. its database was restored
        # from a backup): make them pending again and push them.
        state.forget_delivery(store, target, missing.values())
        repushed += sync.push_project(project).acknowledged
    return repushed


# --- rollback -----------------------------------------------------------------------------------


def rollback(store: Store, project: str, cloud: CloudConfig) -> dict[str, Any]:
    """Unenroll and forget this server's cursor and state for the project; local memories and
    the server's data stay as they are."""
    target = cloud.target
    was_enrolled = state.unenroll(store, project)
    forgot = state.forget_project(store, target, project)
    _stage(store, target, project, "rolled_back")
    return {"project": project, "unenrolled": was_enrolled, "forgot_cursor": forgot}


def upgrade_status(store: Store, project: str, cloud: CloudConfig) -> dict[str, Any]:
    row = state.project_row(store, cloud.target, project) or {}
    return {
        "project": project,
        "server": cloud.server_url,
        "stage": row.get("upgrade_stage") or "planned",
        "reason_code": row.get("upgrade_reason_code"),
        "reason_message": row.get("upgrade_reason_message"),
        "enrolled": state.is_enrolled(store, project),
        "cursor": int(row.get("last_pulled_seq") or 0),
        "pending": store.journal.count_pending(cloud.target, projects=[project]),
        "quarantined": len(state.quarantined_rows(store, cloud.target, project)),
    }
