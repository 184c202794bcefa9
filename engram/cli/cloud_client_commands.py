"""The client side of ``engram cloud`` (``config``, ``enroll``, ``unenroll``, ``status``,
``repair``, ``upgrade …``) and the cloud handlers of ``engram sync --cloud``.

Only argparse is imported at registration; httpx and the sync services load inside handlers.
Cloud failures print one line, ``cloud sync <reason_code>: <what happened and what to do>``,
and ``--json`` output carries the ``reason_code``.

Size: over 500 lines on purpose: the client commands' argparse wiring next to their short
handlers, one lazy-import rule for all.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from engram import settings
from engram.cli.common import add_json_flag, emit, open_store, say, wants_json, warn

if TYPE_CHECKING:
    from engram.store import Store
    from engram.sync.cloud.client import CloudError
    from engram.sync.cloud.config import CloudConfig

EXIT_FAILED = 1


# --- shared ----------------------------------------------------------------------------------


def _data_dir():
    return settings.load().data_dir


def _cloud(required: bool = True) -> CloudConfig:
    from engram.sync.cloud.config import load_cloud_config

    cloud = load_cloud_config(_data_dir())
    return cloud.require() if required else cloud


def _project(raw: str | None) -> str:
    from engram.sync.cloud.state import project_arg

    return project_arg(raw)


def _optional_project(args: argparse.Namespace) -> str | None:
    raw = getattr(args, "project", None) or settings.raw("ENGRAM_PROJECT")
    return _project(raw) if raw else None


def fail(args: argparse.Namespace, exc: CloudError, **extra: Any) -> int:
    """Report a cloud failure in one line (and as JSON with ``--json``); exit status 1."""
    return fail_with(args, {**exc.to_dict(), **extra}, str(exc), exc.reason_code)


def fail_with(args: argparse.Namespace, data: dict[str, Any], error: str, reason: str) -> int:
    """The one failure shape: with ``--json`` ``{"error": "<text>", "reason_code": …, …}``
    (flat, as the README promises) on stdout only, else one line on stderr; exit status 1."""
    if wants_json(args):
        emit(args, None, {**data, "error": error, "reason_code": reason})
    else:
        warn(f"cloud sync {reason}: {error}", kind="error")
    return EXIT_FAILED


def _progress(args: argparse.Namespace):
    from engram.cli.progress import factory

    return factory(quiet=getattr(args, "quiet", False) or wants_json(args))


# --- engram cloud config / enroll / unenroll ---------------------------------------------------


def _read_token(raw: str | None) -> str | None:
    if raw == "-":
        return sys.stdin.readline().strip()
    return raw


def cmd_config(args: argparse.Namespace) -> int:
    from engram.errors import ValidationError
    from engram.sync.cloud.config import clear_cloud_config, save_cloud_config

    data_dir = _data_dir()
    if args.clear:
        if args.server or args.token:
            raise ValidationError("--clear cannot be combined with --server or --token")
        removed = clear_cloud_config(data_dir)
        _config_changed()
        human = "Cloud configuration removed" if removed else "No cloud configuration to remove"
        emit(args, human, {"cleared": removed})
        return 0
    if args.token and not args.server:
        raise ValidationError("give --server with --token (the token belongs to a server)")
    if args.server:
        save_cloud_config(data_dir, args.server, _read_token(args.token))
        _config_changed()
    cloud = _cloud(required=False)
    data = cloud.describe()
    if not cloud.configured:
        emit(args, "Cloud: not configured (engram cloud config --server URL [--token T])", data)
        return 0
    lines = [
        ("Cloud server saved: " if args.server else "Cloud server: ") + str(cloud.server_url),
        f"  Server source: {cloud.server_source}",
        "  Token: "
        + (f"set (from {cloud.token_source})" if cloud.token else "none (insecure local server)"),
        f"  Config file: {cloud.path}",
    ]
    problem = cloud.problem()
    if problem:
        lines.append(f"  Problem: {problem}")
    emit(args, "\n".join(lines), data)
    return 0


def _config_changed() -> None:
    """A new server or token: every project the server refused may be allowed now, so
    autosync asks again at once instead of waiting out its backoff."""
    from engram import settings as config_module
    from engram.sync.cloud import refusals

    if not (config_module.load().data_dir / "engram.db").exists():
        return  # no store yet: nothing was ever refused
    with open_store() as store:
        refusals.clear_everywhere(store)


def cmd_enroll(args: argparse.Namespace) -> int:
    from engram.sync.cloud import refusals
    from engram.sync.cloud import state as cloud_state

    project = _project(args.project_name)
    with open_store() as store:
        new = cloud_state.enroll(store, project)
        pending = 0
        cloud = _cloud(required=False)
        if cloud.configured:
            refusals.clear(store, cloud.target, project)  # enrolling again: ask again now
            pending = store.journal.count_pending(cloud.target, projects=[project])
    human = (
        f'✓ Project "{project}" enrolled for cloud sync'
        if new
        else f'Project "{project}" is already enrolled for cloud sync'
    )
    if pending:
        human += f" ({pending} mutation(s) to push: engram sync --cloud --project {project})"
    emit(args, human, {"project": project, "enrolled": True, "new": new, "pending": pending})
    return 0


def cmd_unenroll(args: argparse.Namespace) -> int:
    from engram.sync.cloud import state as cloud_state

    project = _project(args.project_name)
    with open_store() as store:
        removed = cloud_state.unenroll(store, project)
    human = (
        f'Project "{project}" unenrolled: nothing more is pushed or pulled; its memories stay '
        "here and on the server"
        if removed
        else f'Project "{project}" was not enrolled for cloud sync'
    )
    emit(args, human, {"project": project, "enrolled": False, "was_enrolled": removed})
    return 0


# --- engram cloud status -----------------------------------------------------------------------


def _find_daemon(store: Store, port: int, project: str | None) -> dict[str, Any]:
    """The ``engram serve`` of this data directory, whatever its port: the servers it recorded
    (:mod:`engram.local_servers`), then the configured port. Only one whose ``/health`` names
    this store's origin counts (a stale record or another data directory's server does not).
    The answer: ``state`` (running, not running, other), ``url``, ``pid``, ``autosync`` and its
    ``/sync/status`` for ``project``."""
    import httpx

    from engram.local_servers import LocalServer, running

    recorded = running(store.config.data_dir)
    candidates: list[tuple[str, LocalServer | None]] = [(s.url, s) for s in recorded]
    default = f"http://127.0.0.1:{port}"
    if default not in {url for url, _ in candidates}:
        candidates.append((default, None))
    found: dict[str, Any] = {"state": "not running", "url": None, "pid": None, "autosync": None}
    for url, record in candidates:
        try:
            health = httpx.get(f"{url}/health", timeout=1.0)
            instance = health.json().get("instance_id") if health.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            continue
        if instance != store.origin:
            if found["state"] == "not running":
                found.update(state="other", url=url)  # something answers, for another store
            continue
        found.update(
            state="running",
            url=url,
            pid=record.pid if record else None,
            autosync=record.autosync if record else None,
        )
        if project:
            try:
                answer = httpx.get(f"{url}/sync/status", params={"project": project}, timeout=2.0)
                if answer.status_code == 200:
                    found["sync_status"] = answer.json()
            except (httpx.HTTPError, ValueError):
                pass
        return found
    return found


def _daemon_text(daemon: dict[str, Any]) -> str:
    if daemon["state"] == "running":
        who = f"pid {daemon['pid']}, " if daemon.get("pid") else ""
        sync = {True: "autosync on", False: "autosync off", None: "autosync unknown"}
        return f"engram serve at {daemon['url']} ({who}{sync[daemon.get('autosync')]})"
    if daemon["state"] == "other":
        return f"not running (an engram serve at {daemon['url']} serves another data directory)"
    return "not running"


def _probe_server(cloud: CloudConfig) -> tuple[dict[str, Any] | None, CloudError | None]:
    from engram.sync.cloud.client import CloudClient, CloudError

    try:
        with CloudClient(cloud, timeout=5.0) as client:
            return client.whoami(), None
    except CloudError as exc:
        return None, exc


def collect_status(store: Store, project: str | None, *, probe: bool = True) -> dict[str, Any]:
    """Everything ``engram cloud status`` shows, as data."""
    from engram import settings as config_module
    from engram.sync.cloud.client import POLICY_FORBIDDEN
    from engram.sync.cloud.config import CloudConfigError, load_cloud_config
    from engram.sync.cloud.status import CLOUD_CONFIG_ERROR, CLOUD_NOT_CONFIGURED, project_status

    data: dict[str, Any] = {"configured": False, "project": project}
    try:
        cloud = load_cloud_config(store.config.data_dir)
    except CloudConfigError as exc:
        data.update(reason_code=CLOUD_CONFIG_ERROR, reason_message=str(exc))
        return data
    data.update(cloud.describe(), configured=cloud.configured)
    if not cloud.configured:
        data.update(
            reason_code=CLOUD_NOT_CONFIGURED,
            reason_message="no cloud server configured: run 'engram cloud config --server URL'",
        )
        return data
    data["target"] = cloud.target
    reason: tuple[str | None, str | None] = (None, None)
    problem = cloud.problem()
    if problem:
        reason = (CLOUD_CONFIG_ERROR, problem)
    elif probe:
        who, error = _probe_server(cloud)
        if error is not None:
            data["auth"] = {"ok": False, "reason_code": error.reason_code, "error": str(error)}
            reason = (error.reason_code, str(error))
        else:
            assert who is not None
            allowed = who.get("projects")
            data["auth"] = {"ok": True, "username": who.get("username"), "projects": allowed}
            if project and not (
                allowed == "*" or (isinstance(allowed, list) and project in allowed)
            ):
                reason = (
                    POLICY_FORBIDDEN,
                    f"the server does not allow project {project!r} for this token: ask the "
                    "admin to add it (ENGRAM_CLOUD_ALLOWED_PROJECTS or a grant)",
                )
    port = config_module.load().http_port
    daemon = _find_daemon(store, port, project)
    daemon_status = daemon.pop("sync_status", None)
    data["daemon"] = _daemon_text(daemon)
    data["local_daemon"] = daemon
    if daemon_status is not None:
        data["daemon_sync_status"] = daemon_status
    data["autosync_process"] = _autosync_process(store, cloud.target, daemon)
    if project:
        data["sync"] = project_status(store, project)
        if reason == (None, None) and data["sync"]["reason_code"]:
            reason = (data["sync"]["reason_code"], data["sync"]["reason_message"])
    data["reason_code"], data["reason_message"] = reason
    return data


def _autosync_process(store: Store, target: str, daemon: dict[str, Any]) -> dict[str, Any] | None:
    """Which process on this machine runs the autosync loop: the holder of its lease (its pid,
    and whether it is the ``engram serve`` found above, else another one such as an
    ``engram mcp``), or the daemon that says it runs autosync (between two renewals the lease
    may have lapsed while it waits on a long poll)."""
    from engram.sync.cloud.state import lease_holder
    from engram.sync.cloud.status import lease_pid

    owner = lease_holder(store, target)
    running = daemon["state"] == "running"
    if owner is None:
        if running and daemon.get("autosync"):
            return {"owner": None, "pid": daemon.get("pid"), "engram_serve": daemon["url"]}
        return None
    pid = lease_pid(owner)
    in_daemon = running and pid is not None and daemon.get("pid") == pid
    return {"owner": owner, "pid": pid, "engram_serve": daemon["url"] if in_daemon else None}


def _autosync_text(data: dict[str, Any], sync: dict[str, Any]) -> str:
    """Where the autosync loop runs, and this project's phase."""
    holder = data.get("autosync_process")
    if holder is None:
        where = "off (no process on this machine runs it: ENGRAM_CLOUD_AUTOSYNC=1 engram serve)"
    elif holder.get("engram_serve"):
        where = f"running in engram serve at {holder['engram_serve']} (pid {holder['pid']})"
    else:
        pid = f" (pid {holder['pid']})" if holder.get("pid") else ""
        where = f"running in another engram process on this machine{pid}"
    cycles = (data.get("daemon_sync_status") or {}).get("loop_cycles")
    if holder is not None and holder.get("engram_serve") and cycles:  # that loop's own count
        where += f", {cycles['push']} push and {cycles['pull']} pull cycles so far"
    return f"Autosync: {where}; project phase: {sync['phase']}"


