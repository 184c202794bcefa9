"""``engram mcp`` (the MCP stdio server), ``engram setup <agent>`` and ``engram protocol``.

Handlers import their modules lazily: the MCP SDK is only loaded by ``engram mcp``.
"""

from __future__ import annotations

import argparse

from engram.cli.common import add_json_flag, emit

AGENT_HELP = "claude-code, claude-desktop, codex, gemini-cli, opencode, cursor or vscode"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp",
        help="run the MCP server for agents (stdio)",
        description="Serve the mem_* tools over MCP on standard input/output. Agents start "
        "this command themselves: see 'engram setup'.",
    )
    p.add_argument(
        "--tools",
        default="",
        metavar="LIST",
        help="tools to expose: profiles agent (default: the agent tools, listed compactly), "
        "admin, all (every tool, with full descriptions and output schemas) and/or tool names, "
        "comma-separated",
    )
    p.add_argument(
        "--project",
        help="save to this project instead of the one detected from the working directory "
        "(also ENGRAM_PROJECT)",
    )
    p.set_defaults(func=cmd_mcp)

    p = sub.add_parser(
        "setup",
        help="add Engram's MCP server to an agent's configuration",
        description=f"Write Engram's MCP server entry into the agent's config file ({AGENT_HELP})"
        ", keeping the rest of the file and a .bak copy. Without an agent, list them.",
    )
    p.add_argument("agent", nargs="?", help=AGENT_HELP)
    p.add_argument(
        "--print",
        dest="print_only",
        action="store_true",
        help="show the entry and where it goes; change nothing",
    )
    p.add_argument("--config", metavar="PATH", help="edit this file instead of the default one")
    p.add_argument(
        "--project",
        help="pin the server to this project (for clients that start it outside the project, "
        "such as Claude Desktop)",
    )
    p.add_argument(
        "--env",
        action="append",
        metavar="KEY=VALUE",
        help="an environment variable for the server (repeatable), e.g. ENGRAM_DATA_DIR=...",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_setup)

    p = sub.add_parser(
        "protocol",
        help="print the memory protocol for an agent's instructions file",
        description="Print the instructions that teach an agent when to save and how to search, "
        "or add them once to an instructions file (CLAUDE.md, AGENTS.md, GEMINI.md…).",
    )
    p.add_argument(
        "--install",
        metavar="FILE",
        help="add the protocol to FILE (created if missing); running it again changes nothing, "
        "and after an Engram upgrade it updates the block it added",
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_protocol)


def cmd_mcp(args: argparse.Namespace) -> int:
    from engram.mcp import server as mcp_server

    mcp_server.run(tools=args.tools, project=args.project)
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    from engram.mcp import setup as agent_setup

    if not args.agent:
        command = agent_setup.server_command()
        rows = [
            {
                "agent": agent.key,
                "name": agent.name,
                "path": str(agent.config_path()),
                "status": agent_setup.status(agent, command=command),
            }
            for agent in agent_setup.AGENTS.values()
        ]
        width = max(len(r["agent"]) for r in rows)
        human = "\n".join(
            f"{r['agent'].ljust(width)}  {r['status']:<31}  {r['path']}" for r in rows
        )
        human += "\n\nRun 'engram setup <agent>' to configure one (--print to preview)."
        emit(args, human, {"agents": rows})
        return 0
    result = agent_setup.setup(
        args.agent,
        config=args.config,
        print_only=args.print_only,
        project=args.project,
        env=agent_setup.parse_env(args.env),
    )
    emit(args, result.message(), result.to_dict())
    return 0


def cmd_protocol(args: argparse.Namespace) -> int:
    from engram.mcp.instructions import PROTOCOL, install

    if not args.install:
        emit(args, PROTOCOL, {"protocol": PROTOCOL})
        return 0
    from pathlib import Path

    from engram.files import write_atomic

    path = Path(args.install).expanduser()
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    status, new = install(old)
    if status != "unchanged":
        write_atomic(path, new.encode("utf-8"))
    human = {
        "added": f"Added the Engram memory protocol to {path}",
        "updated": f"Updated the Engram memory protocol in {path}",
        "unchanged": f"{path} already has the Engram memory protocol; nothing changed.",
    }[status]
    emit(args, human, {"path": str(path), "status": status})
    return 0
