"""``engram tui``: browse, search and tidy memories in the terminal (Textual).

Textual is imported only when this command runs, so the other commands start fast.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tui",
        help="interactive terminal UI: dashboard, search, memories, timeline, sessions",
        description="Browse the local memory store from the keyboard. Press ? inside for keys.",
    )
    p.add_argument("--project", help="show only this project (switch inside with p)")
    p.add_argument(
        "--theme",
        help="colour theme (default catppuccin-mocha, or $ENGRAM_TUI_THEME): engram-light for "
        "a light screen, ansi-dark/ansi-light for the terminal's own colours, or any Textual theme",
    )
    p.set_defaults(func=cmd_tui)


def cmd_tui(args: argparse.Namespace) -> int:
    from engram.errors import ValidationError
    from engram.project import normalize_project
    from engram.tui.styles import choose_theme

    theme = choose_theme(args.theme)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ValidationError("engram tui needs an interactive terminal (stdin and stdout)")
    from engram.tui.app import EngramApp
    from engram.tui.gateway import Gateway

    project = normalize_project(args.project)[0] if args.project else None
    EngramApp(Gateway(), project=project, theme=theme).run()
    return 0