def _status_lines(data: dict[str, Any]) -> list[str]:
    if not data.get("configured"):
        lines = ["Cloud status: not configured (no effective server URL)"]
        if data.get("reason_code"):
            lines += [
                "Sync diagnostic:",
                f"  reason_code: {data['reason_code']}",
                f"  reason_message: {data['reason_message']}",
            ]
        return lines
    lines = [
        f"Cloud status: configured (target={data['target']})",
        f"Server: {data['server']}",
        f"Server source: {data['server_source']}",
    ]
    token = (
        "token provided via ENGRAM_CLOUD_TOKEN"
        if data.get("token_source") == "ENGRAM_CLOUD_TOKEN"
        else "token read from cloud.json"
        if data.get("token_configured")
        else "no token (only an insecure local-dev server accepts this)"
    )
    auth = data.get("auth")
    if auth is None:
        lines.append(f"Auth status: not checked ({token})")
    elif auth["ok"]:
        lines.append(f"Auth status: ready ({token}; server user {auth.get('username')})")
    else:
        lines.append(f"Auth status: {auth['reason_code']} ({token})")
    lines.append(
        "Sync readiness: ready"
        if not data.get("reason_code")
        else f"Sync readiness: blocked ({data['reason_code']})"
    )
    project = data.get("project")
    sync = data.get("sync")
    if not project or sync is None:
        lines.append("Project enrollment: not checked (use --project <name>)")
    else:
        lines.append(
            f"Project enrollment: {'enrolled' if sync['enabled'] else 'not enrolled'} ({project})"
        )
    lines.append(f"Local daemon: {data.get('daemon')}")
    if sync is not None:
        lines += [
            _autosync_text(data, sync),
            f"Last sync: {sync['last_sync_at'] or 'never'}"
            + (
                f" (last push {sync['last_push_at'] or 'never'}, last pull "
                f"{sync['last_pull_at'] or 'never'}, cursor {sync['cursor']})"
            ),
            f"Pending: {sync['pending_count']} to push, {sync['quarantined_count']} quarantined, "
            f"{sync['dead_count']} pulled but not applicable, "
            f"{sync.get('inbound_quarantined_count', 0)} received and waiting here",
        ]
        if sync.get("refusal"):
            lines.append(f"Server refusal: {sync['refusal']['message']}")
        if sync["upgrade"]["stage"]:
            lines.append(f"Upgrade stage: {sync['upgrade']['stage']}")
    if data.get("reason_code"):
        lines += [
            "Sync diagnostic:",
            f"  reason_code: {data['reason_code']}",
            f"  reason_message: {data['reason_message']}",
        ]
    return lines


