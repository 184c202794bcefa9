"""The server side of ``engram cloud``: ``serve``, ``migrate``, ``rebuild-read-model``,
``repair-clocks``, ``purge`` and ``admin …`` (users, tokens, grants, pause).

:func:`register_server_commands` adds them to the ``engram cloud`` group. Only argparse is
imported here; SQLAlchemy, alembic, litestar and uvicorn load inside the handlers, so the rest of
the ``engram`` command starts fast and works without the ``cloud`` extras installed.

Size: over 500 lines on purpose: every server command's argparse wiring next to its short
handler; one file keeps the lazy-import rule above in one place.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from engram.cli.common import add_json_flag, emit, wants_json
from engram.errors import EngramError


class CloudCommandError(EngramError):
    """A server command cannot run: bad settings, database unreachable, outdated schema."""


def _settings() -> Any:
    from engram_cloud.settings import SettingsError, load_settings

    try:
        return load_settings()
    except SettingsError as exc:
        raise CloudCommandError(str(exc)) from None


def _engine(url: str | None = None) -> Any:
    """An engine on ``url`` (default ``$ENGRAM_DATABASE_URL``) that answered once."""
    from engram_cloud import settings as settings_module
    from engram_cloud.db import DatabaseUnavailableError, check_database, create_db_engine
    from engram_cloud.settings import SettingsError

    raw = url if url is not None else settings_module.raw("ENGRAM_DATABASE_URL")
    if not raw:
        raise CloudCommandError("ENGRAM_DATABASE_URL is not set")
    try:
        engine = create_db_engine(raw, pool_size=2)
        check_database(engine)
    except (SettingsError, DatabaseUnavailableError) as exc:
        raise CloudCommandError(str(exc)) from None
    return engine


def _progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


# --- serve / migrate / rebuild ------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from engram.cli.cmd_serve import bind
    from engram_cloud.migrate import schema_status, upgrade

    settings = _settings()
    if args.host:
        settings = replace(settings, host=args.host)
    if args.port is not None:  # 0 is a port too: any free one, as for `engram serve`
        if not 0 <= args.port <= 65535:
            raise CloudCommandError(f"port must be between 0 and 65535, got {args.port}")
        settings = replace(settings, port=args.port)
    engine = _engine(settings.database_url)
    status = schema_status(engine)
    if not status.up_to_date:
        if not args.migrate:
            raise CloudCommandError(
                f"{status.describe()}: run 'engram cloud migrate' first, or start with --migrate"
            )
        status = upgrade(engine)
        _progress(f"[engram-cloud] schema migrated to revision {status.current}")
    _startup_maintenance(engine, settings)
    if settings.insecure:
        _progress(
            "[engram-cloud] WARNING: insecure mode, no authentication (local development only)"
        )
    # The socket is bound here, before uvicorn starts: a taken port is one clear line, and with
    # port 0 the free port the system picked is the one announced (and given to the workers).
    sock = bind(settings.host, settings.port, who="engram cloud serve", setting="ENGRAM_CLOUD_PORT")
    settings = replace(settings, port=int(sock.getsockname()[1]))
    projects = "*" if settings.allows_every_project else ",".join(sorted(settings.allowed_projects))
    _progress(
        f"[engram-cloud] listening on {settings.host}:{settings.port} "
        f"({settings.mode} mode, projects: {projects})"
    )
    try:
        _run_uvicorn(args, settings, engine, sock)
    finally:
        sock.close()
    return 0


def _run_uvicorn(args: argparse.Namespace, settings: Any, engine: Any, sock: Any) -> None:
    import uvicorn

    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": args.log_level,
        "timeout_graceful_shutdown": 5,
        "access_log": args.access_log,
        # The WebSocket gateway's keep-alive, as the seed's gateway: a ping every 20 s, and a
        # connection whose pong is 10 s late is closed.
        "ws": "websockets",
        "ws_ping_interval": 20.0,
        "ws_ping_timeout": 10.0,
        **proxy_options(settings),
    }
    if settings.trusted_proxies:
        _progress(
            "[engram-cloud] trusting X-Forwarded-For/-Proto from "
            + ", ".join(settings.trusted_proxies)
        )
    if args.workers > 1:
        from uvicorn.supervisors import Multiprocess

        engine.dispose()
        # Each worker process builds its own app (and pool) from the same environment, and
        # serves the socket bound above (as uvicorn.run does with the one it binds).
        os.environ["ENGRAM_CLOUD_HOST"], os.environ["ENGRAM_CLOUD_PORT"] = (
            settings.host,
            str(settings.port),
        )
        config = uvicorn.Config(
            "engram_cloud.app:create_app_from_env",
            factory=True,
            workers=args.workers,
            **options,
        )
        Multiprocess(config, sockets=[sock]).run()
    else:
        from engram_cloud.app import create_app

        server = uvicorn.Server(uvicorn.Config(create_app(settings, engine=engine), **options))
        server.run(sockets=[sock])
        if not server.started:
            raise CloudCommandError("the server failed to start (see the messages above)")


def proxy_options(settings: Any) -> dict[str, Any]:
    """uvicorn's forwarded-header options: believed only from ``ENGRAM_CLOUD_TRUSTED_PROXIES``
    (uvicorn's own default trusts 127.0.0.1, which let any local process, or a proxy on this
    host that passes the header through, choose the client address the throttles count)."""
    if not settings.trusted_proxies:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": ",".join(settings.trusted_proxies)}


def _startup_maintenance(engine: Any, settings: Any) -> None:
    """Hold back records beyond the clock bound, and prune the audit log, before serving."""
    from engram_cloud.clocks import repair_clocks
    from engram_cloud.controls import AuditLimits, prune_audit

    report = repair_clocks(engine, max_drift_ms=settings.max_clock_drift_s * 1000)
    if report.changed:
        _progress(
            f"[engram-cloud] clock bound: {report.held} record(s) held back, {report.released} "
            f"released; read model rebuilt for {len(report.projects)} project(s)"
        )
    elif report.still_held:
        _progress(
            f"[engram-cloud] clock bound: {report.still_held} record(s) still held back "
            "(their clocks are ahead of this server's; see engram cloud repair-clocks)"
        )
    with engine.begin() as conn:
        prune_audit(conn, AuditLimits.of(settings))


def cmd_migrate(args: argparse.Namespace) -> int:
    from engram_cloud.migrate import downgrade, schema_status, upgrade

    engine = _engine()
    try:
        before = schema_status(engine)
        if args.status:
            after = before
        elif args.downgrade:
            after = downgrade(engine, args.downgrade)
        else:
            after = upgrade(engine, args.revision)
    finally:
        engine.dispose()
    if args.status:
        human = before.describe()
    elif before.current == after.current:
        human = f"Nothing to do: {after.describe()}"
    else:
        human = (
            f"Migrated from {before.current or 'an empty database'} to {after.current or 'base'}"
        )
    emit(
        args,
        human,
        {
            "from": before.current,
            "to": after.current,
            "head": after.head,
            "up_to_date": after.up_to_date,
        },
    )
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from sqlalchemy import text

    from engram_cloud import read_model, sync_log
    from engram_cloud.auth import normalize_project_name

    project = normalize_project_name(args.project) if args.project else None
    engine = _engine()
    report = None if wants_json(args) else _progress
    try:
        with engine.begin() as conn:
            # Pushes wait while the read model is rebuilt, so nothing lands half-way.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": sync_log.PUSH_LOCK})
            stats = read_model.rebuild(conn, project, progress=report)
    finally:
        engine.dispose()
    scope = f"project {project!r}" if project else "every project"
    emit(
        args,
        f"Rebuilt the read model of {scope}: {stats.applied} mutations applied, "
        f"{stats.stale} superseded",
        {
            "project": project,
            "applied": stats.applied,
            "stale": stats.stale,
            "by_entity": stats.by_entity,
        },
    )
    return 0


def cmd_repair_clocks(args: argparse.Namespace) -> int:
    from engram_cloud.clocks import repair_clocks

    settings = _settings()
    engine = _engine(settings.database_url)
    try:
        report = repair_clocks(
            engine,
            max_drift_ms=settings.max_clock_drift_s * 1000,
            dry_run=args.dry_run,
            progress=None if wants_json(args) else _progress,
        )
    finally:
        engine.dispose()
    verb = "would hold" if args.dry_run else "held"
    again = "would release" if args.dry_run else "released"
    human = (
        f"Clock bound (now + {settings.max_clock_drift_s} s): {verb} {report.held} record(s), "
        f"{again} {report.released}; {report.still_held} held in all"
    )
    if report.projects:
        human += "\n  projects: " + ", ".join(report.projects[:50])
    emit(
        args,
        human,
        {
            "dry_run": args.dry_run,
            "held": report.held,
            "released": report.released,
            "still_held": report.still_held,
            "projects": report.projects,
            "max_clock_drift_s": settings.max_clock_drift_s,
        },
    )
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    from engram_cloud import purge
    from engram_cloud.auth import normalize_project_name

    project = normalize_project_name(args.project) if args.project else None
    engine = _engine()
    try:
        report = purge.purge(
            engine,
            project,
            vacuum=not args.no_vacuum,
            progress=None if wants_json(args) else _progress,
        )
    finally:
        engine.dispose()
    emit(
        args,
        f"Purged {report.hard_deletes} hard-deleted keys: {report.records_blanked} log records "
        f"and {report.chunks_blanked} chunks blanked, "
        f"{len(report.tables_vacuumed)} tables rewritten, in {report.seconds:.1f} s",
        report.to_dict(),
    )
    return 0


# --- admin ---------------------------------------------------------------------------------------


def _admin(action: Any) -> Any:
    """Run ``action(conn)`` in one transaction on ``$ENGRAM_DATABASE_URL``."""
    engine = _engine()
    try:
        with engine.begin() as conn:
            return action(conn)
    finally:
        engine.dispose()


def cmd_create_user(args: argparse.Namespace) -> int:
    from engram_cloud.principals import CLI_ACTOR, create_principal

    user = _admin(
        lambda conn: create_principal(
            conn,
            CLI_ACTOR,
            args.username,
            kind="service_account" if args.service_account else "human",
            role=args.role,
            email=args.email,
            display_name=args.display_name,
        ),
    )
    emit(
        args,
        f"Created {user['kind'].replace('_', ' ')} {user['username']!r} "
        f"(id {user['principal_id']}, role {user['role']})",
        user,
    )
    return 0


def cmd_list_users(args: argparse.Namespace) -> int:
    from engram_cloud.principals import list_principals

    users = _admin(list_principals)
    lines = [
        f"{u['principal_id']:>4}  {u['username']:<24} {u['role']:<7} {u['kind']:<16} "
        f"{'enabled' if u['enabled'] else 'disabled'}"
        for u in users
    ]
    emit(args, "\n".join(lines) or "No users yet.", {"users": users})
    return 0


def cmd_set_enabled(args: argparse.Namespace) -> int:
    from engram_cloud.principals import CLI_ACTOR, set_enabled

    user = _admin(lambda conn: set_enabled(conn, CLI_ACTOR, args.user, args.enable))
    verb = "Enabled" if args.enable else "Disabled"
    emit(args, f"{verb} {user['username']!r}", user)
    return 0


def cmd_issue_token(args: argparse.Namespace) -> int:
    from engram_cloud.principals import CLI_ACTOR, issue_token

    settings = _settings()  # the pepper must be the server's own
    raw, meta = _admin(
        lambda conn: issue_token(conn, CLI_ACTOR, settings.token_pepper, args.user, name=args.name),
    )
    emit(
        args,
        f"{raw}\n\nToken {meta['id']} for {args.user!r} ({meta['token_prefix']}…). "
        "This is the only time it is shown: store it now.",
        {"raw_token": raw, "token": meta},
    )
    return 0


def cmd_list_tokens(args: argparse.Namespace) -> int:
    from engram_cloud.principals import list_tokens

    tokens = _admin(lambda conn: list_tokens(conn, args.user))
    lines = [
        f"{t['id']:>4}  {t['token_prefix']}…  {t['name'] or '-':<16} created {t['created_at']}"
        + (f"  REVOKED {t['revoked_at']}" if t["revoked_at"] else "")
        for t in tokens
    ]
    emit(args, "\n".join(lines) or "No tokens.", {"tokens": tokens})
    return 0


def cmd_revoke_token(args: argparse.Namespace) -> int:
    from engram_cloud.principals import CLI_ACTOR, revoke_token

    meta = _admin(lambda conn: revoke_token(conn, CLI_ACTOR, args.token_id, reason=args.reason))
    emit(args, f"Revoked token {meta['id']} ({meta['token_prefix']}…)", meta)
    return 0


def cmd_grant(args: argparse.Namespace) -> int:
    from engram_cloud.principals import CLI_ACTOR, grant, revoke_grant

    def run(conn: Any) -> list[dict[str, Any]]:
        change = grant if args.grant else revoke_grant
        return [change(conn, CLI_ACTOR, args.user, project) for project in args.projects]

    results = _admin(run)
    names = ", ".join(r["project"] for r in results)
    human = (
        f"Granted {names} to {args.user!r}" if args.grant else f"Revoked {names} from {args.user!r}"
    )
    emit(args, human, {"user": args.user, "results": results})
    return 0


def cmd_list_grants(args: argparse.Namespace) -> int:
    from engram_cloud.principals import list_grants

    grants = _admin(lambda conn: list_grants(conn, args.user))
    emit(args, "\n".join(g["project"] for g in grants) or "No grants.", {"grants": grants})
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    from engram_cloud.auth import normalize_project_name
    from engram_cloud.controls import set_sync_enabled

    project = normalize_project_name(args.project)
    if not project:
        raise CloudCommandError("project is required")
    control = _admin(
        lambda conn: set_sync_enabled(
            conn, project, args.enable, reason=args.reason, updated_by="cli"
        ),
    )
    human = (
        f"Resumed sync for {project!r}"
        if args.enable
        else f"Paused sync for {project!r}: pushes get 409 until resumed"
    )
    emit(args, human, control)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from engram_cloud.auth import normalize_project_name
    from engram_cloud.controls import audit_rows

    project = normalize_project_name(args.project) if args.project else None
    rows = _admin(lambda conn: audit_rows(conn, project=project, limit=args.limit))
    lines = [
        f"{r['occurred_at']}  {r['contributor']:<16} {r['project']:<20} {r['action']:<14} "
        f"{r['outcome']:<24} {r['entry_count']}"
        for r in rows
    ]
    emit(args, "\n".join(lines) or "No audit rows.", {"audit": rows})
    return 0


# --- registration --------------------------------------------------------------------------------


def _parser(actions: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, help=help, description=help)
    add_json_flag(parser)
    return parser


def register_server_commands(actions: argparse._SubParsersAction) -> None:
    """Add ``serve``, ``migrate``, ``rebuild-read-model``, ``repair-clocks``, ``purge`` and
    ``admin`` to ``engram cloud``."""
    p = _parser(
        actions, "serve", "run the team server (reads ENGRAM_* settings; see docs/cloud.md)"
    )
    p.add_argument("--host", help="bind address (default $ENGRAM_CLOUD_HOST or 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default $ENGRAM_CLOUD_PORT, $ENGRAM_PORT, 8080)")
    p.add_argument(
        "--migrate",
        action="store_true",
        help="upgrade the database schema first instead of refusing an outdated one",
    )
    p.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    p.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.set_defaults(func=cmd_serve)

    p = _parser(actions, "migrate", "upgrade the database schema (alembic) to the newest revision")
    p.add_argument("--revision", default="head", help="upgrade to this revision (default head)")
    p.add_argument(
        "--downgrade",
        metavar="REVISION",
        help="downgrade instead (-1 = one step back, base = empty)",
    )
    p.add_argument("--status", action="store_true", help="only show the schema's revision")
    p.set_defaults(func=cmd_migrate)

    p = _parser(
        actions,
        "rebuild-read-model",
        "recompute the sessions/observations/prompts tables from the mutation log",
    )
    p.add_argument("--project", help="only this project")
    p.set_defaults(func=cmd_rebuild)

    p = _parser(
        actions,
        "repair-clocks",
        "hold back logged records whose clock is beyond now + ENGRAM_CLOUD_MAX_CLOCK_DRIFT_S "
        "(and release those real time caught up with); rebuild what changed",
    )
    p.add_argument("--dry-run", action="store_true", help="only count")
    p.set_defaults(func=cmd_repair_clocks)

    p = _parser(
        actions,
        "purge",
        "leave no byte of hard-deleted text in the database files: blank the earlier log records "
        "and stored chunks of every hard-deleted key (tombstones and mids stay), then VACUUM FULL "
        "the log and read-model tables (each is locked while it is rewritten)",
    )
    p.add_argument("--project", help="only blank this project's keys (tables are rewritten whole)")
    p.add_argument("--no-vacuum", action="store_true", help="blank only; rewrite the files later")
    p.set_defaults(func=cmd_purge)

    admin = actions.add_parser("admin", help="users, tokens, grants and project pause")
    add_json_flag(admin)
    sub = admin.add_subparsers(dest="admin_action", metavar="<action>", required=True)

    p = _parser(sub, "create-user", "create a user (or a service account with --service-account)")
    p.add_argument("username")
    p.add_argument("--email")
    p.add_argument("--display-name")
    p.add_argument("--role", choices=["admin", "member"], default="member")
    p.add_argument("--service-account", action="store_true")
    p.set_defaults(func=cmd_create_user)

    p = _parser(sub, "list-users", "list users and service accounts")
    p.set_defaults(func=cmd_list_users)

    for name, enable in (("enable-user", True), ("disable-user", False)):
        p = _parser(sub, name, f"{name.split('-')[0]} a user (their tokens follow)")
        p.add_argument("user", help="username or id")
        p.set_defaults(func=cmd_set_enabled, enable=enable)

    p = _parser(sub, "issue-token", "issue a token for a user; it is printed once")
    p.add_argument("user", help="username or id")
    p.add_argument("--name", default="", help="a label, e.g. the machine it is for")
    p.set_defaults(func=cmd_issue_token)

    p = _parser(sub, "list-tokens", "list a user's tokens (never the tokens themselves)")
    p.add_argument("user", help="username or id")
    p.set_defaults(func=cmd_list_tokens)

    p = _parser(sub, "revoke-token", "revoke a token by its id")
    p.add_argument("token_id", type=int)
    p.add_argument("--reason")
    p.set_defaults(func=cmd_revoke_token)

    for name, grant in (("grant", True), ("revoke", False)):
        p = _parser(sub, name, f"{name} projects (or *) {'to' if grant else 'from'} a user")
        p.add_argument("user", help="username or id")
        p.add_argument("projects", nargs="+", metavar="project")
        p.set_defaults(func=cmd_grant, grant=grant)

    p = _parser(sub, "grants", "list a user's project grants")
    p.add_argument("user", help="username or id")
    p.set_defaults(func=cmd_list_grants)

    for name, enable in (("pause", False), ("resume", True)):
        what = (
            "refuse pushes to a project (409) until resumed"
            if not enable
            else "accept pushes to a paused project again"
        )
        p = _parser(sub, name, what)
        p.add_argument("project")
        if not enable:
            p.add_argument("--reason")
        p.set_defaults(func=cmd_pause, enable=enable, reason=None)

    p = _parser(sub, "audit", "the newest sync audit rows")
    p.add_argument("--project")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=cmd_audit)
