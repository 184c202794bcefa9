"""``engram hub [--port N] [--host H]``: serve the first seed's Hub API over the local store.

The process side mirrors ``engram serve`` (and reuses its socket binding and clean stop): a taken
port is one clear line, a non-loopback address or a missing ``ENGRAM_API_TOKEN`` is warned about,
SIGTERM/SIGINT stop gracefully with exit status 0. Unlike ``serve``, a database that cannot be
opened does not stop the hub: searches answer the seed's 503 until it can be read.
"""

from __future__ import annotations

import argparse
import sys

from engram.cli.cmd_serve import LOG_LEVELS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "hub",
        help="serve the first seed's Hub API (default 127.0.0.1:8000)",
        description="Serve the local store as the first seed's Hub API: GET /, GET /health, "
        "POST /search (regular expressions, RE2), GET /status, docs at /docs. "
        "ENGRAM_API_TOKEN, when set, is the bearer token /search and /status need; "
        "ENGRAM_HUB_HOST and ENGRAM_HUB_PORT set the defaults.",
    )
    p.add_argument("--port", type=int, help="TCP port (default $ENGRAM_HUB_PORT or 8000; 0: any)")
    p.add_argument(
        "--host",
        help="address to listen on (default $ENGRAM_HUB_HOST or 127.0.0.1; anything but "
        "loopback exposes your memories to the network)",
    )
    p.add_argument("--log-level", choices=LOG_LEVELS, default="warning", help="server log detail")
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.set_defaults(func=cmd_hub)


def cmd_hub(args: argparse.Namespace) -> int:
    from engram import settings as config_module
    from engram.cli.cmd_serve import _url, bind, is_loopback, run_server
    from engram.errors import ValidationError

    try:
        config = config_module.load()
    except ValueError as exc:  # e.g. ENGRAM_HUB_PORT=abc
        raise ValidationError(str(exc)) from None
    port = config.hub_port if args.port is None else args.port
    if not 0 <= port <= 65535:
        raise ValidationError(f"port must be between 0 and 65535, got {port}", field="port")
    host = (args.host or config.hub_host).strip()
    sock = bind(host, port, who="engram hub", setting="ENGRAM_HUB_PORT")
    try:
        if not config.api_token:
            sys.stderr.write(
                "engram hub: warning: ENGRAM_API_TOKEN is not set: /search and /status answer "
                "anyone who can reach this address (local development mode)\n"
            )
        if not is_loopback(sock):
            sys.stderr.write(
                f"engram hub: warning: listening on {host}, not loopback: anyone who can reach "
                "this machine can read your memories"
                + ("" if config.api_token else " (set ENGRAM_API_TOKEN)")
                + "\n"
            )

        from engram.cli.cmd_serve import _answer_bound_address
        from engram.http.hub import HubIndex, create_hub

        index = HubIndex(_answer_bound_address(sock, config))
        app = create_hub(index, token=config.api_token)
        run_server(
            app,
            sock,
            args,
            listening=f"engram hub: listening on {_url(sock)} (database {config.db_path}; "
            f"API documentation at {_url(sock)}/docs)",
            what="the Hub API",
        )
    finally:
        sock.close()
        sys.stderr.write("engram hub: stopped\n")
    return 0