def _status_project(args: argparse.Namespace) -> str | None:
    """``--project``, ``ENGRAM_PROJECT``, else the project of the repository the command runs
    in, detected like every command does. Outside a repository (where the guess would only be
    the folder's name) and in a folder of several repositories none is checked, and the
    status says how to name one."""
    if explicit := _optional_project(args):
        return explicit
    from engram.cli.common import resolve_project
    from engram.errors import ProjectResolutionError

    try:
        found = resolve_project(None)
    except ProjectResolutionError:
        return None
    return found.project if found.project and found.source != "dir_basename" else None


def cmd_status(args: argparse.Namespace) -> int:
    project = _status_project(args)
    with open_store() as store:
        data = collect_status(store, project, probe=not args.offline)
    emit(args, "\n".join(_status_lines(data)), data)
    return 0


# --- engram cloud repair ------------------------------------------------------------------------


def cmd_repair(args: argparse.Namespace) -> int:
    from engram.sync.cloud import state as cloud_state
    from engram.sync.cloud.client import CloudError
    from engram.sync.cloud.sync import CloudSync

    cloud = _cloud()
    project = _optional_project(args)
    with open_store() as store:
        target = cloud.target
        rows = cloud_state.quarantined_rows(store, target, project)
        projects = sorted({r["project"] for r in rows})
        if args.dry_run:
            lines = [f"{len(rows)} rejected record(s) would be retried"]
            lines += [
                f"  {r['mid']} ({r['project']}): {r['error_code']}: {r['error']}" for r in rows
            ]
            emit(args, "\n".join(lines), {"dry_run": True, "quarantined": rows})
            return 0
        released = cloud_state.release_quarantined(store, target, project)
        reports = []
        try:
            with CloudSync(store, cloud, progress=_progress(args)) as sync:
                for name in projects:
                    if cloud_state.is_enrolled(store, name):
                        reports.append(sync.push_project(name).to_dict())
        except CloudError as exc:
            return fail(args, exc, released=released)
        still = cloud_state.quarantined_rows(store, target, project)
    lines = [f"Released {released} rejected record(s) for another try"]
    for report in reports:
        lines.append(
            f"  {report['project']}: {report['acknowledged']} accepted, "
            f"{len(report['rejected'])} rejected again"
        )
    if still:
        lines.append(f"Still quarantined: {len(still)}")
        lines += [f"  {r['mid']} ({r['project']}): {r['error_code']}: {r['error']}" for r in still]
    emit(args, "\n".join(lines), {"released": released, "pushed": reports, "quarantined": still})
    return 0 if not still else EXIT_FAILED


