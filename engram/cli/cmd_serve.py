"""``engram serve [port] [--port N] [--host H]``: run the local HTTP API under uvicorn.

This module owns the process: it binds the socket itself (so a taken port is one clear line, not
a traceback), warns when the API is reachable from other machines, and turns SIGTERM/SIGINT into
uvicorn's graceful shutdown — requests in flight finish, then the store is closed — followed by
exit status 0.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when serving: every `engram` command loads this module
    import socket

    from engram.settings import Config

GRACEFUL_SHUTDOWN_SECONDS = 30
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run the local HTTP API (default 127.0.0.1:7437)",
        description="Serve the local store over HTTP (OpenAPI document at /schema). "
        "ENGRAM_PORT and ENGRAM_HOST set the defaults; ENGRAM_HTTP_TOKEN, when set, guards "
        "deletes, export, import and project merges with a bearer token. Only requests for "
        "a loopback Host (or one in ENGRAM_HTTP_ALLOWED_HOSTS), without a foreign Origin and "
        "with JSON bodies are served: web pages cannot use it.",
    )
    p.add_argument("port_arg", nargs="?", type=int, metavar="port", help="same as --port")
    p.add_argument("--port", type=int, help="TCP port (default $ENGRAM_PORT or 7437; 0: any)")
    p.add_argument(
        "--host",
        help="address to listen on (default $ENGRAM_HOST or 127.0.0.1; anything but loopback "
        "exposes your memories to the network)",
    )
    p.add_argument("--log-level", choices=LOG_LEVELS, default="warning", help="server log detail")
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.set_defaults(func=cmd_serve)


def _choose_port(args: argparse.Namespace, default: int) -> int:
    from engram.errors import ValidationError

    if args.port is not None and args.port_arg is not None and args.port != args.port_arg:
        raise ValidationError(f"two different ports given: {args.port_arg} and --port {args.port}")
    port = args.port if args.port is not None else args.port_arg
    port = default if port is None else port
    if not 0 <= port <= 65535:
        raise ValidationError(f"port must be between 0 and 65535, got {port}", field="port")
    return port


def bind(
    host: str, port: int, *, who: str = "engram serve", setting: str = "ENGRAM_PORT"
) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one, which ``getsockname`` names), or an
    error that says what to do about it (``who`` and ``setting`` name the command and its port
    variable in that error)."""
    import errno
    import socket

    from engram.errors import EngramError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise EngramError(f"cannot listen on {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise EngramError(
                f"port {port} on {host} is already in use: is another '{who}' running? "
                f"Stop it, or pick another port with --port N (or {setting}; 0 picks a free one)"
            ) from None
        if exc.errno == errno.EACCES:
            raise EngramError(
                f"not allowed to listen on {host}:{port}: ports below 1024 need privileges"
            ) from None
        raise EngramError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def is_loopback(sock: socket.socket) -> bool:
    import ipaddress

    return ipaddress.ip_address(sock.getsockname()[0]).is_loopback


def _answer_bound_address(sock: socket.socket, config: Config) -> Config:
    """Bound to one specific address, the server also answers requests naming it in ``Host``
    (an IP address cannot be DNS-rebound, so this stays safe against web pages)."""
    import dataclasses
    import ipaddress

    address = sock.getsockname()[0]
    if ipaddress.ip_address(address).is_unspecified or address in config.http_allowed_hosts:
        return config
    shown = f"[{address}]" if ":" in address else address
    return dataclasses.replace(config, http_allowed_hosts=(*config.http_allowed_hosts, shown))


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _stop_cleanly(signum: int, _frame: object) -> None:
    # uvicorn catches SIGTERM/SIGINT while serving, shuts down gracefully, puts this handler
    # back and raises the signal again: ending with SystemExit(0) makes a requested stop a
    # clean exit (systemd, supervisors) and still runs the `finally` that closes the store.
    raise SystemExit(0)


def run_server(
    app: Any, sock: socket.socket, args: argparse.Namespace, *, listening: str, what: str
) -> None:
    """Serve ``app`` on the bound ``sock`` with uvicorn until SIGTERM/SIGINT (a clean stop:
    exit status 0), after saying ``listening`` on stderr; ``what`` names the server in the
    error raised when it could not start. Shared by ``engram serve`` and ``engram hub``."""
    import signal

    import uvicorn

    from engram.errors import EngramError

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level=args.log_level,
            access_log=args.access_log,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            server_header=False,
        )
    )
    sys.stderr.write(listening + "\n")
    sys.stderr.flush()
    previous = {sig: signal.signal(sig, _stop_cleanly) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        raise EngramError(f"{what} failed to start (see the messages above)")


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from engram import settings as config_module
    from engram.errors import ValidationError
    from engram.local_servers import LocalServer, announce, withdraw
    from engram.store import Store
    from engram.times import now_text

    try:
        config = config_module.load()
    except ValueError as exc:  # e.g. ENGRAM_PORT=abc
        raise ValidationError(str(exc)) from None
    port = _choose_port(args, config.http_port)
    host = (args.host or config.http_host).strip()
    sock = bind(host, port)
    try:
        store = Store.open(config=config)
    except BaseException:
        sock.close()
        raise
    try:
        if not is_loopback(sock):
            config = _answer_bound_address(sock, config)
            guard = (
                "deletes, export and import need the ENGRAM_HTTP_TOKEN bearer token"
                if config.http_token
                else "set ENGRAM_HTTP_TOKEN to at least guard deletes, export and import"
            )
            names = ", ".join(("localhost", "127.0.0.1", *config.http_allowed_hosts))
            sys.stderr.write(
                f"engram serve: warning: listening on {host}, not loopback: anyone who can "
                f"reach this machine can read and write your memories ({guard}). Requests "
                f"must name one of these hosts: {names} (ENGRAM_HTTP_ALLOWED_HOSTS adds more)\n"
            )

        from engram.http.app import BackgroundService, create_app
        from engram.semantic import background
        from engram.store.conflicts import ConflictService, ConflictWorker
        from engram.sync.cloud.autosync import AutosyncService, autosync_from_env
        from engram.sync.cloud.status import CloudStatus

        # Conflict checks of saved memories run here, off the save path (docs/graph.md).
        services: list[BackgroundService] = [ConflictService(ConflictWorker(store))]
        if background.wanted(store):  # the semantic extra: new memories get their vectors
            services.append(background.VectorizerService(background.BackgroundVectorizer(store)))
        autosync = autosync_from_env(store)  # None unless ENGRAM_CLOUD_AUTOSYNC=1
        if autosync:
            services.append(AutosyncService(autosync))
        if config.auto_purge:  # hard-deleted text leaves the files a while after the delete
            from engram.store.purge_worker import PurgeService, PurgeWorker

            services.append(PurgeService(PurgeWorker(store)))
        app = create_app(
            store,
            config=config,
            token=config.http_token,
            services=services,
            sync_source=CloudStatus(autosync),
        )
        # Other commands (engram cloud status) find this server whatever its port; a record
        # left by a process that died is recognised as stale (engram/local_servers.py).
        announce(config.data_dir, LocalServer(os.getpid(), _url(sock), now_text(), bool(autosync)))
        try:
            run_server(
                app,
                sock,
                args,
                listening=f"engram serve: listening on {_url(sock)} (database {store.path}; "
                f"API description at {_url(sock)}/schema)",
                what="the HTTP server",
            )
        finally:
            withdraw(config.data_dir)
    finally:
        sock.close()
        store.close()
        sys.stderr.write("engram serve: stopped\n")
    return 0
