"""``engram cloud``: the team server's commands (``serve``, ``migrate``, ``rebuild-read-model``,
``admin …``), registered by :func:`engram_cloud.cli.register_server_commands`.

Client commands (``config``, ``enroll``, ``status`` …) join the same group by calling their own
``register_…(actions)`` next to it. Registration imports only argparse-level code; the server's
database stack loads when a server command runs.
"""

from __future__ import annotations

import argparse

from engram.cli.common import add_json_flag


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "cloud",
        help="the team cloud server (serve, migrate, admin) and its clients",
        description="Share memories through a team server on PostgreSQL (see docs/cloud.md).",
    )
    add_json_flag(parser)
    actions = parser.add_subparsers(dest="cloud_action", metavar="<action>", required=True)
    from engram.cli.cloud_client_commands import register_client_commands
    from engram_cloud.cli import register_server_commands

    register_server_commands(actions)
    register_client_commands(actions)