# --- engram cloud upgrade -----------------------------------------------------------------------


def cmd_upgrade(args: argparse.Namespace) -> int:
    from engram.sync.cloud import move_from_git as upgrade
    from engram.sync.cloud.client import CloudError

    project = _project(args.project)
    action = args.upgrade_action
    cloud = _cloud(required=action in ("bootstrap", "repair"))
    with open_store() as store:
        try:
            if action == "doctor":
                report = upgrade.doctor(store, project, cloud)
                data = report.to_dict()
                lines = [
                    f"project: {project}",
                    f"status: {data['status']}",
                    f"class: {data['class']}",
                    f"reason_code: {data['reason_code'] or 'none'}",
                    f"message: {data['message']}",
                    f"pending: {report.pending}, quarantined: {report.quarantined}, "
                    f"unjournaled: {report.unjournaled}",
                ]
                lines += [
                    f"  [{'ok' if c.ok else 'fail'}] {c.name}: {c.message}" for c in report.checks
                ]
                emit(args, "\n".join(lines), data)
                return 0 if report.ready else EXIT_FAILED
            if action == "status":
                cloud.require()
                data = upgrade.upgrade_status(store, project, cloud)
                lines = [f"{key}: {value}" for key, value in data.items()]
                emit(args, "\n".join(lines), data)
                return 0
            if action == "repair":
                repaired = upgrade.repair(
                    store, project, cloud, dry_run=args.dry_run, progress=_progress(args)
                )
                data = repaired.to_dict()
                verb = "would journal" if args.dry_run else "journaled"
                lines = [
                    f"project: {project}",
                    f"{verb}: " + ", ".join(f"{n} {k}(s)" for k, n in repaired.journaled.items()),
                    ("would retry" if args.dry_run else "released")
                    + f": {repaired.released} quarantined record(s)",
                ]
                if repaired.pushed:
                    lines.append(
                        f"pushed: {repaired.pushed['acknowledged']} accepted, "
                        f"{len(repaired.pushed['rejected'])} rejected"
                    )
                emit(args, "\n".join(lines), data)
                return 0
            if action == "bootstrap":
                bootstrapped = upgrade.bootstrap(
                    store,
                    project,
                    cloud,
                    progress=_progress(args),
                    say=(lambda _: None) if wants_json(args) else say,
                )
                data = bootstrapped.to_dict()
                if bootstrapped.error:
                    stage, error = bootstrapped.stage, bootstrapped.error["error"]
                    emit(args, f"stage: {stage}\nerror: {error}", data)
                    return EXIT_FAILED
                emit(
                    args,
                    f"stage: {bootstrapped.stage} ({bootstrapped.local_mutations} local "
                    f"mutation(s), {bootstrapped.server_mutations} on the server)",
                    data,
                )
                return 0
            if action == "rollback":
                cloud.require()
                data = upgrade.rollback(store, project, cloud)
                emit(
                    args,
                    f'Project "{project}" rolled back: unenrolled, cloud cursor forgotten; local '
                    "memories untouched",
                    data,
                )
                return 0
        except CloudError as exc:
            return fail(args, exc, project=project)
    raise AssertionError(action)


# --- engram sync --cloud -----------------------------------------------------------------------


def _sync_project(args: argparse.Namespace) -> str:
    from engram.cli.common import resolve_project
    from engram.errors import ValidationError

    if getattr(args, "all", False):
        raise ValidationError(
            "cloud sync works on one project at a time: pass --project NAME instead of --all"
        )
    if getattr(args, "dir", None):
        raise ValidationError("--dir is for git sync; it has no meaning with --cloud")
    return resolve_project(args.project).project


def cloud_export(args: argparse.Namespace) -> int:
    from engram.sync.cloud.client import CloudError
    from engram.sync.cloud.sync import CloudSync

    project = _sync_project(args)
    cloud = _cloud()
    with open_store() as store:
        try:
            with CloudSync(
                store,
                cloud,
                include_personal=args.include_personal,
                progress=_progress(args),
            ) as sync:
                report = sync.push([project])[0]
        except CloudError as exc:
            return fail(args, exc, project=project)
    data = report.to_dict()
    if report.error:
        failure = dict(report.error)
        error, reason = str(failure.pop("error")), str(failure.pop("reason_code"))
        # the failure's other fields (status, error_class…) beside the report's, never nested
        return fail_with(args, {**data, **failure}, error, reason)
    if not report.sent and not report.rejected:
        emit(
            args,
            f'Nothing new to push — every mutation of project "{project}" is already on '
            f"{cloud.server_url}",
            data,
        )
        return 0
    lines = [
        f'Pushed {report.acknowledged} mutation(s) of project "{project}" to {cloud.server_url}'
    ]
    if report.unconfirmed:
        lines.append(f"  {report.unconfirmed} not confirmed by the server: sent again next time")
    if report.rejected:
        lines.append(
            f"  {len(report.rejected)} rejected and quarantined (engram cloud status shows them; "
            "engram cloud repair retries):"
        )
        lines += [f"    {r['mid']}: {r['error_code']}: {r['error']}" for r in report.rejected]
    emit(args, "\n".join(lines), data)
    return EXIT_FAILED if report.rejected else 0


def cloud_import(args: argparse.Namespace) -> int:
    from engram import formatting
    from engram.sync.cloud.client import CloudError
    from engram.sync.cloud.sync import CloudSync

    project = _sync_project(args)
    cloud = _cloud()
    show = sys.stderr.isatty() and not (getattr(args, "quiet", False) or wants_json(args))
    seen = 0

    def on_page(count: int) -> None:
        # The server does not say how much is left: a running count instead of a bar.
        nonlocal seen
        seen += count
        if show:
            sys.stderr.write(f"\r  pulled {seen} mutation(s)…")
            sys.stderr.flush()

    with open_store() as store:
        try:
            with CloudSync(store, cloud) as sync:
                report = sync.pull([project], on_page=on_page)[project]
        except CloudError as exc:
            return fail(args, exc, project=project)
        finally:
            if show and seen:
                sys.stderr.write("\n")
    data = report.to_dict()
    applied = report.applied
    if not report.received:
        emit(args, f'Already up to date — nothing new for project "{project}" on the server', data)
        return 0
    lines = [
        f'Pulled {report.received} mutation(s) of project "{project}" from {cloud.server_url}',
        f"  Sessions:     {applied.sessions} change(s)",
        f"  Observations: {applied.observations} change(s)",
        f"  Prompts:      {applied.prompts} change(s)",
        f"  Unchanged:    {applied.duplicates} already here, {applied.stale} older than local",
    ]
    if report.dead:
        lines.append(f"  Not applicable: {report.dead} malformed record(s) (kept on the server)")
    lines += formatting.superseded(applied)
    if applied.quarantined:
        held = ", ".join(f"{n} {reason}" for reason, n in sorted(applied.quarantined.items()))
        lines.append(f"  Quarantined:  {held} (engram sync --quarantine lists them)")
    emit(args, "\n".join(lines), data)
    return 0


def cloud_status(args: argparse.Namespace) -> int:
    """Read-only: local counts for the project, no network."""
    from engram.sync.cloud.status import project_status

    project = _sync_project(args)
    with open_store() as store:
        data = project_status(store, project)
    if data.get("server") is None:
        emit(args, f"Cloud sync status: {data['reason_message']}", {"project": project, **data})
        return 0
    lines = [
        f"Cloud sync status ({data['server']}, project {project}):",
        f"  Enrolled:        {'yes' if data['enabled'] else 'no'}",
        f"  Pending push:    {data['pending_count']} mutation(s)",
        f"  Quarantined:     {data['quarantined_count']} rejected by the server, "
        f"{data['inbound_quarantined_count']} received and waiting here"
        + (" (engram sync --quarantine)" if data["inbound_quarantined_count"] else ""),
        f"  Pull cursor:     {data['cursor']}",
        f"  Last push:       {data['last_push_at'] or 'never'}",
        f"  Last pull:       {data['last_pull_at'] or 'never'}",
        f"  Phase:           {data['phase']}",
    ]
    if data.get("refusal"):
        lines.append(f"  Refused:         {data['refusal']['message']}")
    if data["reason_code"]:
        lines.append(f"  Diagnostic:      {data['reason_code']}: {data['reason_message']}")
    emit(args, "\n".join(lines), {"project": project, **data})
    return 0


#: (transport, action) → handler, merged into ``engram sync``'s table.
SYNC_HANDLERS = {
    ("cloud", "export"): cloud_export,
    ("cloud", "import"): cloud_import,
    ("cloud", "status"): cloud_status,
}


# --- registration ------------------------------------------------------------------------------


def _parser(actions: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, help=help, description=help)
    add_json_flag(parser)
    return parser


def register_client_commands(actions: argparse._SubParsersAction) -> None:
    """Add the client commands to the ``engram cloud`` group."""
    p = _parser(actions, "config", "set (or show, or --clear) this machine's cloud server")
    p.add_argument("--server", help="the server URL (https://…; http only for a local server)")
    p.add_argument("--token", help="bearer token ('-' reads it from standard input)")
    p.add_argument("--clear", action="store_true", help="forget the stored server and token")
    p.set_defaults(func=cmd_config)

    p = _parser(actions, "enroll", "sync this project with the cloud server")
    p.add_argument("project_name", metavar="project")
    p.set_defaults(func=cmd_enroll)

    p = _parser(actions, "unenroll", "stop syncing a project (its memories stay everywhere)")
    p.add_argument("project_name", metavar="project")
    p.set_defaults(func=cmd_unenroll)

    p = _parser(actions, "status", "configuration, auth, enrollment, daemon and last sync")
    p.add_argument("--project", help="report this project's sync (default $ENGRAM_PROJECT)")
    p.add_argument("--offline", action="store_true", help="do not ask the server")
    p.set_defaults(func=cmd_status)

    p = _parser(actions, "repair", "retry the records the server rejected (the quarantine)")
    p.add_argument("--project", help="only this project's records")
    p.add_argument("--dry-run", action="store_true", help="only list them")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_repair)

    upgrade = actions.add_parser(
        "upgrade",
        help="move an existing project to the cloud (doctor, bootstrap, status, repair, rollback)",
    )
    add_json_flag(upgrade)
    sub = upgrade.add_subparsers(dest="upgrade_action", metavar="<action>", required=True)
    for name, help in (
        ("doctor", "read-only diagnosis: ready or blocked, and why"),
        ("bootstrap", "enroll, push everything, pull, verify (run again to resume)"),
        ("status", "the stage reached and the last problem"),
        ("repair", "journal rows that never got a mutation, retry rejected records"),
        ("rollback", "unenroll and forget the cloud cursor (local memories untouched)"),
    ):
        p = _parser(sub, name, help)
        p.add_argument("--project", required=True)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
        if name == "bootstrap":
            p.add_argument(
                "--resume", action="store_true", help="accepted: every run resumes where it stopped"
            )
        if name == "repair":
            mode = p.add_mutually_exclusive_group()
            mode.add_argument("--dry-run", action="store_true", help="only count")
            mode.add_argument("--apply", action="store_true", help="apply (the default)")
        p.set_defaults(func=cmd_upgrade, upgrade_action=name)
